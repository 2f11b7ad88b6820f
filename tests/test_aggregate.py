"""aggregate: summary with cost, BEIR-style wide tables, and DuckDB views over the outputs."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest

from irflow import contracts
from irflow.aggregate import (
    build_database,
    build_summary,
    collect_per_query,
    wide_table,
    write_tables,
)
from irflow.runs import write_run

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


COST = pd.DataFrame(
    {
        "dataset": ["scifact", "scifact"],
        "system": ["bm25", "dense"],
        "kind": ["bm25", "dense"],
        "device": "cpu",
        "index_bytes": [1000.0, 2000.0],
        "index_build_seconds": [1.0, 2.0],
        "encode_docs_per_second": [None, 50.0],
        "latency_median_ms": [0.5, 9.0],
        "latency_p95_ms": [0.9, 12.0],
        "latency_queries": [100, 100],
    }
)


def test_summary_with_cost_and_wide_table(scored):
    per_query = collect_per_query(scored)
    assert list(per_query.columns) == ["dataset", "system", "query_id", "metric", "value"]
    summary = build_summary(per_query, COST)
    row = summary.query("dataset == 'scifact' and system == 'bm25' and metric == 'ndcg_cut_10'")
    assert row["value"].item() == 0.75 and row["queries"].item() == 2
    latency = summary.query("system == 'dense' and metric == 'latency_median_ms'")
    assert latency["value"].item() == 9.0 and latency["queries"].item() == 100
    assert summary.query("system == 'bm25' and metric == 'encode_docs_per_second'").empty
    table = wide_table(summary, "ndcg_cut_10")
    assert list(table.columns) == ["arguana", "scifact", "Average"]
    assert table.index.tolist() == ["dense", "bm25"]  # best average first
    assert table.loc["bm25", "Average"] == pytest.approx((0.125 + 0.75) / 2)
    with pytest.raises(ValueError, match="report metric 'map' was not computed"):
        wide_table(summary, "map")


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
