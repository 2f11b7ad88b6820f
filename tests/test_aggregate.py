"""aggregate: summary, BEIR-style wide tables, and DuckDB views over the Parquet outputs."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from irflow import contracts
from irflow.aggregate import build_database, build_summary, wide_table, write_summary, write_tables


def per_query(path, values: dict[str, list[float]]):
    rows = [(f"q{i}", metric, v) for metric, vs in values.items() for i, v in enumerate(vs)]
    frame = pd.DataFrame(rows, columns=["query_id", "metric", "value"])
    contracts.write_table(
        pa.Table.from_pandas(frame, preserve_index=False), path, contracts.PER_QUERY
    )


@pytest.fixture
def scored(tmp_path):
    layout = {
        ("scifact", "bm25"): [0.5, 1.0],
        ("scifact", "dense"): [1.0, 1.0],
        ("arguana", "bm25"): [0.0, 0.25],
        ("arguana", "dense"): [0.5, 0.5],
    }
    scores = []
    for (dataset, system), values in layout.items():
        path = tmp_path / "results" / "scores" / dataset / f"{system}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        per_query(path, {"ndcg_cut_10": values, "recall_100": [1.0, 1.0]})
        scores.append((dataset, system, path))
    return scores


def test_summary_and_wide_table(scored):
    summary = build_summary(scored)
    assert len(summary) == 8
    row = summary[
        (summary.dataset == "scifact")
        & (summary.system == "bm25")
        & (summary.metric == "ndcg_cut_10")
    ]
    assert row["value"].item() == 0.75 and row["queries"].item() == 2
    table = wide_table(summary, "ndcg_cut_10")
    assert list(table.columns) == ["arguana", "scifact", "Average"]
    assert table.index.tolist() == ["dense", "bm25"]  # best average first
    assert table.loc["bm25", "Average"] == pytest.approx((0.125 + 0.75) / 2)
    with pytest.raises(ValueError, match="report metric 'map' was not computed"):
        wide_table(summary, "map")


def test_tables_and_database(scored, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summary = build_summary(scored)
    write_summary(summary, tmp_path / "results" / "summary.parquet")
    write_tables(summary, ["ndcg_cut_10"], tmp_path / "results.md", tmp_path / "tables")
    assert "| dense | 0.5000 | 1.0000 | 0.7500 |" in (tmp_path / "results.md").read_text()
    csv = pd.read_csv(tmp_path / "tables" / "ndcg_cut_10.csv", index_col=0)
    assert csv.loc["dense", "Average"] == 0.75

    manifest = tmp_path / "results" / "manifests" / "m.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"stage": "score", "wall_seconds": 1.5}))
    files = {"per_query": [path.relative_to(tmp_path) for _, _, path in scored]}
    db_path = tmp_path / "results" / "irflow.duckdb"
    build_database(db_path, files, "results/summary.parquet", ["results/manifests/m.json"])
    with duckdb.connect(str(db_path), read_only=True) as db:
        best = db.sql(
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
        stage = db.execute("SELECT record->>'stage' FROM manifests").fetchone()
        assert stage == ("score",)
