"""Dense scores by the model's own similarity (issue 38 item 3): sentence-transformers'
``similarity_fn_name``, unless the config's ``models.<name>.similarity`` sets one."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import yaml
from conftest import REPO, SCHEMA, TINY_CORPUS, index_spec, minilm_spec, minimal_config
from tiny_models import build_tiny_bi_encoder, build_tiny_sentence_transformer

import irflow.encoding.embed
from irflow.core import contracts
from irflow.core.errors import ConfigError
from irflow.core.manifest import Manifest
from irflow.core.records import parse
from irflow.encoding.embed import embed_file, read_embeddings, whole_file_facts
from irflow.encoding.models import Encoder
from irflow.evaluation.cost import CostModel
from irflow.retrieval.index import index_file
from irflow.retrieval.retrieve import dense_search
from irflow.retrieval.scorers import BiEncoderScorer
from irflow.workflow.config import validate_config
from irflow.workflow.families import family

QUERIES = ["why do cats purr", "what is the sun"]


@pytest.fixture(scope="module")
def dot_model(tmp_path_factory, minilm_path):
    """A tiny model published with similarity_fn_name "dot", as TAS-B is."""
    folder = tmp_path_factory.mktemp("tiny-dot") / "model"
    return build_tiny_sentence_transformer(folder, minilm_path, "dot")


def tiny_spec(path, **settings) -> dict:
    return minilm_spec(path, chunk_size=64) | settings


@pytest.fixture
def tables(tmp_path):
    rows = [{"doc_id": d["_id"], "title": d["title"], "text": d["text"]} for d in TINY_CORPUS]
    corpus, queries = tmp_path / "corpus.parquet", tmp_path / "queries.parquet"
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus)
    asked = [{"query_id": f"q{i}", "text": text} for i, text in enumerate(QUERIES)]
    contracts.write_table(pa.Table.from_pylist(asked, contracts.QUERIES), queries)
    return corpus, queries


def embed_and_search(encoder, tables, folder):
    corpus, queries = tables
    embed_file(encoder, corpus, "corpus", folder / "corpus-emb.parquet")
    embed_file(encoder, queries, "queries", folder / "queries-emb.parquet")
    index = index_spec(type="flat")
    index_file(folder / "corpus-emb.parquet", index, folder / "index.faiss")
    run, _ = dense_search(
        folder / "index.faiss",
        index,
        folder / "corpus-emb.parquet",
        folder / "queries-emb.parquet",
        10,
        False,
        batch_size=8,
        latency_queries=0,
    )
    doc_ids, documents = read_embeddings(folder / "corpus-emb.parquet")
    query_ids, queries = read_embeddings(folder / "queries-emb.parquet")
    return run, dict(zip(doc_ids, documents)), dict(zip(query_ids, queries))


def test_saved_similarity_is_read(dot_model):
    saved = json.loads((dot_model / "config_sentence_transformers.json").read_text())
    assert saved["similarity_fn_name"] == "dot"


def test_a_dot_model_is_scored_by_dot_product_of_unnormalised_vectors(dot_model, tables, tmp_path):
    encoder = Encoder.load(tiny_spec(dot_model))
    run, documents, queries = embed_and_search(encoder, tables, tmp_path)
    norms = np.linalg.norm(np.stack(list(documents.values())), axis=1)
    assert np.abs(norms - 1).min() > 0.1, norms  # as the model gives them, not unit length
    # The provenance goes into the embed manifest (scripts/_common.py encode_sides).
    assert encoder.provenance["similarity"] == "dot"
    assert encoder.provenance["similarity_from"] == "model"
    raw = encoder.model.encode(["Cats Cats purr and sleep in the sun."], normalize_embeddings=False)
    np.testing.assert_allclose(documents["d1"], raw[0], rtol=1e-5)
    for row in run.itertuples():
        expected = float(np.dot(queries[row.query_id], documents[row.doc_id]))
        assert row.score == pytest.approx(expected, rel=1e-5)
    # The bi-encoder reranker scores the same vectors the same way.
    scorer = BiEncoderScorer(encoder)
    texts = contracts.document_texts(
        [d["title"] for d in TINY_CORPUS], [d["text"] for d in TINY_CORPUS]
    )
    scores = scorer.score_queries([QUERIES[0]], [texts])[0]
    expected = [float(np.dot(queries["q0"], documents[d["_id"]])) for d in TINY_CORPUS]
    np.testing.assert_allclose(scores, expected, rtol=1e-5)
    assert scorer.provenance["similarity"] == "dot"


def test_an_explicit_similarity_wins(dot_model, tables, tmp_path):
    encoder = Encoder.load(tiny_spec(dot_model, similarity="cosine"))
    assert encoder.provenance["similarity"] == "cosine"
    assert encoder.provenance["similarity_from"] == "config"
    run, documents, queries = embed_and_search(encoder, tables, tmp_path)
    norms = np.linalg.norm(np.stack(list(documents.values())), axis=1)
    np.testing.assert_allclose(norms, 1, atol=1e-5)
    for row in run.itertuples():
        cosine = np.dot(queries[row.query_id], documents[row.doc_id])
        assert row.score == pytest.approx(float(cosine), rel=1e-5)


def test_a_model_saved_without_a_similarity_is_cosine(minilm_path, tmp_path, caplog):
    """all-MiniLM-L6-v2's config_sentence_transformers.json (sentence-transformers 2.0.0) names
    none; sentence-transformers then makes it cosine, and so does irflow. Its Normalize module
    makes its vectors unit length anyway; a model without one is warned about."""
    saved = json.loads((minilm_path / "config_sentence_transformers.json").read_text())
    assert "similarity_fn_name" not in saved
    minilm = Encoder.load(minilm_spec(minilm_path)).provenance
    assert (minilm["similarity"], minilm["similarity_from"]) == (
        "cosine",
        "sentence-transformers' default",
    )
    assert "names no similarity_fn_name" not in caplog.text
    plain = build_tiny_bi_encoder(tmp_path / "plain", minilm_path)  # no Normalize module
    assert Encoder.load(tiny_spec(plain)).provenance["similarity"] == "cosine"
    assert "names no similarity_fn_name" in caplog.text
    assert "similarity: dot" in caplog.text


def test_a_distance_similarity_is_refused_unless_set(tmp_path, minilm_path):
    model = build_tiny_sentence_transformer(tmp_path / "model", minilm_path, "euclidean")
    with pytest.raises(ConfigError, match=r"'euclidean'.*models.<name>.similarity"):
        Encoder.load(tiny_spec(model))
    assert Encoder.load(tiny_spec(model, similarity="dot")).provenance["similarity"] == "dot"


class Killed(RuntimeError):
    pass


def killed(*args):
    raise Killed


def test_the_similarity_keys_parts_shards_and_the_cost_table(
    dot_model, tables, tmp_path, monkeypatch
):
    corpus, _ = tables
    dot = Encoder.load(tiny_spec(dot_model))
    cosine = Encoder(dot.model, dot.spec, dot.device, dot.provenance | {"similarity": "cosine"})
    out = tmp_path / "emb.parquet"
    with monkeypatch.context() as patch:  # killed with every part written
        patch.setattr(irflow.encoding.embed, "concatenate", killed)
        with pytest.raises(Killed):
            embed_file(dot, corpus, "corpus", out)
    # A job resumed under the other similarity encodes every row again, to unit vectors.
    facts = embed_file(cosine, corpus, "corpus", out)
    assert facts["rows_resumed"] == 0
    _, vectors = read_embeddings(out)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    shards = [
        facts | dot.provenance | {"shard": 0},
        facts | dot.provenance | {"shard": 1},
    ]
    manifest = whole_file_facts(shards)
    assert (manifest["similarity"], manifest["similarity_from"]) == ("dot", "model")
    config = {
        "models": {"m": {"id": "m", "long_documents": {"strategy": "truncate"}}},
        "indexes": {"flat": {"type": "flat", "shard_rows": None}},
        "retrievers": {"dense": {"type": "dense", "model": "m", "index": "flat"}},
    }
    manifests = {
        ("embed", "d", "m", "corpus"): manifest,
        ("embed", "d", "m", "queries"): {"latency": {"q1": 0.01}},
        ("retrieve", "d", "dense"): {"latency": {"q1": 0.01}},
        ("index", "d", "m", "flat"): {"index_bytes": 1, "index_seconds": 1.0},
    }
    cost = CostModel(
        config, {"dense": "dense"}, lambda *key: parse({"stage": key[0]} | manifests[key]), family
    ).table(["d"])
    assert cost["similarity"].tolist() == ["dot"]


# Dot-product models whose published copies name no similarity_fn_name (docs/retrievers.md):
# a shipped config that names one must set it, or it would be scored by cosine.
UNNAMED_DOT_MODELS = (
    "msmarco-distilbert-base-tas-b",
    "msmarco-roberta-base-ance-firstp",
    "contriever",
)


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_score_dot_product_models_by_dot_product(path):
    models = (yaml.safe_load(path.read_text()) or {}).get("models") or {}
    for name, spec in models.items():
        if any(model in spec["id"] for model in UNNAMED_DOT_MODELS):
            assert spec.get("similarity") == "dot", f"{path.name}: models.{name}"


def test_normalize_is_refused_with_its_key_named(tmp_path):
    config = minimal_config(models={"m": {"id": "org/bi-encoder", "normalize": False}})
    with pytest.raises(ConfigError, match="normalize"):
        validate_config(config, SCHEMA)


class Named(dict):
    """A Snakemake namedlist stand-in: items as attributes too."""

    __getattr__ = dict.__getitem__


def test_the_embed_manifest_records_the_similarity(dot_model, tables, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    from _common import encode_sides

    corpus, queries = tables
    encoder = Encoder.load(tiny_spec(dot_model))
    out = Named(
        manifest=tmp_path / "corpus.json",
        embeddings=tmp_path / "corpus.parquet",
        query_manifest=tmp_path / "queries.json",
        query_embeddings=tmp_path / "queries.parquet",
    )
    snakemake = Named(
        input=Named(texts=corpus, query_texts=queries),
        output=out,
        params=Named(side="corpus", latency_queries=0),
        config={"models": {"m": tiny_spec(dot_model)}},
        wildcards=Named(model="m"),
    )

    def embed_side(side, prefix, texts, target):
        return embed_file(encoder, texts, side, target)

    encode_sides(
        snakemake,
        Manifest(out.manifest, stage="embed"),
        "embeddings",
        encoder.provenance,
        embed_side,
        None,
    )
    for manifest in (out.manifest, out.query_manifest):
        record = json.loads(manifest.read_text())
        assert (record["similarity"], record["similarity_from"]) == ("dot", "model")
        assert record["settings"]["similarity"] is None  # the config's: the model's own
