"""aggregate: summary as trec_eval aggregates, and DuckDB views (the tables: test_tables.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from conftest import fill
from script_jobs import run_scripts

from irflow.core import contracts
from irflow.evaluation.aggregate import (
    build_database,
    build_summary,
    collect_per_query,
)
from irflow.evaluation.score import score_run
from irflow.evaluation.significance import every_comparison
from irflow.retrieval.runs import write_run
from irflow.workflow.experiment import write_record

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


def test_summary(scored):
    per_query = collect_per_query(scored)
    assert list(per_query.columns) == ["dataset", "system", "query_id", "metric", "value"]
    summary = build_summary(per_query)
    assert list(summary.columns) == contracts.SUMMARY.names
    assert set(summary["metric"]) == {"ndcg_cut_10", "recall_100"}  # no cost measurements
    row = summary.query("dataset == 'scifact' and system == 'bm25' and metric == 'ndcg_cut_10'")
    assert row["value"].item() == 0.75 and row["queries"].item() == 2


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


def _experiment_in(folder: Path, ndcg: float, fingerprint: str) -> Path:
    """A results folder of one score file, with its experiment record and the database the
    database rule builds there (scripts/database.py), both made from inside ``folder``."""
    per_query = pd.DataFrame({"query_id": ["q1"], "metric": ["ndcg_cut_10"], "value": [ndcg]})
    contracts.write_frame(
        per_query, folder / "results" / "scores" / "mydata" / "bm25.parquet", contracts.PER_QUERY
    )
    experiment = {"config_files": [str(folder / "config.yaml")], "fingerprint": fingerprint}
    record = Path("results/experiment.json")
    previous = Path.cwd()
    os.chdir(folder)
    try:
        write_record(experiment, {}, record)
        files = {"per_query": ["results/scores/mydata/bm25.parquet"]}
        build_database(Path("results/irflow.duckdb"), files, experiment, record=record)
    finally:
        os.chdir(previous)
    return folder / "results" / "irflow.duckdb"


def test_a_database_opened_from_another_folder_shows_its_own_experiment(tmp_path, monkeypatch):
    """Issue 38: a newcomer opened work-mydata/results/irflow.duckdb from the quickstart's
    folder and got the quickstart's rows, since the views' paths were relative to the folder
    DuckDB was started in."""
    quickstart, mine = tmp_path / "quickstart", tmp_path / "work-mydata"
    _experiment_in(quickstart, 0.25, "quickstart-fingerprint")
    database = _experiment_in(mine, 0.75, "mydata-fingerprint")
    monkeypatch.chdir(quickstart)
    with duckdb.connect(str(database), read_only=True) as db:
        assert db.execute("SELECT dataset, value FROM per_query").fetchall() == [("mydata", 0.75)]


def test_a_database_refuses_once_its_folder_holds_another_experiment(tmp_path):
    """Copied elsewhere, the database still reads the files where they were made: once that
    folder holds another experiment, its views raise an error rather than show it; once the
    files are gone, DuckDB's error names the missing one."""
    database = _experiment_in(tmp_path / "first", 0.25, "first-fingerprint")
    copy = tmp_path / "copy.duckdb"
    shutil.copy(database, copy)
    _experiment_in(tmp_path / "first", 0.5, "second-fingerprint")
    with duckdb.connect(str(copy), read_only=True) as db:
        with pytest.raises(duckdb.InvalidInputException, match="now records another experiment"):
            db.execute("SELECT value FROM per_query").fetchall()
    shutil.rmtree(tmp_path / "first")
    with duckdb.connect(str(copy), read_only=True) as db:
        with pytest.raises(duckdb.IOException, match=str(tmp_path / "first")):
            db.execute("SELECT value FROM per_query").fetchall()


@pytest.mark.parametrize("free_bytes", [16_384, 65_536, 262_144])
def test_a_full_disk_keeps_the_old_database_and_leaves_nothing(small_disk, tmp_path, free_bytes):
    """Issue 39: with 64 KiB free, DuckDB's checkpoint on close failed without raising, and an
    empty database (no view, no table) replaced the old one, for every later run to accept."""
    database = small_disk / "irflow.duckdb"
    scores = []
    for dataset in range(40):
        path = tmp_path / "scores" / f"d{dataset}" / "bm25.parquet"
        per_query = pd.DataFrame({"query_id": ["q"], "metric": ["m"], "value": [1.0]})
        contracts.write_frame(per_query, path, contracts.PER_QUERY)
        scores.append(str(path))
    experiment = {"config_files": [], "fingerprint": "f"}
    build_database(database, {"per_query": scores[:1]}, experiment)
    fill(small_disk, free_bytes)
    views = ["per_query", "summary", "runs", "corpus", "queries", "qrels"]
    with pytest.raises((duckdb.Error, OSError), match="No space left|not written whole"):
        build_database(database, {view: scores for view in views}, experiment)
    assert sorted(path.name for path in small_disk.iterdir()) == ["filler", "irflow.duckdb"]
    with duckdb.connect(str(database), read_only=True) as db:
        assert db.execute("SELECT count(*) FROM per_query").fetchone() == (1,)
        assert db.execute("SELECT fingerprint FROM experiment").fetchone() == ("f",)


DUCKDB_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN"}


def test_empty_analysis_views_have_the_contract_types(tmp_path, monkeypatch):
    """One system on one dataset, scored by one metric: no pair to test or to rank, and the
    views over the empty tables still have their columns' types, not NULL."""
    monkeypatch.chdir(tmp_path)
    per_query = pd.DataFrame(
        {"dataset": ["scifact"], "system": ["bm25"], "query_id": ["q1"], "metric": ["map"]}
    ).assign(value=0.5)
    per_query.to_parquet("per_query.parquet")
    contracts.write_frame(per_query, "bm25.parquet", contracts.PER_QUERY)  # its scores
    build_summary(per_query).to_parquet("summary.parquet")
    pd.DataFrame({"word": ["cat"], "count": [2]}).to_parquet("unigrams.parquet")
    # 100 permutations: the schema's least (the job types its block, and checks it again).
    significance = {"metrics": ["map"], "permutations": 100, "seed": 0, "alpha": 0.05}
    correlation = {"metric": "map", "benchmarks": {}, "bootstrap": None}
    run_scripts(
        {
            "significance": {
                "input": {"scores": ["bm25.parquet"]},
                "output": {"table": "significance.parquet"},
                "params": {"settings": significance | {"baseline": None}}
                | {"pairs": [["scifact", "bm25"]]},
            },
            "correlate": {
                "input": {"summary": "summary.parquet", "per_query": "per_query.parquet"}
                | {"unigrams": ["unigrams.parquet"], "reference": [], "psi": []},
                "output": {"correlations": "correlations.parquet", "bootstrap": "bootstrap.parquet"}
                | {"similarity": "similarity.parquet"},
                "params": {"settings": correlation, "datasets": ["scifact"], "buckets": {}},
            },
        }
    )
    contract = {
        "significance": contracts.SIGNIFICANCE,
        "correlations": contracts.CORRELATIONS,
        "bootstrap": contracts.BOOTSTRAP,
    }
    build_database(tmp_path / "irflow.duckdb", {name: [f"{name}.parquet"] for name in contract})
    with duckdb.connect(str(tmp_path / "irflow.duckdb"), read_only=True) as db:
        for name, schema in contract.items():
            assert db.execute(f"SELECT count(*) FROM {name}").fetchone() == (0,)
            columns = [row[:2] for row in db.execute(f"DESCRIBE {name}").fetchall()]
            assert columns == [(field.name, DUCKDB_TYPES[str(field.type)]) for field in schema], (
                name
            )


def test_the_database_is_built_under_a_name_of_its_own_process(tmp_path):
    # Two builds of one results/ (a rerun beside a run still going, on a shared cluster) must
    # neither delete nor write into each other's temporary database.
    others = [tmp_path / ".irflow.duckdb.tmp", tmp_path / ".irflow.duckdb.1.tmp"]
    for other in others:
        other.write_text("another process's database being built")
    build_database(tmp_path / "irflow.duckdb", {}, {"config_files": [], "fingerprint": "f"})
    assert [other.read_text() for other in others] == ["another process's database being built"] * 2
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ["irflow.duckdb"] + [other.name for other in others]
    )


def test_the_database_shows_each_tested_pair_once_with_one_sign(tmp_path):
    """Issue 51: the significance view showed MiniLM − BM25 under "all pairs" as +0.0311 and
    under "against bm25" as −0.0311. Now the baseline is system_a in both families, and
    ``significance_pairs`` holds each pair once, with each family's Holm p side by side."""
    rng = np.random.default_rng(0)
    bm25 = rng.uniform(0.3, 0.8, 30)
    values = {
        "all-MiniLM": bm25 - 0.03 + rng.normal(0, 0.02, 30),
        "bm25": bm25,
        "splade": bm25 + 0.1 + rng.normal(0, 0.02, 30),
    }
    per_query = pd.DataFrame(
        [
            ("scifact", system, f"q{i}", "ndcg_cut_10", value)
            for system, scores in values.items()
            for i, value in enumerate(scores)
        ],
        columns=["dataset", "system", "query_id", "metric", "value"],
    )
    settings = {
        "metrics": ["ndcg_cut_10"],
        "permutations": 200,
        "seed": 0,
        "alpha": 0.05,
        "baseline": "bm25",
    }
    table = every_comparison(per_query, settings)
    path = tmp_path / "significance.parquet"
    contracts.write_frame(table, path, contracts.SIGNIFICANCE)
    build_database(tmp_path / "irflow.duckdb", {"significance": [path]})
    with duckdb.connect(str(tmp_path / "irflow.duckdb"), read_only=True) as db:
        signs = db.execute(
            "SELECT family, system_a, system_b, b_minus_a FROM significance "
            "WHERE system_b = 'all-MiniLM' ORDER BY family"
        ).fetchall()
        pairs = db.execute(
            "SELECT system_a, system_b, b_minus_a, p_holm_all_pairs, p_holm_against_baseline "
            "FROM significance_pairs ORDER BY system_a, system_b"
        ).fetchall()
    difference = float(values["all-MiniLM"].mean() - bm25.mean())
    assert [row[:3] for row in signs] == [
        ("against bm25", "bm25", "all-MiniLM"),
        ("all pairs", "bm25", "all-MiniLM"),
    ]
    assert [row[3] for row in signs] == pytest.approx([difference, difference])
    assert [pair[:2] for pair in pairs] == [
        ("all-MiniLM", "splade"),
        ("bm25", "all-MiniLM"),
        ("bm25", "splade"),
    ]
    assert pairs[1][2] == pytest.approx(difference) and difference < 0
    assert pairs[0][4] is None and all(pair[3] is not None for pair in pairs)
    assert all(pair[4] is not None for pair in pairs[1:])
