"""locks: one live process at a time on a folder of resumable work.

Snakemake's own lock keeps two runs apart, but a job can outlive its Snakemake (kill -9 of
Snakemake alone, a cluster job whose submitting process died), and the rerun after
``--unlock`` then starts a second job on the same outputs. A job that resumes from a folder of
finished pieces (``irflow.encoding.embed``'s parts) holds that folder with an OS lock on a file
beside it (``flock``): the kernel drops it when the process ends, however it ends, so a killed
job's pieces stay resumable by the next one, while a live holder makes the next one wait.
The file names its holder (``irflow.core.processes.Owner``), for the message of whoever waits.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from irflow.core.processes import Owner

log = logging.getLogger(__name__)


def lock_file(folder: Path) -> Path:
    """The lock file of ``folder``: beside it, so that removing the folder keeps the lock."""
    return folder.with_name(folder.name + ".lock")


@contextmanager
def holding(folder: Path) -> Iterator[None]:
    """Hold ``folder`` alone for the block, waiting (with a message naming the holder) while
    another live process holds it. The lock file is removed once the block succeeds."""
    path = lock_file(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path, folder) as handle:
        handle.truncate(0)
        handle.write(f"{Owner.this_process()}, since {time.ctime()}\n")
        handle.flush()
        yield
        # Unlinked while still held: whoever waits on this file finds it gone and starts over.
        path.unlink()


@contextmanager
def _locked(path: Path, folder: Path) -> Iterator:
    while True:
        handle = path.open("a+")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                log.warning("waiting for %s: it is being written by %s", folder, holder)
                fcntl.flock(handle, fcntl.LOCK_EX)
            if _same_file(handle, path):
                yield handle
                return
        finally:
            handle.close()  # releases the lock


def _same_file(handle, path: Path) -> bool:
    """Whether ``path`` still names the file locked through ``handle`` (its holder may have
    removed it while this process waited)."""
    try:
        return os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return False
