"""What a killed run leaves behind (irflow.workflow.interrupted, irflow.core.atomic): a lock
is removed only when the run that took it, and every job of it, is provably gone, and a
temporary file only when its own process is. Every process here is real: a writer SIGKILLed
half-way through its write, a live one, a job left running by a killed Snakemake.
tests/test_first_run.py resumes a SIGKILLed Snakemake with the README's command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from irflow.core import atomic
from irflow.core.processes import HOST, Owner, start_ticks
from irflow.workflow.interrupted import (
    DRY_RUN,
    clear_after_dead_runs,
    clear_stale_lock,
)

# Writes a folder atomically (as the BM25 index is written) and stops half-way, until killed.
WRITER = """
import sys, time
from irflow.core.atomic import atomic_path
with atomic_path(sys.argv[1]) as tmp:
    tmp.mkdir()
    (tmp / "half.npy").write_bytes(bytes(4096))
    print(tmp, flush=True)
    time.sleep(600)
"""


def writing(target: Path) -> tuple[subprocess.Popen, Path]:
    """A process half-way through writing ``target``, and its temporary folder."""
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True
    )
    return process, Path(process.stdout.readline().strip())


def killed_writing(target: Path) -> Path:
    """The temporary folder of a process SIGKILLed half-way through writing ``target``."""
    process, temporary = writing(target)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return temporary


@contextmanager
def live(command: list[str], cwd: Path | None = None) -> Iterator[subprocess.Popen]:
    process = subprocess.Popen(command, cwd=cwd)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def owner_of(process: subprocess.Popen) -> Owner:
    return Owner(HOST, process.pid, start_ticks(process.pid))


def test_a_killed_writers_temporary_is_removed_and_a_live_writers_kept(tmp_path):
    results = tmp_path / "results"
    dead = killed_writing(results / "indexes" / "sub" / "bm25")
    elsewhere = results / ".bm25.another-host.1.1.tmp"  # a run on another machine's
    elsewhere.mkdir()
    process, kept = writing(results / "indexes" / "sub" / "other")
    try:
        assert dead.is_dir() and dead.name.startswith(".bm25.")
        assert atomic.remove_dead_temporaries(results) == [dead]
        assert not dead.exists() and kept.is_dir() and elsewhere.is_dir()
    finally:
        process.kill()
        process.wait()


def locked_by(workdir: Path, owner: Owner | None) -> Path:
    """``workdir``/.snakemake as a run of ``owner`` leaves it when SIGKILLed: the run recorded
    (None: not), then its lock taken; returns the lock file."""
    snakemake_dir = workdir / ".snakemake"
    if owner is not None:
        (snakemake_dir / "irflow-runs").mkdir(parents=True)
        (snakemake_dir / "irflow-runs" / owner.fields).touch()
        os.utime(snakemake_dir / "irflow-runs" / owner.fields, (0, 0))  # before the lock
    (snakemake_dir / "locks").mkdir(parents=True)
    lock = snakemake_dir / "locks" / "0.output.lock"
    lock.write_text("results/x\n")
    return lock


def test_a_lock_whose_run_is_gone_is_removed_and_the_run_recorded(tmp_path):
    with live(["sleep", "60"]) as process:
        gone = owner_of(process)
    lock = locked_by(tmp_path, gone)
    messages = clear_after_dead_runs(tmp_path / ".snakemake", tmp_path / "results")
    assert not lock.exists()
    assert "removed the stale lock" in messages[0] and f"process {gone.pid}" in messages[0]
    records = [path.name for path in (tmp_path / ".snakemake" / "irflow-runs").iterdir()]
    assert records == [Owner.this_process().fields]


HOLDERS = ["live run", "other host", "job of a killed run", "cluster job", "unknown"]


@pytest.mark.parametrize("holder", HOLDERS)
def test_a_lock_that_may_be_held_is_kept_and_explained(tmp_path, holder):
    with live(["sleep", "60"]) as sleeper:
        owner = {
            "live run": owner_of(sleeper),
            "other host": Owner("another-host", 1, 1),
            "job of a killed run": Owner(HOST, 2**22 + 1, 1),  # beyond any pid_max: gone
            "cluster job": Owner(HOST, 2**22 + 1, 1),
            "unknown": None,
        }[holder]
        lock = locked_by(tmp_path, owner)
        if holder == "cluster job":  # as Snakemake records a job it submitted to SLURM
            incomplete = tmp_path / ".snakemake" / "incomplete" / "cmVzdWx0cy94"
            incomplete.parent.mkdir()
            incomplete.write_text(json.dumps({"external_jobid": "4242"}))
        # Snakemake's job, left running by its killed Snakemake, in the working folder.
        job = [sys.executable, "-c", "import time; time.sleep(60)", ".snakemake/scripts/x.py"]
        with live(job, cwd=tmp_path) if holder == "job of a killed run" else live(["true"]):
            messages = clear_stale_lock(tmp_path / ".snakemake")
    assert lock.read_text() == "results/x\n"
    expected = {
        "live run": f"process {sleeper.pid} on {HOST}",
        "other host": "process 1 on another-host",
        "job of a killed run": "(Snakemake or its job)",
        "cluster job": "cluster job 4242 (squeue -j 4242)",
        "unknown": "a run that cannot be told from here",
    }[holder]
    assert expected in messages[0] and "--unlock is safe once" in messages[0]


DRY_RUN_PLANS = """
import json, sys
from pathlib import Path
from irflow.workflow.interrupted import claim_folder
print(json.dumps(claim_folder(Path(sys.argv[1]), dry_run=True)))
"""


@pytest.mark.parametrize("earlier", ["run at work", "dry run", "gone"])
def test_a_dry_run_is_told_of_an_earlier_run_at_work_and_not_refused(tmp_path, earlier):
    """A dry run beside a run that replaces files can meet Snakemake's "Unable to obtain
    modification time ... although it existed before" (reproduced: a dry run beside a
    --forceall run, on a loaded machine); its note says why, and to plan again later."""
    runs = tmp_path / ".snakemake" / "irflow-runs"
    runs.mkdir(parents=True)
    with live(["sleep", "60"]) as sleeper:
        owner = owner_of(sleeper) if earlier != "gone" else Owner(HOST, 2**22 + 1, 1)
        (runs / owner.fields).write_text(DRY_RUN if earlier == "dry run" else "")
        # The dry run starts after the run it is told of.
        planning = subprocess.run(
            [sys.executable, "-c", DRY_RUN_PLANS, str(tmp_path / ".snakemake")],
            capture_output=True,
            text=True,
            check=True,
        )
    notes = json.loads(planning.stdout)
    assert [path.read_text() for path in runs.iterdir() if path.name != owner.fields] == [DRY_RUN]
    if earlier == "run at work":
        [note] = notes
        assert f"beside a run at work in this folder (process {sleeper.pid} on {HOST})" in note
        assert "Unable to obtain modification time" in note and "plan again once it ends" in note
    else:
        assert notes == []
