"""A folder built under a temporary name and renamed into place only when complete."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def refuse_existing(out: Path) -> None:
    if out.exists():
        raise SystemExit(f"{out} exists: remove it or choose another --out")


@contextmanager
def building(out: Path) -> Iterator[Path]:
    """A new folder beside ``out`` to write into; it becomes ``out`` when the block ends, and
    is removed if the block fails, so ``out`` is never half-written."""
    refuse_existing(out)
    work = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        yield work
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    work.rename(out)
