"""Content fingerprints: what a cached result depends on, as short stable strings."""

from __future__ import annotations

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
    """md5 over every file's relative path and content, in sorted order."""
    folder = Path(folder)
    digest = hashlib.md5()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(folder).as_posix()}:{file_md5(path)}\n".encode())
    return digest.hexdigest()


def value_md5(value) -> str:
    """md5 of a JSON-serialisable value, independent of key order."""
    return hashlib.md5(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
