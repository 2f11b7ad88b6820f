"""Why a failed job's results are missing, read from its log as a real job writes it
(scripts/_common.py): a user error's one line, a bug's exception, nothing for a killed job
(irflow.workflow.run_end; the partial tables that show it: tests/test_partial_results.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from irflow.workflow.run_end import log_error


def job_log(tmp_path: Path, ending: str) -> Path:
    """The log of a script that sets up logging as a rule's script does, logs its progress,
    then runs ``ending``."""
    log = tmp_path / "job.log"
    script = tmp_path / "job.py"
    script.write_text(
        "import os, signal\n"
        "from types import SimpleNamespace\n"
        "from _common import log, setup_logging\n"
        "from irflow.core.errors import DownloadError\n"
        f"setup_logging(SimpleNamespace(log=[{str(log)!r}]))\n"
        "log.info('encoded 8 of 100 documents')\n"
        f"{ending}\n"
    )
    subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        env=os.environ | {"PYTHONPATH": str(REPO / "scripts")},
        check=False,
    )
    return log


@pytest.mark.parametrize(
    ("ending", "error"),
    [
        ("raise DownloadError('dataset x: HTTP 404')", "dataset x: HTTP 404"),
        ("{}['missing']", "KeyError: 'missing'"),  # a bug: the traceback's last line
        ("os.kill(os.getpid(), signal.SIGKILL)", None),  # killed: its progress is no error
    ],
)
def test_the_error_a_job_s_log_ends_with(tmp_path, ending, error):
    assert log_error(job_log(tmp_path, ending)) == error


def test_a_job_without_a_log_has_no_error_to_show(tmp_path):
    assert log_error(tmp_path / "never-written.log") is None
