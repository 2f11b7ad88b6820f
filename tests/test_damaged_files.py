"""A damaged or deleted intermediate on a small graph (the tiny BEIR dataset, BM25, the default
target): a bit flipped in a run file and a truncated run file stop the next run with an error
that names the file and the command that rebuilds it with what was made from it, in the
reading job's log too; that command works; and a deleted run file, which the database's
``runs`` view reads, is made again by the next run of the default target. One run of the
graph is shared, and one rebuild: the deleted file's is planned (--dry-run), not run again."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import (
    SNAKEMAKE,
    TINY_CORPUS,
    TINY_QRELS,
    TINY_QUERIES,
    Done,
    run_command,
    snakemake,
    write_beir,
)
from test_parquet_integrity import flip_bit_in_data_page

pytestmark = pytest.mark.e2e

RUN = "results/runs/tiny/bm25.parquet"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """The tiny dataset's default target, made once."""
    root = tmp_path_factory.mktemp("damaged")
    data = write_beir(root / "data" / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = {
        "offline": True,
        "datasets": {"tiny": {"source": {"type": "path", "path": str(data)}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    snakemake(root, config=config)
    return root


def run_default_target(root: Path, *options: str) -> Done:
    return snakemake(root, *options, "--configfile", str(root / "config.yaml"), check=False)


def rebuild_command(message: str) -> list[str]:
    """The command an error gives, as words, its Snakemake run by this Python."""
    command = re.search(r"Rebuild it and every result made from it with: (.*)", message)
    assert command, message
    words = shlex.split(command.group(1))
    assert words[0] == "snakemake"
    return words[1:]


def runs_view(root: Path) -> pd.DataFrame:
    with duckdb.connect(str(root / "results/irflow.duckdb"), read_only=True) as db:
        return db.execute("SELECT query_id, doc_id, score, rank FROM runs").df()


def test_damaged_and_deleted_run_files(workdir):
    run = workdir / RUN
    clean = runs_view(workdir)

    # A bit flipped in a data page: the score job reads the run and fails, naming it.
    flip_bit_in_data_page(run, "score")
    flipped = run_default_target(workdir)
    assert flipped.returncode != 0
    log = (workdir / "results/logs/score/tiny/bm25.log").read_text()
    assert f"{RUN} is damaged (could not verify page integrity, CRC checksum" in log
    words = rebuild_command(log)
    assert words[-1] == f"--forcerun={RUN}"
    assert "--configfile" in words and str(workdir / "config.yaml") in words
    # The command, as given, rebuilds the run and what was made from it.
    rebuilt = run_command([*SNAKEMAKE, *words])
    for job in ("retrieve_bm25", "score", "aggregate", "database"):
        assert re.search(rf"^{job}\s+1$", rebuilt.stdout + rebuilt.stderr, re.M)
    pd.testing.assert_frame_equal(runs_view(workdir), clean)

    # Truncated: refused before any job runs, naming the file and the same command.
    run.write_bytes(run.read_bytes()[:300])
    truncated = run_default_target(workdir)
    assert truncated.returncode != 0
    assert f"{RUN} is damaged (Parquet magic bytes not found" in truncated.stderr
    assert rebuild_command(truncated.stderr) == words

    # Deleted: the default target's next run makes it again (planned here; the same jobs ran
    # just above), where Snakemake had nothing to do and the runs view failed.
    run.unlink()
    planned = run_default_target(workdir, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert "Nothing to be done" not in planned.stdout + planned.stderr
    assert re.search(
        rf"rule retrieve_bm25:\n(.*\n)*?\s+reason: Missing output files: {RUN}",
        planned.stdout + planned.stderr,
    )
