"""atomic: files that appear under their final name only once complete.

A killed job must never leave a truncated file that a later stage, or a resume, could take for
a result, and two processes writing the same output (a rerun beside a run still going) must not
write into, or delete, each other's half-written file. So each writer writes to a temporary
name of its own process beside the target and renames it into place (``os.replace``: atomic on
one file system); on any failure the temporary file is removed. The name ends in ``.tmp``, so a
leftover of a killed process is easy to find (tests/test_kill_resume.py looks for them).
A folder (a BM25 index: several files read together) is written the same way, whole.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def temporary_name(path: Path) -> Path:
    """The temporary name of ``path`` for this process."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path of this process beside ``path`` (its folder made if missing) to write
    to, as a file or as a folder; it takes ``path``'s name when the block ends (a folder
    replacing the old one), and is removed if the block raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    _remove(tmp)  # a killed process's, whose id came round again
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
