"""A failing job reports its error in the rule's log: a user error in one line, a bug with its
traceback, and the job still fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, TINY_CORPUS, TINY_QRELS, TINY_QUERIES, Done, snakemake, write_beir


def run_workflow(workdir: Path, datasets: dict, target: str) -> Done:
    """Run Snakemake offline in a new ``workdir`` for ``target`` of a BM25-only config."""
    workdir.mkdir()
    config = {"offline": True, "datasets": datasets, "retrievers": {"bm25": {"type": "bm25"}}}
    return snakemake(workdir, target, config=config, cores="1", check=False)


def assert_one_error_line(result: Done, log: str, expected: str) -> None:
    """The job failed, and its error is one line, without a traceback, in its log and stderr."""
    assert result.returncode != 0
    errors = [line for line in log.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and expected in errors[0]
    assert expected in result.stderr
    assert "Traceback" not in log and "Traceback" not in result.stderr


def test_input_error_is_one_line_in_the_rule_log(tmp_path):
    data = write_beir(tmp_path / "data" / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    queries = data / "queries.jsonl"
    queries.write_text(queries.read_text() + '{"_id": "q4", "text": \n')
    workdir = tmp_path / "work"
    result = run_workflow(
        workdir,
        {"tiny": {"source": {"type": "path", "path": str(data)}}},
        "results/datasets/tiny/queries.parquet",
    )
    log = (workdir / "results" / "logs" / "ingest" / "tiny.log").read_text()
    assert_one_error_line(result, log, f"{queries}, line 4: malformed JSON")
    assert not (workdir / "results" / "datasets" / "tiny" / "queries.parquet").exists()


def test_download_error_is_one_line_in_the_rule_log(tmp_path):
    # A zip that is none: the download job's unpacking fails. (An offline URL source that is
    # not at hand is refused before any job: test_catalog.py.)
    archive = tmp_path / "tiny.zip"
    archive.write_bytes(b"not a zip")
    workdir = tmp_path / "work"
    result = run_workflow(
        workdir,
        {"tiny": {"source": {"type": "path", "path": str(archive)}}},
        "results/datasets/tiny/source.json",
    )
    log = (workdir / "results" / "logs" / "download" / "tiny.log").read_text()
    assert_one_error_line(result, log, f"{archive}: not a valid zip archive")


def _run_failing_job(
    tmp_path: Path, raise_statement: str
) -> tuple[subprocess.CompletedProcess, str]:
    """Run a script that sets up logging as a Snakemake script does, then raises."""
    log = tmp_path / "job.log"
    script = tmp_path / "job.py"
    script.write_text(
        "from types import SimpleNamespace\n"
        "from _common import setup_logging\n"
        "from irflow.core.errors import DownloadError\n"
        f"setup_logging(SimpleNamespace(log=[{str(log)!r}]))\n"
        f"{raise_statement}\n"
    )
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONPATH": str(REPO / "scripts")},
        check=False,
    )
    return result, log.read_text()


def test_download_error_is_one_line_without_traceback(tmp_path):
    result, log = _run_failing_job(tmp_path, "raise DownloadError('dataset x: HTTP 404')")
    assert result.returncode == 1
    for text in (log, result.stderr):
        assert text.count("\n") == 1 and "ERROR dataset x: HTTP 404" in text
        assert "Traceback" not in text


def test_unexpected_error_keeps_its_traceback_in_the_log(tmp_path):
    result, log = _run_failing_job(tmp_path, "{}['missing']")
    assert result.returncode == 1
    for text in (log, result.stderr):
        assert "unexpected error" in text and "Traceback" in text
        assert "KeyError: 'missing'" in text
