"""One broken dataset no longer withholds every table: with --keep-going, the tables and the
database of the datasets that finished are made in results/partial/, each naming what is
missing and why; the run after the fix makes the complete tables and removes them
(irflow.workflow.run_end). Two tiny datasets and BM25 alone: the failed run to the tables and
the database, the fixed one to the tables."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import TINY_CORPUS, TINY_QRELS, TINY_QUERIES, snakemake, write_beir

pytestmark = pytest.mark.e2e


def query(database: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as db:
        return db.execute(sql).fetchall()


def test_a_broken_dataset_leaves_the_tables_of_the_others(tmp_path):
    good = write_beir(tmp_path / "good", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    broken = write_beir(tmp_path / "broken", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    corpus = broken / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "ok"}\n{not json\n', encoding="utf-8")
    datasets = {
        name: {"source": {"type": "path", "path": str(tmp_path / name)}}
        for name in ("good", "broken")
    }
    config = {"offline": True, "datasets": datasets, "retrievers": {"bm25": {"type": "bm25"}}}
    workdir = tmp_path / "work"
    workdir.mkdir()
    results, partial = workdir / "results", workdir / "results" / "partial"

    targets = ["--keep-going", "results/results.md", "results/irflow.duckdb"]
    failed = snakemake(workdir, *targets, config=config, check=False)
    assert failed.returncode != 0
    assert not (results / "results.md").exists() and not (results / "irflow.duckdb").exists()
    log = results / "logs" / "ingest" / "broken.log"
    reason = f"ingest failed: {corpus}, line 2: malformed JSON"
    text = (partial / "results.md").read_text(encoding="utf-8")
    assert text.startswith("# irflow results\n\n**Partial results.**")
    good_row = pd.read_csv(partial / "tables" / "ndcg_cut_10.csv", index_col="system")
    assert good_row.at["bm25", "good"] > 0 and pd.isna(good_row.at["bm25", "broken"])
    notes = [line for line in text.splitlines() if line.startswith("- broken: missing for bm25")]
    assert len(notes) == 3  # one under each report metric's table
    assert all(reason in note and f"(log: {log})" in note for note in notes)
    database = partial / "irflow.duckdb"
    [(dataset, system, why)] = query(database, "SELECT * FROM missing")
    assert (dataset, system) == ("broken", "bm25") and reason in why
    assert query(database, "SELECT DISTINCT dataset FROM per_query") == [("good",)]
    ndcg = "SELECT dataset, system, round(value, 6) FROM summary WHERE metric = 'ndcg_cut_10'"
    assert query(database, ndcg) == [("good", "bm25", good_row.at["bm25", "good"])]
    # The end of the run prints the partial main table and why a dataset is missing.
    printed = failed.output
    assert f"in {partial}/" in printed and "| bm25 |  |" in printed and reason in printed

    corpus.write_text((good / "corpus.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    # The complete tables alone, to keep the test short: the database's own jobs are the
    # complete run's, unchanged.
    snakemake(workdir, "--keep-going", "results/results.md", config=config)
    assert not partial.exists()
    complete = (results / "results.md").read_text(encoding="utf-8")
    assert "Partial" not in complete and "missing" not in complete
    table = pd.read_csv(results / "tables" / "ndcg_cut_10.csv", index_col="system")
    assert table.at["bm25", "good"] == good_row.at["bm25", "good"]
    assert table.at["bm25", "broken"] == table.at["bm25", "good"]  # the same corpus now
