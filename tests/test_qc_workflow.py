"""End to end: AIR-Bench on a SciFact subset against the fake OpenAI-compatible server.

generate (10 queries) -> quality control (MiniLM candidates, two bi-encoders voting in place
of cross-encoders, the fake judge) -> evaluation of the real, generated and QC'd datasets by
four systems -> correlation of the generated benchmark with the real one; and the label audit
of the real subset. A second run has nothing to do and asks the server nothing.
"""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest
from conftest import MINILM_BATCH, scifact_subset, snakemake
from fake_llm import FakeLLM, last_user_message
from scipy import stats
from test_generate import airbench_responder
from test_qc import judge_answer, judged_pair
from test_workflow import read_result

pytestmark = pytest.mark.e2e
CORPUS = 200
QUERIES = 20
GENERATED = 10


def fake_judge_level(query: str, document: str) -> int:
    """A deterministic stand-in for a judge: a generated negative numbered 0 answers its query
    (2); a document whose first word is a word of the query is fully relevant (3), unless that
    word starts with a vowel (1: such generated queries are dropped); anything else is not
    relevant (0)."""
    if document.endswith("decoy 0"):
        return 2
    first = document.split()[0].lower()
    if first in query.lower().split():
        return 1 if first[0] in "aeiou" else 3
    return 0


def responder(body: dict) -> str:
    prompt = last_user_message(body)
    if pair := judged_pair(prompt):
        return judge_answer(prompt, fake_judge_level(*pair))
    return airbench_responder(body)


def airbench_config(data: str, minilm: str, base_url: str) -> dict:
    return {
        "offline": True,
        "top_k": 100,
        "datasets": {"scifact": {"source": {"type": "path", "path": data}}},
        "models": {
            "minilm": {"id": minilm, "batch_size": MINILM_BATCH},
            "minilm-short": {"id": minilm, "batch_size": MINILM_BATCH, "max_seq_length": 64},
        },
        "retrievers": {
            "bm25": {"type": "bm25"},
            "bm25-text": {"type": "bm25", "fields": "text"},
            "minilm": {"type": "dense", "model": "minilm"},
            "bm25-plain": {"type": "bm25", "stemmer": None, "stopwords": None},
        },
        # No cross-encoder weights offline: two bi-encoders vote in their place (the second
        # encodes its candidates itself: no retriever embeds the corpus with its model).
        "rerankers": {
            "minilm-bi": {"type": "bi-encoder", "model": "minilm"},
            "minilm-short-bi": {"type": "bi-encoder", "model": "minilm-short"},
        },
        "metrics": ["ndcg_cut.10", "recall.100", "hole.10"],
        "report_metrics": ["ndcg_cut_10"],
        "significance": {"permutations": 200},
        "cost": {"latency_queries": 1},
        "llm": {"base_url": base_url, "model": "fake", "max_concurrency": 2},
        "generate": {
            "scifact-gen": {
                "dataset": "scifact",
                "documents": GENERATED,
                "negatives": [2, 3],
                "dev_share": 0,  # one split: dev queries are tested in test_qc.py
            }
        },
        "quality_control": {
            "rerankers": ["minilm-bi", "minilm-short-bi"],
            "generated": {
                "scifact-gen-qc": {"dataset": "scifact-gen", "retriever": "minilm", "depth": 30}
            },
            "label_audit": {"datasets": ["scifact"], "judge": True},
        },
        "correlation": {
            "benchmarks": {"real": ["scifact"], "generated": ["scifact-gen-qc"]},
            "bootstrap": {"left": "generated", "right": "real", "sample_size": 5, "resamples": 20},
        },
    }


@pytest.fixture(scope="module")
def airbench_run(tmp_path_factory, shared_datasets, minilm_path):
    workdir = tmp_path_factory.mktemp("airbench")
    data = scifact_subset(shared_datasets / "scifact", workdir / "scifact", QUERIES, CORPUS)
    with FakeLLM(responder=responder) as fake:
        config = airbench_config(str(data), str(minilm_path), fake.base_url)
        snakemake(workdir, config=config)
        first = fake.requests
        fake.reset_counts()
        rerun = snakemake(workdir, config=config).output
        yield workdir, first, fake.requests, rerun


def test_a_second_run_asks_nothing(airbench_run):
    _, first, second, rerun = airbench_run
    assert first > 0 and second == 0
    assert "Nothing to be done" in rerun


def test_quality_control_yields_a_dataset_that_follows_its_audit(airbench_run):
    workdir, *_ = airbench_run
    folder = workdir / "results" / "datasets"
    generated = {
        t: pd.read_parquet(folder / "scifact-gen" / f"{t}.parquet")
        for t in ("corpus", "queries", "qrels")
    }
    controlled = {
        t: pd.read_parquet(folder / "scifact-gen-qc" / f"{t}.parquet")
        for t in ("corpus", "queries", "qrels")
    }
    audit = pd.read_parquet(workdir / "results" / "qc" / "scifact-gen-qc" / "audit.parquet")
    assert len(generated["queries"]) == GENERATED
    positives = audit[audit["kind"] == "positive"]
    assert len(positives) == GENERATED and positives["judged"].all()
    # The fake judge drops the queries whose document's first word starts with a vowel.
    dropped = set(audit.loc[audit["action"] == "drop_query", "query_id"])
    assert set(controlled["queries"]["query_id"]) == set(generated["queries"]["query_id"]) - dropped
    assert not set(controlled["qrels"]["query_id"]) & dropped
    # Generated negatives numbered 0 answer their query: removed when pre-labelled.
    removed = audit[audit["action"] == "remove_document"]
    assert len(removed) > 0 and removed["doc_id"].str.endswith("-0").all()
    assert (removed["votes"] == 2).all() and (removed["judge_level"] == 2).all()
    # The fake judge rates every negative numbered 0 relevant, for other queries too: those
    # rows follow the removal.
    others = removed[removed["kind"] == "corpus_document"]
    assert (
        others["reason"]
        .str.endswith("but the document is removed (it answers the query it was made for)")
        .all()
    )
    assert not set(removed["doc_id"]) & set(controlled["corpus"]["doc_id"])
    assert len(controlled["corpus"]) == len(generated["corpus"]) - removed["doc_id"].nunique()
    kept_negatives = audit[(audit["kind"] == "generated_negative") & (audit["action"] == "keep")]
    assert (kept_negatives["prelabel"] | ~kept_negatives["judged"]).all()
    added = audit[audit["action"] == "add_positive"]
    qrels = controlled["qrels"].set_index(["query_id", "doc_id"])["relevance"]
    assert all(qrels[(q, d)] == 1 for q, d in zip(added["query_id"], added["doc_id"]))
    assert {"rank_minilm-bi", "rank_minilm-short-bi"} <= set(audit.columns)
    assert (audit["reason"].str.len() > 0).all()
    manifest = json.loads(
        (workdir / "results" / "manifests" / "quality_control" / "scifact-gen-qc.json").read_text()
    )
    assert manifest["statistics"]["queries_dropped"] == len(dropped)
    assert manifest["llm"]["dropped"] == 0


def test_the_generated_benchmark_is_correlated_with_the_real_one(airbench_run):
    workdir, *_ = airbench_run
    summary = read_result(workdir, "summary")
    assert {"scifact", "scifact-gen", "scifact-gen-qc"} <= set(summary["dataset"])
    correlations = read_result(workdir, "correlations")
    pair = correlations[
        (correlations["kind"] == "benchmarks")
        & (correlations["left"] == "generated")
        & (correlations["right"] == "real")
    ]
    assert len(pair) == 1 and pair["systems"].item() == 4
    # Recomputed from the per-query table: each system's mean nDCG@10 on either side, ranked
    # by scipy (Kendall's tau-b).
    per_query = read_result(workdir, "per_query")
    means = (
        per_query[per_query["metric"] == "ndcg_cut_10"]
        .groupby(["system", "dataset"])["value"]
        .mean()
        .unstack()
    )
    generated, real = means["scifact-gen-qc"], means["scifact"]
    expected_spearman = stats.spearmanr(generated, real).statistic
    expected_kendall = stats.kendalltau(generated, real, variant="b").statistic
    assert pair["spearman"].item() == pytest.approx(expected_spearman, abs=1e-12, nan_ok=True)
    assert pair["kendall"].item() == pytest.approx(expected_kendall, abs=1e-12, nan_ok=True)
    draws = read_result(workdir, "bootstrap")
    assert len(draws) == 20 and set(draws["left"]) == {"generated"}
    assert draws["sampled_queries"].max() == 5


def test_the_label_audit_exports_candidates_and_hole_before_after(airbench_run, monkeypatch):
    workdir, *_ = airbench_run
    folder = workdir / "results" / "audit" / "scifact"
    candidates = pd.read_parquet(folder / "candidates.parquet")
    proposed = candidates[candidates["proposed"]]
    trec = (folder / "candidate_qrels.trec").read_text().splitlines()
    assert sorted(trec) == sorted(
        f"{q} 0 {d} 1" for q, d in zip(proposed["query_id"], proposed["doc_id"])
    )
    assert candidates["judged"].sum() == candidates["prelabel"].sum()
    csv = pd.read_csv(folder / "candidates.csv")
    assert len(csv) == candidates["prelabel"].sum() and "query" in csv.columns
    hole = pd.read_parquet(folder / "hole.parquet")
    assert set(hole["system"]) == {"bm25", "bm25-text", "bm25-plain", "minilm"}
    holes = hole[hole["metric"] == "hole_10"]
    assert (holes["after"] <= holes["before"]).all()
    monkeypatch.chdir(workdir)
    with duckdb.connect("results/irflow.duckdb", read_only=True) as db:
        views = {row[0] for row in db.execute("SHOW TABLES").fetchall()}
        assert {
            "qc_audit",
            "quality_control_summary",
            "label_audit",
            "label_audit_hole",
            "label_audit_summary",
        } <= views
        rows = db.execute("SELECT count(*) FROM qc_audit WHERE dataset = 'scifact-gen-qc'")
        assert rows.fetchone()[0] > GENERATED
        kept = db.execute("SELECT queries_kept FROM quality_control_summary").fetchone()[0]
        controlled = db.execute(
            "SELECT count(*) FROM queries WHERE dataset = 'scifact-gen-qc'"
        ).fetchone()[0]
        assert kept == controlled
        proposed_count = db.execute(
            "SELECT proposed FROM label_audit_summary WHERE dataset = 'scifact'"
        ).fetchone()[0]
    assert proposed_count == len(proposed)
    assert "proposed judgements" in (workdir / "results/report/label_audit_table.html").read_text()
    assert "queries dropped" in (workdir / "results/report/quality_control_table.html").read_text()
