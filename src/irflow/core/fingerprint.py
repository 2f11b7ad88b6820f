"""Content fingerprints: what a cached result depends on, as short stable strings."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

CHUNK = 1 << 20


def file_md5(path: str | Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def folder_md5(folder: str | Path) -> str:
    """md5 over every file's relative path and content, in sorted order. Read once per
    process while no file changes: a planning run asks for a model folder's several times
    (its embed settings, its local_copy's pin, the offline check), 0.14 s each for
    all-MiniLM-L6-v2; a file written, replaced or touched since changes its status (size,
    modification and change time, inode), and the folder is read again."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return _files_md5(folder, tuple((path, _status(path)) for path in files))


def _status(path: Path) -> tuple[int, int, int, int]:
    status = path.stat()
    return status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino


@functools.lru_cache(maxsize=64)
def _files_md5(folder: Path, files: tuple[tuple[Path, tuple[int, int, int, int]], ...]) -> str:
    digest = hashlib.md5()
    for path, _ in files:
        digest.update(f"{path.relative_to(folder).as_posix()}:{file_md5(path)}\n".encode())
    return digest.hexdigest()


def value_md5(value) -> str:
    """md5 of a JSON-serialisable value, independent of key order."""
    return hashlib.md5(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
