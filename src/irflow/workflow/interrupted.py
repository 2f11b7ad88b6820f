"""interrupted: what a killed run leaves behind, cleared when the next one parses the Snakefile.

A run killed with SIGKILL (or by a crash, or a lost session) leaves two things:
- Snakemake's lock (``.snakemake/locks/``), taken so that two runs never write the same
  outputs; every later run is refused ("Directory cannot be locked") until ``--unlock``.
- the temporary files of its jobs (irflow.core.atomic), such as a half-built BM25 index.

Snakemake takes its lock after the Snakefile is parsed, so the Snakefile can tell a stale lock
from a held one. Each run records itself (host, process id, start time) in
``.snakemake/irflow-runs/`` as it parses the Snakefile, before it can take a lock. A lock is
stale, and removed as ``--unlock`` would, only when every recorded run is gone
(irflow.core.processes), one was recorded before the lock was written, no Snakemake nor
job of one still works in this folder (a job outlives a killed Snakemake and would write
beside a new run's), and no job was submitted to a cluster (a SLURM job's state cannot be
told from here). Otherwise the lock is kept, and the message says what holds it and when
``--unlock`` is safe.

Snakemake takes its lock only once it has planned the run, so two runs started at once in one
folder could both plan, and the second met Snakemake's lock message, which suggests
``--unlock`` while the first runs. So when a run starts to plan (the Snakefile calls
``claim_folder`` before its first input function, when it is known whether it is a dry run),
a run that finds a run of this host recorded before it, not a dry run, still running is
refused, naming that run's process (``refuse_a_second_run``). A dry run is not refused, but
told of the run at work: Snakemake stops a dry run whose plan reads a file that the other run
replaces meanwhile ("Unable to obtain modification time of file ... although it existed
before"), so planning again once that run ends is the answer, not --unlock.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from irflow.core.atomic import remove_dead_temporaries
from irflow.core.errors import UserError
from irflow.core.processes import HOST, OWNER_FIELDS, PROC, Owner, ancestors, start_ticks
from irflow.workflow import snakemake_internals

LOCK_FILE = re.compile(r"\d+\.(input|output)\.lock")
RUN_RECORD = re.compile(OWNER_FIELDS)
DRY_RUN = "dry run\n"
UNLOCK_ADVICE = (
    "--unlock is safe once no Snakemake runs in this folder on any machine and none of its "
    "jobs is left (ps, squeue): a job still running would write beside a new run's"
)


def recorded_runs(snakemake_dir: Path) -> dict[Path, Owner]:
    """The runs recorded in ``snakemake_dir``/irflow-runs, by their record."""
    folder = snakemake_dir / "irflow-runs"
    owners = {path: Owner.from_match(RUN_RECORD.fullmatch(path.name)) for path in folder.glob("*")}
    return {path: owner for path, owner in owners.items() if owner is not None}


def record_this_run(snakemake_dir: Path) -> None:
    folder = snakemake_dir / "irflow-runs"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / Owner.this_process().fields).touch()


def claim_when_planning(workflow) -> Callable[[], None]:
    """What a run calls, once, as it starts to plan: before its first input function, when
    Snakemake knows whether it is a dry run, and before it locks the folder. A run while another
    runs here is refused, its message the last line (``claim_folder``)."""

    @functools.cache
    def claim() -> None:
        if snakemake_internals.is_main_process(workflow):
            try:
                notes = claim_folder(Path(".snakemake"), snakemake_internals.is_dry_run(workflow))
            except UserError as error:
                raise SystemExit(f"{type(error).__name__}: {error}") from None
            for note in notes:
                print(note, file=sys.stderr)

    return claim


def claim_folder(snakemake_dir: Path, dry_run: bool) -> list[str]:
    """As a run starts to plan: a dry run's record says so (it writes nothing, and holds no
    lock), and its notes name the runs at work here; another run is refused while an earlier
    one runs (``refuse_a_second_run``)."""
    if not dry_run:
        refuse_a_second_run(snakemake_dir)
        return []
    (snakemake_dir / "irflow-runs" / Owner.this_process().fields).write_text(DRY_RUN)
    at_work = earlier_runs_at_work(snakemake_dir)
    if not at_work:
        return []
    holders = ", ".join(str(owner) for owner in at_work)
    return [
        f"irflow: this dry run plans beside a run at work in this folder ({holders}); if that "
        'run replaces a file while this one plans, Snakemake stops ("Unable to obtain '
        'modification time ... although it existed before"): plan again once it ends.'
    ]


class FolderInUseError(UserError):
    """Another run works in this folder."""


def earlier_runs_at_work(snakemake_dir: Path) -> list[Owner]:
    """The runs of this host recorded before this one, not dry runs, still running (of two
    started at once, the one that started first goes on)."""
    this = Owner.this_process()
    return [
        owner
        for path, owner in recorded_runs(snakemake_dir).items()
        if owner.host == HOST
        and (owner.started, owner.pid) < (this.started, this.pid)
        and not owner.is_gone()
        and owner.pid not in ancestors()
        and not is_dry_run(path)
    ]


def refuse_a_second_run(snakemake_dir: Path) -> None:
    """Refuse this run while an earlier run works in this folder (``earlier_runs_at_work``)."""
    earlier = earlier_runs_at_work(snakemake_dir)
    if earlier:
        holders = ", ".join(str(owner) for owner in earlier)
        pids = " ".join(str(owner.pid) for owner in earlier)
        raise FolderInUseError(
            f"another run works in this folder ({snakemake_dir.parent.resolve()}): {holders}. "
            f"Wait for it to end, or stop it (kill {pids}) and run your command again: the "
            f"lock of a run that was stopped is removed then. Do not use --unlock while it runs."
        )


def is_dry_run(record: Path) -> bool:
    try:
        return record.read_text() == DRY_RUN
    except (OSError, ValueError):  # removed by a run that found it gone, or damaged
        return False


def snakemake_processes_here(folder: Path) -> list[int]:
    """The other live processes of this host that work in ``folder`` and run Snakemake or a
    job of it (Snakemake starts a rule's script as .snakemake/scripts/<tmp>.<script>)."""
    here, ours, found = folder.resolve(), ancestors(), []
    for entry in PROC.glob("[0-9]*"):
        pid = int(entry.name)
        try:
            works_here = Path(os.readlink(entry / "cwd")) == here
            command = (entry / "cmdline").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if (
            works_here
            and pid not in ours
            and b"snakemake" in command
            and start_ticks(pid) is not None
        ):
            found.append(pid)
    return sorted(found)


def cluster_jobs(snakemake_dir: Path) -> list[str]:
    """The cluster job ids of the jobs Snakemake submitted and never saw finish (its
    ``incomplete/`` records; a local job has none)."""
    ids = set()
    for folder, _, files in os.walk(snakemake_dir / "incomplete"):
        for name in files:
            try:
                ids.add(json.loads(Path(folder, name).read_text()).get("external_jobid"))
            except (OSError, ValueError, AttributeError):
                continue  # being written, or not a record
    return sorted(str(job) for job in ids - {None})


def clear_stale_lock(snakemake_dir: Path) -> list[str]:
    """Remove Snakemake's lock when the run that took it is provably gone; the messages say
    what was done, or what holds the lock."""
    locks = [path for path in (snakemake_dir / "locks").glob("*") if LOCK_FILE.fullmatch(path.name)]
    runs = recorded_runs(snakemake_dir)
    if not locks:
        for record, owner in runs.items():
            if owner.is_gone():
                record.unlink(missing_ok=True)
        return []
    live = [owner for owner in runs.values() if not owner.is_gone()]
    here = snakemake_processes_here(snakemake_dir.parent) if (PROC / "self").exists() else []
    working = sorted(set(here) - {owner.pid for owner in live})  # a live run is named once
    submitted = cluster_jobs(snakemake_dir)
    locked_at = min(lock.stat().st_mtime for lock in locks)
    recorded_before = any(record.stat().st_mtime <= locked_at for record in runs)
    if live or working or submitted or not recorded_before:
        holders = [str(owner) for owner in live]
        holders += [f"process {pid} on {HOST} (Snakemake or its job)" for pid in working]
        holders += [f"cluster job {job} (squeue -j {job})" for job in submitted]
        held_by = ", ".join(holders) if holders else "a run that cannot be told from here"
        return [
            f"irflow: {snakemake_dir / 'locks'} holds Snakemake's lock, held by {held_by}; "
            f"if Snakemake refuses to run, wait for it or stop it. {UNLOCK_ADVICE}."
        ]
    for lock in locks:
        lock.unlink(missing_ok=True)
    for record in runs:
        record.unlink(missing_ok=True)
    gone = ", ".join(str(owner) for owner in runs.values())
    return [
        f"irflow: removed the stale lock {snakemake_dir / 'locks'} of a run that was killed "
        f"({gone}, gone, with no job left); its unfinished jobs run again"
    ]


def clear_after_dead_runs(snakemake_dir: Path, results: Path) -> list[str]:
    """Before a run: a stale lock and the temporary files of dead jobs under ``results`` are
    removed, and this run is recorded; the messages say what was found."""
    messages = clear_stale_lock(snakemake_dir)
    record_this_run(snakemake_dir)
    removed = remove_dead_temporaries(results)
    if removed:
        listed = ", ".join(str(path) for path in removed)
        messages.append(f"irflow: removed the temporary files of jobs that were killed: {listed}")
    return messages
