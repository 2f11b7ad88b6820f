"""Settings stamps: the settings of each job as a file among its inputs, so that a changed
setting reruns the job, and everything downstream of it, by modification times alone.

Snakemake reruns a job whose params changed only while its records in ``.snakemake/metadata``
last; with them deleted or damaged, a changed ``query_prompt`` or ``top_k`` left the old runs
in place. So every rule with params gets one more input, ``settings`` (the Snakefile adds it
to each such rule): ``results/settings/<rule>/<wildcard values>.json``, the job's params as
the rule gives them to its script, written while the graph is planned and only when its
content differs. An unchanged config leaves every stamp as it is (a dry run plans nothing);
a changed setting leaves a stamp newer than the job's outputs.

The job records its stamp's md5 in its manifest (``settings_md5``, scripts/_common.start_job),
and planning compares the two: an output whose manifest records other settings than the
stamp's (results copied from another experiment, say) reruns its job too.

The files of a dataset on disk are checked the same way (``check_dataset_files``), so that an
edit that keeps a file's modification time (``touch -r``, ``cp -p``) still reruns its
download job and everything after it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from irflow.core import atomic
from irflow.data.download import dataset_files, dataset_fingerprint

STAMP_INPUT = "settings"
STAMPS = Path("results/settings")


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


def update_stamp(path: Path, text: str, manifest: Path | None) -> None:
    """``path`` holds ``text``, rewritten only when its content differs; touched (so newer
    than the job's outputs) when the job's ``manifest`` records other settings.

    A new stamp is dated 1970, so that on its own it reruns nothing: outputs made before the
    stamps existed (by an older irflow) are taken to be of the current settings, as
    Snakemake's params trigger had checked them, unless their manifest says otherwise."""
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if current != text:
        atomic.write_text(path, text)
        if current is None:
            os.utime(path, (0, 0))
    if manifest is not None and recorded_settings_md5(manifest) not in (None, text_md5(text)):
        os.utime(path)


def settings_stamp(rule):
    """The input function of a rule's stamp: writes the job's stamp, when its settings
    changed, and names it."""
    manifest = dict(rule.output.items()).get("manifest")

    def stamp(wildcards) -> str:
        path = stamp_path(rule.name, wildcards)
        produced = Path(manifest.apply_wildcards(wildcards)) if manifest else None
        update_stamp(path, settings_text(job_settings(rule.params, wildcards)), produced)
        return str(path)

    return stamp


def file_status(path: Path) -> list[int]:
    """What changes whenever a file's content does: its size, modification and change times
    and inode. A user can set the modification time back, not the change time, which the
    kernel sets on every write (and on setting the modification time)."""
    status = path.stat()
    return [status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino]


def check_dataset_files(folder: Path, split: str, source: Path, record: Path) -> None:
    """Keep ``record`` newer than the dataset's ``source`` (source.json) while the dataset's
    files differ from the checksum ``source`` records, so that their download job reruns.

    ``record`` holds each file's status (``file_status``) when last checked; the files are
    hashed only when one's status changed since, so an unchanged dataset costs a ``stat`` per
    file. Hashed and unchanged, the record takes ``source``'s modification time (it reruns
    nothing); without a ``source`` yet, the download job runs anyway and nothing is hashed.
    """
    status = {str(path): file_status(path) for path in dataset_files(folder, split)}
    if record.is_file() and json.loads(record.read_text())["status"] == status:
        return
    atomic.write_text(record, json.dumps({"status": status}, indent=2) + "\n")
    if not source.is_file():
        return
    recorded = json.loads(source.read_text())["checksum"]
    if dataset_fingerprint(folder, split)["checksum"] == recorded:
        since = source.stat()
        os.utime(record, ns=(since.st_atime_ns, since.st_mtime_ns))
