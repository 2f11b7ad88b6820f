"""End to end on a tiny dataset: a SPLADE retriever, a ColBERT retriever, a ColBERT reranker and
a docT5query-expanded copy of the dataset (tiny models built here) beside BM25, through every
stage to the cost table; and which jobs adding a model reruns. Checks code paths and the job
graph, never quality."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import planned_jobs, snakemake, write_beir
from test_workflow import GATHERING
from tiny_models import build_tiny_colbert, build_tiny_doc2query, build_tiny_splade

pytestmark = pytest.mark.e2e

WORDS = "cat mat dog park red wine cheese stock market quantum number pet black fell".split()


@pytest.fixture(scope="module")
def workflow(tmp_path_factory, minilm_path):
    workdir = tmp_path_factory.mktemp("vectors")
    corpus = [{"_id": f"d{i}", "title": "", "text": " ".join(WORDS[i : i + 4])} for i in range(10)]
    queries = [{"_id": f"q{i}", "text": " ".join(WORDS[i : i + 2])} for i in range(3)]
    qrels = [(f"q{i}", f"d{i}", 1) for i in range(3)]
    data = write_beir(workdir / "data" / "tiny", corpus, queries, qrels)
    splade = build_tiny_splade(workdir / "splade", minilm_path)
    colbert = build_tiny_colbert(workdir / "colbert", minilm_path)
    doc2query = build_tiny_doc2query(workdir / "doc2query", minilm_path)
    config = {
        "offline": True,
        "datasets": {"tiny": {"source": {"type": "path", "path": str(data)}}},
        "expand": {
            "tiny-d2q": {
                "dataset": "tiny",
                "model": {"id": str(doc2query), "queries": 2, "max_new_tokens": 4, "device": "cpu"},
            }
        },
        "models": {
            "splade": {"id": str(splade), "batch_size": 8, "device": "cpu"},
            "colbert": {"id": str(colbert), "batch_size": 8, "device": "cpu"},
        },
        "retrievers": {
            "bm25": {"type": "bm25"},
            "splade": {"type": "sparse", "model": "splade"},
            "colbert": {"type": "late-interaction", "model": "colbert"},
        },
        "rerankers": {"colbert-rr": {"type": "late-interaction", "model": "colbert"}},
        "reranking": [{"first_stage": "bm25", "reranker": "colbert-rr", "k": [5]}],
        "top_k": 5,
        "cost": {"latency_queries": 2},
        "significance": {"permutations": 100},
    }
    snakemake(workdir, config=config)
    return workdir, config


def test_every_family_runs_and_is_scored_and_costed(workflow):
    workdir, _ = workflow
    summary = pd.read_parquet(workdir / "results" / "summary.parquet")
    assert set(summary.system) == {"bm25", "splade", "colbert", "bm25+colbert-rr@5"}
    assert set(summary.dataset) == {"tiny", "tiny-d2q"}
    # The expanded corpus holds each document's text followed by generated queries.
    base = pd.read_parquet(workdir / "results" / "datasets" / "tiny" / "corpus.parquet")
    expanded = pd.read_parquet(workdir / "results" / "datasets" / "tiny-d2q" / "corpus.parquet")
    assert expanded.doc_id.tolist() == base.doc_id.tolist()
    for text, original in zip(expanded.text, base.text):
        assert text.startswith(original + " ") and len(text) > len(original) + 1
    cost = pd.read_parquet(workdir / "results" / "cost.parquet")
    cost = cost[cost.dataset == "tiny"].set_index("system")
    assert cost.loc["splade", "nnz_per_document"] > 0
    assert cost.loc["colbert", "tokens_per_document"] > 0
    for system in ("splade", "colbert"):
        assert cost.loc[system, "index_bytes"] > 0
        assert cost.loc[system, "encode_docs_per_second"] > 0
        assert cost.loc[system, "latency_queries"] == 2
    run = pd.read_parquet(workdir / "results" / "runs" / "tiny" / "colbert.parquet")
    assert run.groupby("query_id").size().tolist() == [5, 5, 5]


def test_new_sparse_or_late_interaction_model_runs_only_its_own_jobs(workflow):
    workdir, config = workflow
    assert planned_jobs(workdir, config) == []
    for name, kind in (("splade-short", "sparse"), ("colbert-short", "late-interaction")):
        changed = json.loads(json.dumps(config))
        base = "splade" if kind == "sparse" else "colbert"
        length = "max_seq_length" if kind == "sparse" else "document_length"
        changed["models"][name] = config["models"][base] | {length: 16}
        changed["retrievers"][name] = {"type": kind, "model": name}
        jobs = planned_jobs(workdir, changed)
        search = "retrieve_sparse" if kind == "sparse" else "retrieve_late_interaction"
        per_dataset = ["encode_vectors", search, "score"]  # on tiny and tiny-d2q
        assert sorted(rule for rule, _ in jobs) == sorted([*GATHERING, *per_dataset * 2])
        for _, wildcards in jobs:
            assert wildcards.get("model", name) == name
            assert wildcards.get("system", name) == name
