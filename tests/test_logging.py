"""A failing job reports its error in the rule's log: a user error in one line, a bug with its
traceback, and the job still fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TINY_CORPUS, TINY_QRELS, TINY_QUERIES, Done, snakemake, write_beir


def assert_one_error_line(result: Done, log: str, expected: str) -> None:
    """The job failed, and its error is one line, without a traceback, in its log and stderr."""
    assert result.returncode != 0
    errors = [line for line in log.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and expected in errors[0]
    assert expected in result.stderr
    assert "Traceback" not in log and "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def failed_jobs(tmp_path_factory) -> tuple[Path, Done]:
    """One offline run (its folder ``work`` and what it printed), --keep-going, of two datasets
    whose first job fails: ``malformed``, whose queries file ends on malformed JSON (ingest),
    and ``zipped``, a zip that is none (download: an offline URL source not at hand is refused
    before any job, test_catalog.py)."""
    root = tmp_path_factory.mktemp("failing")
    data = write_beir(root / "malformed", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    queries = data / "queries.jsonl"
    queries.write_text(queries.read_text() + '{"_id": "q4", "text": \n')
    (root / "zipped.zip").write_bytes(b"not a zip")
    datasets = {
        "malformed": {"source": {"type": "path", "path": str(data)}},
        "zipped": {"source": {"type": "path", "path": str(root / "zipped.zip")}},
    }
    config = {"offline": True, "datasets": datasets, "retrievers": {"bm25": {"type": "bm25"}}}
    targets = ["results/datasets/malformed/queries.parquet", "results/datasets/zipped/source.json"]
    (root / "work").mkdir()
    done = snakemake(root / "work", "--keep-going", *targets, config=config, check=False)
    return root, done


@pytest.mark.e2e
def test_input_error_is_one_line_in_the_rule_log(failed_jobs):
    root, result = failed_jobs
    log = (root / "work" / "results" / "logs" / "ingest" / "malformed.log").read_text()
    queries = root / "malformed" / "queries.jsonl"
    assert_one_error_line(result, log, f"{queries}, line 4: malformed JSON")
    assert not (root / "work" / "results" / "datasets" / "malformed" / "queries.parquet").exists()


@pytest.mark.e2e
def test_download_error_is_one_line_in_the_rule_log(failed_jobs):
    root, result = failed_jobs
    log = (root / "work" / "results" / "logs" / "download" / "zipped.log").read_text()
    assert_one_error_line(result, log, f"{root / 'zipped.zip'}: not a valid zip archive")


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
