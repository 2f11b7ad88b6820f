"""Download stage: put a dataset on local disk, in BEIR or PosIR layout, verified and unpacked.

This module holds what every source type shares (irflow.data.sources: one module per type):
safe unzipping, the download cache's folders and what to tell a user without the network; the
two layouts a dataset folder may have are in irflow.data.layouts. Everything lands in place
with ``os.replace``, so an interrupted run never leaves a half-written file or folder where a
later run would take it for a finished one.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath

from irflow.core.config import register_check
from irflow.core.errors import DownloadError
from irflow.core.offline import env_offline
from irflow.core.redaction import public_url
from irflow.data.download_cache import (
    digest,
    install,
    marked_key,
    refuse_unmarked,
)

# dataset_files and dataset_fingerprint: imported from here by scripts/download.py, which stays
# as it is (a changed script reruns its rule's jobs).
from irflow.data.layouts import dataset_files as dataset_files
from irflow.data.layouts import dataset_fingerprint as dataset_fingerprint
from irflow.data.layouts import dataset_layout, missing_files

log = logging.getLogger("irflow.data.download")

# What a dataset zip may unpack to. BEIR's largest zips (msmarco, climate-fever) hold a few
# dozen files and unpack to a few GB; past these a zip is a bomb, or no dataset of this kind.
MAX_ZIP_BYTES = 100 * 2**30
MAX_ZIP_ENTRIES = 100_000

# Written beside the BEIR files of a dataset read through ir_datasets: where they came from.
IR_DATASETS_RECORD = "ir_datasets.json"

# --- zip --------------------------------------------------------------------------------------


def _unsafe_reason(member: zipfile.ZipInfo) -> str | None:
    if stat.S_ISLNK(member.external_attr >> 16):
        return "symlinks are not extracted"
    name = member.filename.replace("\\", "/")
    if PureWindowsPath(member.filename).drive or name.startswith("/"):
        return "absolute path"
    normalised = posixpath.normpath(name)
    if normalised == ".." or normalised.startswith("../"):
        return "path escapes the target folder"
    return None


def _check_size(zip_path: Path, members: list[zipfile.ZipInfo]) -> None:
    """Refuse a zip of more than MAX_ZIP_ENTRIES members or MAX_ZIP_BYTES unpacked. The sizes
    its directory declares bound what is written: zipfile reads each member only up to its
    declared file_size, and checks its CRC there."""
    if len(members) > MAX_ZIP_ENTRIES:
        raise DownloadError(
            f"{zip_path}: {len(members)} members, more than the {MAX_ZIP_ENTRIES} a dataset zip "
            "may hold (irflow.data.download.MAX_ZIP_ENTRIES)"
        )
    unpacked = sum(member.file_size for member in members)
    if unpacked > MAX_ZIP_BYTES:
        raise DownloadError(
            f"{zip_path}: unpacks to {unpacked} bytes, more than the {MAX_ZIP_BYTES} a dataset "
            "zip may (irflow.data.download.MAX_ZIP_BYTES)"
        )


def safe_extract_zip(zip_path: Path, target: Path) -> Path:
    """Extract ``zip_path`` into the new folder ``target``; refuse members that could escape it."""
    if target.exists():
        raise DownloadError(f"cannot extract {zip_path}: {target} already exists")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(zip_path) as archive:
            members = archive.infolist()
            _check_size(zip_path, members)
            for member in members:
                if reason := _unsafe_reason(member):
                    raise DownloadError(
                        f"{zip_path}: refusing member {member.filename!r} ({reason})"
                    )
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
            try:
                archive.extractall(staging)
                os.replace(staging, target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    except (zipfile.BadZipFile, EOFError) as exc:
        raise DownloadError(f"{zip_path}: not a valid zip archive ({exc})") from exc
    return target


# --- locating a dataset -----------------------------------------------------------------------


@dataclass(frozen=True)
class Fetch:
    """Where and how a download job finds a dataset: the scored ``split``, the offline data
    directory, the download cache, offline or not, and how often a failed request is retried."""

    split: str
    data_dir: Path | None
    cache_dir: Path
    offline: bool = False
    retries: int = 4
    backoff_s: float = 1.0


class SourceParams(dict):
    """The download job's params (rules/download.smk, irflow.data.sources.download_params):
    what a dataset is fetched from. As a dict it holds the keys irflow wrote before sources had
    a type (``{url: ..., md5: ...}``), so that the job's settings stamp and Snakemake's record
    of its params (the dict's JSON and repr) stay those of the same data and nothing is made
    again; it carries the source type and its typed block, which fetch the dataset."""

    def __init__(self, params: dict, source_type, spec: dict):
        super().__init__(params)
        self.source_type, self.spec = source_type, spec

    def locate(self, name: str, fetch: Fetch) -> Path:
        return self.source_type.locate(name, self.spec, fetch)


def locate_dataset(
    name: str,
    source: SourceParams,
    *,
    split: str,
    data_dir: Path | None,
    cache_dir: Path,
    offline: bool = False,
    retries: int = 4,
    backoff_s: float = 1.0,
) -> Path:
    """A folder in BEIR or PosIR layout holding dataset ``name``: its folder in ``data_dir``,
    else what its ``source`` gives (each type: a module of irflow.data.sources). The cache's
    copy (``cache_dir/<name>``) is reused only when it was fetched from this very source
    (irflow.data.download_cache)."""
    if data_dir is not None and dataset_layout(data_dir / name, split):
        log.info("dataset %r: using the offline data directory %s", name, data_dir / name)
        return data_dir / name
    fetch = Fetch(split, data_dir, cache_dir, offline or env_offline(), retries, backoff_s)
    return source.locate(name, fetch)


def dataset_root(folder: Path, split: str, origin: str) -> Path:
    """``folder`` itself or the top-level folder inside it that is a dataset folder."""
    if dataset_layout(folder, split):
        return folder
    for child in sorted(folder.iterdir()):
        if dataset_layout(child, split):
            return child
    raise DownloadError(f"{origin} is not a dataset folder: {missing_files(folder, split)}")


def unpack_into_cache(
    zip_path: Path, target: Path, split: str, key: dict, folder: str | None = None
) -> Path:
    """The dataset in ``zip_path`` (in its ``folder``, for a zip of several) into the cache."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        extracted = safe_extract_zip(zip_path, staging / "zip")
        if folder is not None:
            extracted = extracted / folder
            if not extracted.is_dir():
                raise DownloadError(f"{zip_path} has no folder {folder}")
        return install_folder(dataset_root(extracted, split, str(zip_path)), target, key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def placed_folder(name: str, data_dir: Path | None) -> str:
    """Where a user places a dataset folder: data_dir, never the cache, where a folder irflow
    did not write is refused (irflow.data.download_cache)."""
    return f"{data_dir / name}/" if data_dir else f"<folder>/{name}/ and set data_dir: <folder>"


def without_network(name: str, data_dir: Path | None, split: str, zip_path=None) -> str:
    """How to give a dataset whose download failed without the network: the config keys to
    set and the files to place."""
    folder = placed_folder(name, data_dir)
    the_zip = f", or place {zip_path.name} at {zip_path}" if zip_path else ""
    return (
        f"to run without the network, place the dataset in BEIR layout (corpus.jsonl[.gz], "
        f"queries.jsonl[.gz], qrels/{split}.tsv) at {folder}{the_zip}, and set offline: true "
        "(or --config offline=true) so that nothing is fetched"
    )


def folder_hint(name: str, data_dir: Path | None, split: str) -> str:
    """Where to place a BEIR dataset (a zip's, a Hugging Face repo's) that is not available
    offline."""
    return (
        f"place the BEIR folder at {placed_folder(name, data_dir)} "
        f"(corpus.jsonl[.gz], queries.jsonl[.gz], qrels/{split}.tsv)"
    )


def install_folder(folder: Path, target: Path, key: dict) -> Path:
    """``folder`` into the cache at ``target``, marked with the digest of its source ``key``
    and the key itself as it may be written (a public URL)."""
    public = key | {"url": public_url(key["url"])} if "url" in key else key
    return install(folder, target, digest(key), json.dumps(public, sort_keys=True))


def cached_copy(target: Path, key: dict, split: str) -> bool:
    """Whether ``target`` is a complete copy of the source ``key`` names. A folder irflow did
    not write is refused rather than trusted or replaced."""
    refuse_unmarked(target)
    written_from = marked_key(target)
    if written_from is None:
        return False
    if written_from != digest(key):
        log.info("the cached copy %s is of another source; fetching it again", target)
        return False
    return dataset_layout(target, split) is not None


@register_check
def _cache_problems(config: dict) -> list[str]:
    """download_dir must not be data_dir: the cache's folders are replaced when their source
    changes, and data_dir holds the user's own."""
    data_dir, download_dir = config.get("data_dir"), config.get("download_dir")
    if not (data_dir and download_dir):
        return []

    def place(path: str) -> str:
        return os.path.abspath(os.path.expanduser(os.path.expandvars(path)))

    if place(data_dir) != place(download_dir):
        return []
    return [
        f"config keys 'download_dir' and 'data_dir' name the same folder ({data_dir!r}); "
        "give download_dir a folder of its own (default results/downloads)"
    ]
