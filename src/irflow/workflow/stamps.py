"""Settings stamps: the settings of each job kept beside the results, so that a changed
setting reruns the job, and everything downstream of it, by modification times alone.

Snakemake reruns a job whose params changed only while its records in ``.snakemake/metadata``
last; with them deleted or damaged, a changed ``query_prompt`` or ``top_k`` left the old runs
in place. So every rule with params gets an input function that names no file (the Snakefile
adds it to each such rule). While the graph is planned it writes the job's stamp,
``results/settings/<rule>/<wildcard values>.json``, the job's params as the rule gives them to
its script, only when its content differs; and when it differs, it dates the job's outputs
1970, older than any input, so that Snakemake makes them again. An unchanged config leaves
every stamp and output as it is (a dry run plans nothing).

The job records its stamp's md5 in its manifest (``settings_md5``, scripts/_common.start_job),
and planning compares the two: an output whose manifest records other settings than the
stamp's (results copied from another experiment, say) is made again too.

The files of a dataset on disk are checked by their checksum too (``check_dataset_files``):
an edit that keeps a file's modification time (``touch -r``, ``cp -p``) still reruns its
download job and everything after it, and the same files copied anew (a newer modification
time) rerun nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from irflow.core import atomic
from irflow.core.errors import UserError
from irflow.data.layouts import dataset_files, dataset_fingerprint

if TYPE_CHECKING:  # jobs import this module (scripts/_common.py): not Snakemake's internals
    from irflow.workflow.snakemake_internals import WorkflowRule

STAMP_INPUT = "settings"
STAMPS = Path("results/settings")
# The modification time of an output to be made again: one second into 1970, older than any
# input. Not 0: Snakemake takes an output dated 0 as undated and never compares its inputs'
# times with it (DAG.update_needrun: `if output_mintime_ and ...`), so the job did not rerun.
MADE_AGAIN = 1


def stamp_path(rule_name: str, wildcards) -> Path:
    """``results/settings/<rule>/<value>/.../<value>.json``, a job's wildcard values in the
    order of its outputs' (``<rule>.json`` for a rule without wildcards)."""
    parts = [rule_name, *(str(value) for _, value in wildcards.items())]
    return STAMPS.joinpath(*parts[:-1], f"{parts[-1]}.json")


def job_settings(params, wildcards) -> dict:
    """A job's params: each function of the rule's params called on the job's wildcards, as
    Snakemake calls it. A string's wildcards are left unfilled: the stamp's path holds their
    values."""
    return {name: value(wildcards) if callable(value) else value for name, value in params.items()}


def settings_text(settings: dict) -> str:
    return json.dumps(settings, indent=2, sort_keys=True, default=str) + "\n"


def text_md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def recorded_settings_md5(manifest: Path) -> str | None:
    """The ``settings_md5`` a job's manifest records; None when it records none (written
    before stamps existed) or cannot be read (the job then reruns for its missing output)."""
    try:
        return json.loads(manifest.read_text()).get("settings_md5")
    except (OSError, ValueError):
        return None


class UnwritableRecordError(UserError, OSError):
    """One of irflow's records in results/settings cannot be written or dated."""

    def __init__(self, path: Path, error: OSError):
        super().__init__(
            f"cannot write {path} ({error.strerror or error}): irflow writes or dates it so "
            f"that a changed setting or dataset file reruns what it decides. Free space on "
            f"the disk of results/ or make it writable, then run the same command again."
        )


def update_stamp(path: Path, text: str, manifest: Path | None) -> bool:
    """``path`` holds ``text``, rewritten only when its content differs. Whether the job's
    outputs are of other settings: the stamp held others, or the job's ``manifest`` records
    others. A damaged stamp (not UTF-8) is of other settings: it is rewritten and the job's
    outputs made again, never left to hide a change.

    A new stamp changes nothing: outputs made before the stamps existed (by an older irflow)
    are taken to be of the current settings, as Snakemake's params trigger had checked them,
    unless their manifest says otherwise."""
    current = path.read_bytes().decode("utf-8", errors="replace") if path.is_file() else None
    if current != text:
        write_record(path, text)
    recorded = recorded_settings_md5(manifest) if manifest is not None else None
    return (current is not None and current != text) or recorded not in (None, text_md5(text))


def write_record(path: Path, text: str) -> None:
    """Write one of irflow's records; a disk that refuses it (full, read-only) ends the run
    with an error naming the file, rather than leave a change unnoticed."""
    try:
        atomic.write_text(path, text)
    except OSError as error:
        raise UnwritableRecordError(path, error) from error


def make_again(outputs: list[Path]) -> None:
    """Date ``outputs`` 1970, older than any input, so that Snakemake reruns their job (and
    everything after it) by modification times alone. Nothing is deleted: an output is
    replaced only by its job's new one."""
    for output in outputs:
        # A directory output's time is that of the timestamp file Snakemake keeps in it.
        for dated in (output, output / ".snakemake_timestamp"):
            if dated.exists():
                try:
                    os.utime(dated, (MADE_AGAIN, MADE_AGAIN))
                except OSError as error:
                    raise UnwritableRecordError(dated, error) from error


def settings_stamp(rule: WorkflowRule, dry_run):
    """An input function of ``rule`` that names no file: it writes the job's stamp and, when
    the job's outputs are of other settings, dates them 1970. (A stamp among the inputs would
    change every job's input files, and Snakemake would rerun the whole graph once.) It does
    nothing while ``dry_run()``: a dry run of a changed config changes no file, so a later
    run of the config as it was reruns nothing. The rule's other input functions call it
    first (irflow.workflow.guard), so it acts once per job: later calls return at once."""
    stamped: set[tuple] = set()

    def stamp(wildcards) -> list:
        job = tuple(dict(wildcards).items())
        if dry_run() or job in stamped:
            return []
        stamped.add(job)
        path = stamp_path(rule.name, wildcards)
        outputs, named = rule.outputs(wildcards)
        text = settings_text(job_settings(rule.params, wildcards))
        if update_stamp(path, text, named.get("manifest")):
            make_again(outputs)
        return []

    return stamp


def file_status(path: Path) -> list[int]:
    """What changes whenever a file's content does: its size, modification and change times
    and inode. A user can set the modification time back, not the change time, which the
    kernel sets on every write (and on setting the modification time)."""
    status = path.stat()
    return [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino]


def recorded_field(path: Path, field: str):
    """``field`` of the JSON object in ``path``; None when the file is missing or damaged
    (truncated, not UTF-8, not that object): the check it serves then starts over."""
    try:
        return json.loads(path.read_bytes())[field]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_dataset_files(folder: Path, split: str, source: Path, record: Path) -> bool:
    """Date the dataset's ``source`` (source.json, its download job's output) 1970 when the
    dataset's files differ from the checksum it records, so that the download job and
    everything after it rerun. Returns whether that job is to run: ``source`` missing or dated
    1970 (by this check, or by the job's settings stamp). Otherwise the files' checksum is
    the one ``source`` records, and their modification times are not to count: a copy of the
    same files made anew (``cp``, a new download of the same data) reruns nothing.

    ``record`` holds each file's status (``file_status``) when last checked; the files are
    hashed only when one's status changed since, so an unchanged dataset costs a ``stat`` per
    file. Without a ``source`` yet, the download job runs anyway and nothing is hashed. A
    damaged ``record`` or ``source`` counts as changed: the files are hashed, a damaged source
    made again, and the record rewritten. The new status is recorded only once the comparison
    is acted on (``source`` dated), so that a run killed in between compares again.
    """
    status = {str(path): file_status(path) for path in dataset_files(folder, split)}
    if recorded_field(record, "status") != status:
        if source.is_file():
            recorded = recorded_field(source, "checksum")
            if dataset_fingerprint(folder, split)["checksum"] != recorded:
                make_again([source])
        write_record(record, json.dumps({"status": status}, indent=2) + "\n")
    return not source.is_file() or source.stat().st_mtime == MADE_AGAIN
