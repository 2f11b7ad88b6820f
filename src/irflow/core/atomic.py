"""atomic: files that appear under their final name only once complete.

A killed job must never leave a truncated file that a later stage, or a resume, could take for
a result, and two processes writing the same output (a rerun beside a run still going) must not
write into, or delete, each other's half-written file. So each writer writes to a temporary
name of its own process beside the target and renames it into place (``os.replace``: atomic on
one file system); on any failure the temporary file is removed. A folder (a BM25 index:
several files read together) is written the same way, whole.

A process killed with SIGKILL cannot remove its temporary file, so the name says whose it is:
``.<name>.<host>.<pid>.<started>.tmp`` (irflow.core.processes; DuckDB adds its write-ahead
log as ``<that name>.wal``). ``remove_dead_temporaries``,
which each run calls on results/ before it starts (the Snakefile), removes those whose process
is gone, and leaves those of live processes and of other hosts alone.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from irflow.core.processes import Owner

TEMPORARY = re.compile(
    r"\.(?P<name>.+)\.(?P<host>[^.]+)\.(?P<pid>\d+)\.(?P<started>\d+)\.tmp(\.wal)?"
)


def temporary_name(path: Path) -> Path:
    """The temporary name of ``path`` for this process."""
    return path.with_name(f".{path.name}.{Owner.this_process().fields}.tmp")


def temporary_owner(name: str) -> Owner | None:
    """The process whose temporary file or folder ``name`` is; None for any other name."""
    return Owner.from_match(TEMPORARY.fullmatch(name))


def remove_dead_temporaries(root: str | Path) -> list[Path]:
    """Remove the temporary files and folders under ``root`` whose process is gone (killed
    before it could remove them); returns them."""
    removed = []
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            owner = temporary_owner(name)
            if owner is not None and owner.is_gone():
                _remove(Path(folder, name))
                removed.append(Path(folder, name))
        folders[:] = [name for name in folders if temporary_owner(name) is None]
    return removed


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path of this process beside ``path`` (its folder made if missing) to write
    to, as a file or as a folder; it takes ``path``'s name when the block ends (a folder
    replacing the old one), and is removed if the block raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    try:
        yield tmp
        if tmp.is_dir() and path.is_dir():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> None:
    """``path`` holds ``text`` (UTF-8), written atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
