"""download_cache: what the download cache (``download_dir``) holds, keyed by where it came from.

- A dataset folder ``download_dir/<name>`` carries a marker file, ``.irflow-download.json``,
  with the key of its source (the URL and md5, the Hugging Face repo and revision, the
  ir_datasets id and field mapping, or the local zip). A folder is reused only when its key
  is the configured source's, and replaced only when it has the marker: a folder irflow did
  not write (no marker) is never deleted.
- A downloaded file's name holds a digest of its URL, so that two URLs whose paths end
  alike (``uc?id=...``, ``.../data.zip?download=1``) never share a file, nor a ``.part``.
Keys and records hold digests and public URLs (irflow.core.redaction), never a URL's secrets.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
import shutil
from pathlib import Path

from irflow.core.errors import DownloadError

log = logging.getLogger("irflow.data.download")

MARKER = ".irflow-download.json"


def digest(value) -> str:
    """SHA-256 of ``value``'s canonical JSON."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


# --- dataset folders --------------------------------------------------------------------------


def write_marker(folder: Path, key: str, source: str) -> None:
    """Mark ``folder`` as written by irflow's download from the source ``key`` describes."""
    (folder / MARKER).write_text(json.dumps({"key": key, "source": source}, indent=2) + "\n")


def marked_key(folder: Path) -> str | None:
    """The source key of a folder irflow wrote; None for a folder without the marker."""
    marker = folder / MARKER
    if not marker.is_file():
        return None
    try:
        return json.loads(marker.read_text())["key"]
    except (ValueError, KeyError, TypeError):
        return ""  # irflow's marker, unreadable: the folder is irflow's, its source unknown


def refuse_unmarked(target: Path) -> None:
    """Raise when ``target`` exists but irflow did not write it: it is not irflow's to
    replace, nor to trust as a copy of the configured source."""
    if target.exists() and marked_key(target) is None:
        raise DownloadError(
            f"{target} exists but was not written by irflow's download (it has no {MARKER}); "
            "irflow does not reuse or delete it. If it holds the dataset, move it to "
            "data_dir/<name> and set data_dir; otherwise remove it, or choose another "
            "download_dir"
        )


def install(folder: Path, target: Path, key: str, source: str) -> Path:
    """Move a complete dataset folder to ``target`` in one step, marked with its source.

    The marker is written into ``folder`` before the move, so ``target`` never exists
    without it. An earlier copy at ``target`` is removed only if irflow wrote it.
    """
    refuse_unmarked(target)
    write_marker(folder, key, source)
    if target.exists():
        log.info("replacing the cache folder %s (another source)", target)
        shutil.rmtree(target)
    os.replace(folder, target)
    return target


# --- downloaded files -------------------------------------------------------------------------


def cached_file_name(url: str, fallback: str) -> str:
    """The cache's name for the file at ``url``: a digest of the whole URL, then the URL path's
    last segment (or ``fallback``), which keeps the suffix (``.gz``, ``.parquet``) readers go by."""
    import httpx  # here: every dry run imports this module (through irflow.data.download)

    last = posixpath.basename(httpx.URL(url).path) or fallback
    return f"{digest(url)[:16]}-{last}"
