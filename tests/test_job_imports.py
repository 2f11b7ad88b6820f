"""Jobs load what they use (issue 52): a retrieve job, its script run in a fresh interpreter
as Snakemake runs it, imports its own stage's modules, none of the derived datasets' or the
analyses', and no LLM client."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO, index_spec, schema_defaults
from script_jobs import run_scripts

from irflow.core import contracts
from irflow.retrieval.bm25 import build_index

DOCUMENTS = {
    "d1": "the cat sat on the mat",
    "d2": "dogs chase cats in the garden",
    "d3": "a quiet garden with a cat",
}
QUERIES = {"q1": "cat garden", "q2": "dogs"}


def not_of_the_stage(modules: list[str]) -> list[str]:
    """The modules a retrieve job has no use for: the derived datasets', the analyses', the
    LLM client's library."""
    return [
        name
        for name in modules
        if name.split(".")[:2] in (["irflow", "derived"], ["irflow", "analyses"])
        or name.split(".")[0] == "openai"
    ]


def retrieve_job(tmp_path, rule: str, inputs: dict, settings: dict) -> dict:
    """The snakemake object's parts of a retrieve job of system ``s`` on dataset ``d``."""
    (tmp_path / "source.json").write_text(json.dumps({"checksum": "c"}))
    return {
        "input": {"source": str(tmp_path / "source.json")} | inputs,
        "output": {
            name: str(tmp_path / "out" / f"s.{suffix}")
            for name, suffix in (("run", "parquet"), ("trec", "trec"), ("manifest", "json"))
        },
        "params": {"settings": settings},
        "wildcards": {"dataset": "d", "system": "s"},
        "rule": rule,
        "threads": 1,
        "config": {},
    }


@pytest.fixture
def bm25_job(tmp_path):
    corpus, queries = tmp_path / "corpus.parquet", tmp_path / "queries.parquet"
    contracts.write_table(
        pa.table({"doc_id": list(DOCUMENTS), "title": [""] * 3, "text": list(DOCUMENTS.values())}),
        corpus,
        contracts.CORPUS,
    )
    contracts.write_table(
        pa.table({"query_id": list(QUERIES), "text": list(QUERIES.values())}),
        queries,
        contracts.QUERIES,
    )
    spec = schema_defaults({"type": "bm25"})
    build_index(corpus, spec, tmp_path / "index.bm25s")
    inputs = {"index": str(tmp_path / "index.bm25s"), "queries": str(queries)}
    settings = {"retriever": spec, "top_k": 2, "remove_self_matches": False, "latency_queries": 1}
    return retrieve_job(tmp_path, "retrieve_bm25", inputs, settings)


@pytest.fixture
def dense_job(tmp_path):
    """A dense retriever over the embed job's vectors, searched exactly in shards (no index
    file), as the quickstart's is."""
    rng = np.random.default_rng(0)
    for name, ids in (("corpus", list(DOCUMENTS)), ("queries", list(QUERIES))):
        vectors = rng.normal(size=(len(ids), 4)).astype(np.float32)
        table = pa.table({"id": ids, "vector": contracts.vector_array(vectors)})
        contracts.write_table(table, tmp_path / f"{name}.parquet", contracts.embeddings_schema(4))
    retriever = {"type": "dense", "model": "m", "index": "i", "query_batch_size": 1024}
    settings = {"retriever": retriever, "top_k": 2, "remove_self_matches": False}
    settings |= {"latency_queries": 1, "index": index_spec(type="flat", shard_rows=2)}
    inputs = {name: str(tmp_path / f"{name}.parquet") for name in ("corpus", "queries")}
    return retrieve_job(tmp_path, "retrieve_dense", inputs, settings)


@pytest.mark.parametrize("job", ["bm25_job", "dense_job"])
def test_a_retrieve_job_imports_no_derived_dataset_analysis_or_llm_module(job, request, tmp_path):
    parts = request.getfixturevalue(job)
    modules = run_scripts({"retrieve": parts})
    run = contracts.read_table(parts["output"]["run"])
    assert set(run.column("query_id").to_pylist()) == set(QUERIES)  # it searched
    assert "irflow.retrieval.retrieve" in modules
    assert not_of_the_stage(modules) == []


def test_what_every_job_imports_first_loads_no_config_validation_or_http_client():
    """scripts/_common, which every job imports before its own stage, checks its dataset's
    files through irflow.workflow.stamps: main loaded irflow.data.download for it, and with it
    the config's validation (jsonschema), PyYAML and an HTTP client, 0.17 s of each job's
    start; the layouts alone are enough (irflow.data.layouts)."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import _common; print(*sys.modules)",
            str(REPO / "scripts"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "irflow.workflow.stamps" in loaded
    heavy = {"jsonschema", "yaml", "httpx", "httpx2", "huggingface_hub", "irflow.data.download"}
    assert [name for name in loaded if name in heavy or name.split(".")[0] in heavy] == []
