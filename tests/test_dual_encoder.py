"""Dual encoders (issue 48, item 8): a dense retriever names a query model beside its document
model, as DPR's "two-tower bi-encoder" (BEIR, shared/references/beir.txt line 108) encodes
questions and passages with two models. Each model's vectors are cached under its own name.

The real MiniLM serves as both models, the query model under another name with a query prompt
(so its query vectors differ from the document model's); the run's scores are the inner
products of the query model's query vectors and the document model's document vectors.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import (
    REPO,
    SCHEMA,
    TINY_CORPUS,
    TINY_QRELS,
    TINY_QUERIES,
    index_spec,
    minilm_spec,
    place_local_datasets,
    snakemake,
    write_beir,
)
from pydantic import ValidationError

from irflow.core import contracts
from irflow.core.errors import InputError
from irflow.encoding.models import Encoder
from irflow.evaluation.published import matches
from irflow.retrieval.index import index_file
from irflow.retrieval.retrieve import DenseSearcher
from irflow.retrieval.runs import SearchRequest
from irflow.workflow.config import expand_config, validate_config
from irflow.workflow.families import family
from irflow.workflow.families.dense import QueryEncoder, query_model
from irflow.workflow.run_inputs import Plan

QUERY_PROMPT = "question: "


def config_of(minilm_path) -> dict:
    model = {"id": str(minilm_path), "batch_size": 8, "device": "cpu"}
    return {
        "datasets": {"tiny": {"source": {"type": "path", "path": "tiny"}}},
        "models": {"minilm": model, "minilm-q": model | {"query_prompt": QUERY_PROMPT}},
        "retrievers": {
            "single": {"type": "dense", "model": "minilm"},
            "dual": {"type": "dense", "model": "minilm", "query_model": "minilm-q"},
        },
        "offline": True,
    }


def vectors(path) -> dict[str, np.ndarray]:
    table = pq.read_table(path)
    matrix = contracts.vector_matrix(table.column("vector").combine_chunks())
    return dict(zip(table.column("id").to_pylist(), np.asarray(matrix, dtype=np.float64)))


@pytest.mark.e2e
def test_a_dual_encoder_scores_the_query_models_queries_against_the_document_models_documents(
    tmp_path, minilm_path
):
    """Today the schema refused `query_model` (additionalProperties: false)."""
    write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = config_of(minilm_path)
    runs = ["results/runs/tiny/dual.parquet", "results/embeddings/tiny/minilm/queries.parquet"]
    snakemake(tmp_path, *runs, config=config)
    embeddings = tmp_path / "results" / "embeddings" / "tiny"
    # The query model embeds the queries alone; the document model's vectors serve both runs.
    assert sorted(p.name for p in (embeddings / "minilm-q").glob("*.parquet")) == [
        "queries.parquet"
    ]
    documents = vectors(embeddings / "minilm" / "corpus.parquet")
    queries = vectors(embeddings / "minilm-q" / "queries.parquet")
    single_queries = vectors(embeddings / "minilm" / "queries.parquet")
    # The query model's vectors are its prompt's, the document model's its own.
    encoder = Encoder.load(minilm_spec(minilm_path))
    ids = [q["_id"] for q in TINY_QUERIES if q["_id"] in queries]
    texts = [next(q["text"] for q in TINY_QUERIES if q["_id"] == i) for i in ids]
    prompted = np.asarray(encoder.encode(texts, QUERY_PROMPT), dtype=np.float64)
    plain = np.asarray(encoder.encode(texts, ""), dtype=np.float64)
    for i, query_id in enumerate(ids):
        assert queries[query_id] == pytest.approx(prompted[i], abs=1e-5)
        assert single_queries[query_id] == pytest.approx(plain[i], abs=1e-5)
        assert not np.allclose(queries[query_id], single_queries[query_id], atol=1e-3)
    # Each score is the inner product (cosine: MiniLM's vectors are unit vectors) of the query
    # model's query vector and the document model's document vector, not the document model's
    # own query vector.
    run = pq.read_table(tmp_path / "results" / "runs" / "tiny" / "dual.parquet").to_pylist()
    assert run
    for row in run:
        expected = float(queries[row["query_id"]] @ documents[row["doc_id"]])
        assert row["score"] == pytest.approx(expected, abs=1e-5), row
    single = [float(single_queries[r["query_id"]] @ documents[r["doc_id"]]) for r in run]
    assert max(abs(r["score"] - s) for r, s in zip(run, single)) > 1e-3


def test_a_single_model_retrievers_inputs_and_settings_stay_as_they_were(tmp_path, monkeypatch):
    """A retriever without `query_model` reads its own model's vectors, its settings hold no
    new key (its runs are not made again), and only a query model that embeds no documents
    gets the queries-only job."""
    monkeypatch.chdir(tmp_path)
    place_local_datasets(config_of(tmp_path))
    config = validate_config(expand_config(config_of(tmp_path)), SCHEMA)
    plan = Plan(config, REPO)
    single = plan.dense_inputs(type("W", (), {"dataset": "tiny", "system": "single"}))
    dual = plan.dense_inputs(type("W", (), {"dataset": "tiny", "system": "dual"}))
    assert single["queries"] == "results/embeddings/tiny/minilm/queries.parquet"
    assert dual["queries"] == "results/embeddings/tiny/minilm-q/queries.parquet"
    assert single["corpus"] == dual["corpus"] == "results/embeddings/tiny/minilm/corpus.parquet"
    assert config["retrievers"]["single"] == {
        "type": "dense",
        "model": "minilm",
        "index": "flat",
        "query_batch_size": 1024,
    }
    assert plan.dense_models == ["minilm"] and plan.query_only_models == ["minilm-q"]
    # The dual encoder is not the single model's published system: its query model differs.
    identities = plan.published_identities
    assert identities["dual"] == {
        "family": "dense",
        "model": str(tmp_path),
        "query_model": str(tmp_path),
    }
    assert matches(identities["single"], {"family": "dense", "model": str(tmp_path)})
    assert not matches(identities["dual"], {"family": "dense", "model": str(tmp_path)})


def test_an_unknown_query_model_is_refused_naming_its_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = config_of(tmp_path)
    place_local_datasets(config)
    config["retrievers"]["dual"]["query_model"] = "minilm-x"
    with pytest.raises(Exception, match=r"retrievers\.dual\.query_model"):
        validate_config(expand_config(config), SCHEMA)


def four_documents_flat_index(folder):
    """Four documents whose vectors are the unit vectors of 4 dimensions, and their flat index
    (folder/flat.faiss): the embeddings file and the index's entry."""
    rows, unit_vectors = folder / "corpus.parquet", np.eye(4, dtype=np.float32)
    contracts.write_table(
        pa.table(
            {"id": ["d1", "d2", "d3", "d4"], "vector": contracts.vector_array(unit_vectors)},
            schema=contracts.embeddings_schema(4),
        ),
        rows,
    )
    spec = index_spec(type="flat")
    index_file(rows, spec, folder / "flat.faiss")
    return rows, spec


def test_query_vectors_of_another_size_than_the_documents_are_refused_naming_both(tmp_path):
    """A query model whose vectors are not the document model's size: today faiss stopped the
    search with a bare assertion; now the search names both sizes and the key."""
    rows, spec = four_documents_flat_index(tmp_path)
    searcher = DenseSearcher(tmp_path / "flat.faiss", spec, rows, 8)
    queries = pa.table(
        {"id": ["q1"], "vector": contracts.vector_array(np.ones((1, 3), dtype=np.float32))},
        schema=contracts.embeddings_schema(3),
    )
    with pytest.raises(InputError) as error:
        searcher.search(queries, SearchRequest.of({"top_k": 2, "remove_self_matches": False}))
    assert str(error.value) == (
        f"{rows}, field 'vector': the document vectors have 4 dimensions and the query vectors "
        "3: a dense retriever's query_model must give vectors of its model's size"
    )


def test_the_dense_job_types_the_retrievers_entry_and_its_query_models(tmp_path, minilm_path):
    """The dense family's searcher types the retriever's entry (irflow.core.settings_types.Dense)
    where the job receives it: the schema's query batch size applies where the entry names none
    (a dict's lookup failed), and a misspelled query_model is refused, named, where a dict's
    lookup searched with the document model's queries instead. The query model's entry is
    typed (irflow.core.settings_types.ModelModel) where its encoder receives it."""
    rows, index = four_documents_flat_index(tmp_path)
    files = {"corpus": rows, "index": tmp_path / "flat.faiss"}
    searcher = family("dense").open_searcher(
        files, {"retriever": {"type": "dense", "model": "d"}, "index": index}, 1
    )
    assert searcher.batch_size == 1024
    assert query_model({"type": "dense", "model": "d", "query_model": "q"}) == "q"
    with pytest.raises(ValidationError, match="querymodel"):
        query_model({"type": "dense", "model": "d", "querymodel": "q"})
    encoder = QueryEncoder({"id": str(minilm_path), "query_prompt": QUERY_PROMPT}, None, 1)
    assert (encoder.spec.query_prompt, encoder.spec.batch_size) == (QUERY_PROMPT, 64)
