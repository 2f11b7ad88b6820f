"""records: each stage's manifest is a declared type; writing one checks it, and the cost
table reads its typed fields, one name per concept."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from conftest import schema_defaults

from irflow.core import contracts
from irflow.core.manifest import Manifest
from irflow.evaluation.cost import CostModel
from irflow.retrieval.bm25 import build_index
from irflow.retrieval.index import index_file
from irflow.workflow.families import family

BM25_INDEX = {
    "stage": "index_bm25",
    "dataset": "d",
    "system": "bm25",
    "settings": {"k1": 0.9},
    "device": "cpu",
    "index_bytes": 100,
    "documents": 3,
    "terms": 5,
    "postings": 9,
}


def written(path, facts: dict) -> dict:
    Manifest(path, **facts).write()
    return json.loads(path.read_text())


def test_a_record_with_a_misspelt_field_is_refused_and_not_written(tmp_path):
    path = tmp_path / "index_bm25.json"
    with pytest.raises(ValueError, match=r"index_bm25 record has no field 'index_second'") as e:
        written(path, BM25_INDEX | {"index_second": 2.0})
    assert "did you mean 'index_seconds'?" in str(e.value)
    assert not path.exists()
    assert written(path, BM25_INDEX | {"index_seconds": 2.0})["index_seconds"] == 2.0


def test_a_missing_or_mistyped_field_is_refused_naming_the_stage_and_field(tmp_path):
    path = tmp_path / "m.json"
    with pytest.raises(ValueError, match=r"the index_bm25 record lacks its field 'index_seconds'"):
        written(path, BM25_INDEX)
    with pytest.raises(ValueError, match=r"index_bm25 record's field 'index_bytes' is '100'"):
        written(path, BM25_INDEX | {"index_seconds": 2.0, "index_bytes": "100"})
    # An open record (a model's provenance beside its declared fields) refuses a near-miss.
    embed = {"stage": "embed", "rows": 4, "rows_encoded": 4, "rows_resumed": 0}
    embed |= {"device": "cpu", "revision": "abc", "similarity_from": "model"}
    with pytest.raises(ValueError, match=r"embed record has no field 'encode_second'"):
        written(path, embed | {"encode_second": 1.0})
    assert written(path, embed | {"encode_seconds": 1.0})["revision"] == "abc"


def test_the_index_jobs_of_every_family_name_their_build_time_index_seconds(tmp_path):
    """faiss' index job named it build_seconds, BM25's index_seconds (patched per family in
    the cost table): both writers now give index_seconds, and their records are accepted."""
    vectors = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    embeddings = tmp_path / "embeddings.parquet"
    ids = [f"d{i}" for i in range(50)]
    table = {"id": ids, "vector": contracts.vector_array(vectors)}
    contracts.write_table(pa.table(table, schema=contracts.embeddings_schema(8)), embeddings)
    faiss_facts = index_file(embeddings, {"type": "flat"}, tmp_path / "flat.faiss")
    corpus = tmp_path / "corpus.parquet"
    rows = [{"doc_id": f"d{i}", "title": "", "text": f"word{i} shared"} for i in range(5)]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus)
    settings = schema_defaults({"type": "bm25"})
    bm25_facts = build_index(corpus, settings, tmp_path / "bm25")
    assert "index_seconds" in faiss_facts and "index_seconds" in bm25_facts
    wildcards = {"dataset": "d", "model": "m"}
    written(tmp_path / "i.json", {"stage": "index", "device": "cpu"} | wildcards | faiss_facts)
    written(
        tmp_path / "b.json",
        {"stage": "index_bm25", "settings": settings, "device": "cpu"} | bm25_facts,
    )


CONFIG = {
    "models": {"m": {"long_documents": {"strategy": "truncate"}}, "s": {}, "c": {}},
    "indexes": {"flat": {"type": "flat", "shard_rows": None}},
    "retrievers": {
        "bm25": {"type": "bm25"},
        "dense": {"type": "dense", "model": "m", "index": "flat"},
        "splade": {"type": "sparse", "model": "s"},
        "colbert": {"type": "late-interaction", "model": "c"},
        "mine": {"type": "python", "class": "x:Y"},
    },
}
KINDS = {name: spec["type"] for name, spec in CONFIG["retrievers"].items()}


def manifests(tmp_path, build_time: str) -> dict:
    """The manifests of every family's jobs, as JSON files written by Manifest, each build
    time under the name ``build_time``; every other fact a reader needs beside it."""
    encoded = {"rows": 10, "rows_encoded": 10, "rows_resumed": 0, "encode_seconds": 2.0}
    encoded |= {"device": "cpu", "latency": {"q1": 0.01}}
    searched = {"settings": {}, "device": "cpu", "rows": 10, "queries": 1, "search_seconds": 0.1}
    searched |= {"ms_per_query_batched": 100.0, "self_matches_removed": 0, "short_queries": 0}
    searched |= {"short_query_examples": {}, "latency": {"q1": 0.02}}
    built = {"index_bytes": 64, build_time: 7.0}
    faiss = {"index": {"type": "flat"}, "device": "cpu", "dimension": 8, "documents": 10}
    faiss |= {"faiss_version": "1.8"}
    records = {
        ("index_bm25", "d", "bm25"): BM25_INDEX | built,
        ("index", "d", "m", "flat"): {"stage": "index"} | faiss | built,
        ("embed", "d", "m", "corpus"): {"stage": "embed"} | encoded,
        ("embed", "d", "m", "queries"): {"stage": "embed"} | encoded,
        ("sparse", "d", "s", "corpus"): {"stage": "encode_vectors"} | encoded,
        ("sparse", "d", "s", "queries"): {"stage": "encode_vectors"} | encoded,
        ("tokens", "d", "c", "corpus"): {"stage": "encode_vectors"} | encoded,
        ("tokens", "d", "c", "queries"): {"stage": "encode_vectors"} | encoded,
        ("retrieve", "d", "bm25"): {"stage": "retrieve"} | searched,
        ("retrieve", "d", "dense"): {"stage": "retrieve"} | searched,
    }
    for system in ("splade", "colbert", "mine"):
        records[("retrieve", "d", system)] = {"stage": "retrieve"} | searched | built
    paths = {}
    for key, facts in records.items():
        paths[key] = tmp_path / "_".join(key)
        paths[key].write_text(json.dumps(facts))
    return paths


def cost_table(paths: dict):
    from irflow.core.records import read_record

    model = CostModel(CONFIG, KINDS, lambda *key: read_record(paths[key]), family)
    return model.table(["d"]).set_index("system")


def test_every_family_reads_its_index_build_time_from_index_seconds(tmp_path):
    table = cost_table(manifests(tmp_path, "index_seconds"))
    assert table["index_build_seconds"].to_dict() == {s: 7.0 for s in sorted(KINDS)}
    assert (table["index_bytes"].drop("mine").dropna() == 64).all()
    # Encoding throughput, one rule for every family that encodes: rows over encode_seconds.
    encoders = ["colbert", "dense", "splade"]
    assert table.loc[encoders, "encode_docs_per_second"].tolist() == [5.0, 5.0, 5.0]


def test_an_older_faiss_index_manifest_reads_its_build_seconds_as_index_seconds(tmp_path):
    paths = manifests(tmp_path, "index_seconds")
    older = json.loads(paths[("index", "d", "m", "flat")].read_text())
    older["build_seconds"] = older.pop("index_seconds")
    paths[("index", "d", "m", "flat")].write_text(json.dumps(older))
    assert cost_table(paths).loc["dense", "index_build_seconds"] == 7.0


def test_a_rerank_record_takes_its_scorers_provenance(tmp_path, minilm_path):
    """Rerank's record is open: the cross-encoder's provenance (model, files_md5, dtype,
    max_length, backend) sits beside its declared fields, as scripts/rerank.py writes it."""
    from tiny_models import build_tiny_cross_encoder

    from irflow.retrieval.rerank import CrossEncoderScorer

    model = build_tiny_cross_encoder(tmp_path / "cross-encoder", minilm_path)
    spec = {"id": str(model), "revision": None, "max_length": None, "batch_size": 4}
    scorer = CrossEncoderScorer.load(spec | {"dtype": "float32", "device": "cpu"})
    job = {"stage": "rerank", "dataset": "d", "system": "bm25+ce@10", "settings": {}}
    job |= {"first_stage": "bm25", "k": 10, "latency": {"q1": 0.1}, "rows": 10}
    assert written(tmp_path / "rerank.json", job | scorer.provenance)["backend"] == "torch"
    del job["first_stage"]
    with pytest.raises(ValueError, match="rerank record lacks its field 'first_stage'"):
        written(tmp_path / "rerank.json", job | scorer.provenance)
