"""aggregate: summary as trec_eval aggregates, BEIR-style wide tables, and DuckDB views."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest
import pytrec_eval

from irflow.core import contracts
from irflow.evaluation.aggregate import (
    build_database,
    build_summary,
    collect_per_query,
    wide_table,
    write_tables,
)
from irflow.evaluation.score import score_run
from irflow.retrieval.runs import write_run

LAYOUT = {
    ("scifact", "bm25"): [0.5, 1.0],
    ("scifact", "dense"): [1.0, 1.0],
    ("arguana", "bm25"): [0.0, 0.25],
    ("arguana", "dense"): [0.5, 0.5],
}


@pytest.fixture
def scored(tmp_path):
    scores = []
    for (dataset, system), values in LAYOUT.items():
        path = tmp_path / "results" / "scores" / dataset / f"{system}.parquet"
        rows = [
            (f"q{i}", m, v)
            for m, vs in (("ndcg_cut_10", values), ("recall_100", [1.0, 1.0]))
            for i, v in enumerate(vs)
        ]
        frame = pd.DataFrame(rows, columns=["query_id", "metric", "value"])
        contracts.write_frame(frame, path, contracts.PER_QUERY)
        scores.append((dataset, system, path))
    return scores


def test_summary_and_wide_table(scored):
    per_query = collect_per_query(scored)
    assert list(per_query.columns) == ["dataset", "system", "query_id", "metric", "value"]
    summary = build_summary(per_query)
    assert list(summary.columns) == contracts.SUMMARY.names
    assert set(summary["metric"]) == {"ndcg_cut_10", "recall_100"}  # no cost measurements
    row = summary.query("dataset == 'scifact' and system == 'bm25' and metric == 'ndcg_cut_10'")
    assert row["value"].item() == 0.75 and row["queries"].item() == 2
    table = wide_table(summary, "ndcg_cut_10")
    assert list(table.columns) == ["arguana", "scifact", "Average"]
    assert table.index.tolist() == ["dense", "bm25"]  # best average first
    assert table.loc["bm25", "Average"] == pytest.approx((0.125 + 0.75) / 2)
    with pytest.raises(ValueError, match="report metric 'map' was not computed"):
        wide_table(summary, "map")


NOT_MEANS = ["gm_map", "gm_bpref", "num_q", "num_ret", "num_rel", "num_rel_ret", "map"]


def summarised(run: pd.DataFrame, qrels: pd.DataFrame) -> dict[str, float]:
    per_query = score_run(run, qrels, NOT_MEANS).assign(dataset="d", system="s")
    summary = build_summary(per_query)
    return dict(zip(summary["metric"], summary["value"]))


QRELS = pd.DataFrame(
    [("q1", "d1", 1), ("q1", "d2", 0), ("q1", "d3", 2), ("q2", "d4", 1), ("q2", "d5", 1)]
    + [("q3", "d6", 1), ("q3", "d7", 0), ("q3", "d8", 1)],
    columns=["query_id", "doc_id", "relevance"],
)
RUN = pd.DataFrame(
    [("q1", "d1", 3.0), ("q1", "d2", 2.0), ("q1", "d9", 1.0), ("q2", "d9", 2.0), ("q2", "d4", 1.0)]
    + [("q3", "d7", 2.0), ("q3", "d8", 1.0)],
    columns=["query_id", "doc_id", "score"],
)


def test_summary_aggregates_each_measure_as_pytrec_eval_does():
    qrels = {q: dict(zip(g["doc_id"], g["relevance"])) for q, g in QRELS.groupby("query_id")}
    run = {q: dict(zip(g["doc_id"], g["score"])) for q, g in RUN.groupby("query_id")}
    evaluated = pytrec_eval.RelevanceEvaluator(qrels, set(NOT_MEANS)).evaluate(run)
    ours = summarised(RUN, QRELS)
    for metric in NOT_MEANS:
        values = [evaluated[q][metric] for q in sorted(evaluated)]
        expected = pytrec_eval.compute_aggregated_measure(metric, values)
        assert ours[metric] == pytest.approx(expected, rel=1e-12), metric
    # By hand: average precisions 0.5, 0.25 and 0.25; 6 relevant, 3 of them retrieved.
    assert ours["gm_map"] == pytest.approx((0.5 * 0.25 * 0.25) ** (1 / 3))
    assert (ours["num_q"], ours["num_rel"], ours["num_ret"], ours["num_rel_ret"]) == (3, 6, 7, 3)


def test_summary_counts_a_query_without_results_as_trec_eval_c():
    # q3 is judged but absent from the run. trec_eval -c averages over all 3 judged queries:
    # q3 adds 0 to map, log(1e-5) to the geometric means, 1 to num_q, its 2 relevant
    # documents to num_rel, and nothing to num_ret or num_rel_ret.
    ours = summarised(RUN[RUN["query_id"] != "q3"], QRELS)
    assert ours["map"] == pytest.approx((0.5 + 0.25) / 3)
    assert ours["gm_map"] == pytest.approx((0.5 * 0.25 * 1e-5) ** (1 / 3))
    assert ours["gm_bpref"] == pytest.approx((0.5 * 0.5 * 1e-5) ** (1 / 3))
    assert (ours["num_q"], ours["num_rel"], ours["num_ret"], ours["num_rel_ret"]) == (3, 6, 5, 2)


def test_tables_and_database(scored, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summary = build_summary(collect_per_query(scored))
    contracts.write_frame(summary, tmp_path / "results" / "summary.parquet", contracts.SUMMARY)
    write_tables(summary, ["ndcg_cut_10"], tmp_path / "results.md", tmp_path / "tables")
    assert "| dense | 0.5000 | 1.0000 | 0.7500 |" in (tmp_path / "results.md").read_text()
    csv = pd.read_csv(tmp_path / "tables" / "ndcg_cut_10.csv", index_col=0)
    assert csv.loc["dense", "Average"] == 0.75

    manifest = tmp_path / "results" / "manifests" / "m.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"stage": "score", "wall_seconds": 1.5}))
    run = pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "score": [1.0], "rank": [1]})
    write_run(
        run,
        tmp_path / "results" / "runs" / "scifact" / "bm25+ce@10.parquet",
        {"stage": "rerank", "first_stage": "bm25", "k": 10},
        tmp_path / "results" / "runs" / "scifact" / "bm25+ce@10.trec",
        "x",
    )
    files = {
        "per_query": [str(path.relative_to(tmp_path)) for _, _, path in scored],
        "runs": ["results/runs/scifact/bm25+ce@10.parquet"],
        "summary": ["results/summary.parquet"],
        "manifests": ["results/manifests/m.json"],
    }
    db_path = tmp_path / "results" / "irflow.duckdb"
    build_database(db_path, files)
    with duckdb.connect(str(db_path), read_only=True) as db:
        best = db.execute(
            "SELECT dataset, system, avg(value) FROM per_query WHERE metric = 'ndcg_cut_10' "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        assert best == [
            ("arguana", "bm25", 0.125),
            ("arguana", "dense", 0.5),
            ("scifact", "bm25", 0.75),
            ("scifact", "dense", 1.0),
        ]
        assert db.execute("SELECT count(*) FROM summary").fetchone() == (8,)
        assert db.execute("SELECT record->>'stage' FROM manifests").fetchone() == ("score",)
        lineage = db.execute(
            "SELECT dataset, system, lineage->>'first_stage', (lineage->>'k')::INT FROM lineage"
        ).fetchall()
        assert lineage == [("scifact", "bm25+ce@10", "bm25", 10)]
