"""Download stage: put a dataset on local disk, in BEIR or PosIR layout, verified and unpacked.

A dataset folder is in one of two layouts, told apart by its file names alone:
- BEIR: ``corpus.jsonl[.gz]``, ``queries.jsonl[.gz]`` and ``qrels/<split>.tsv``;
- PosIR (one language/domain folder of PosIR-Benchmark-v1, as its eval.sh reads it):
  ``corpus.parquet``, ``queries.parquet`` and ``qrels/<split>.parquet``.
A folder complete in both is refused rather than guessed at.
``locate_dataset`` looks in the offline data directory, then the cache, and only then fetches
from the configured source (a zip URL with mirrors, a Hugging Face dataset repo, an
ir_datasets id, or a local folder or zip). An ir_datasets dataset is read through ir_datasets,
from its own data folder (``$IR_DATASETS_HOME``), which it fills from the network unless
offline, and written into the cache as a BEIR folder, so it is ingested as any other; each
document's title and text come from its type's own fields (irflow.data.ir_datasets_fields).
Everything lands in place with ``os.replace``, so an interrupted run never leaves a
half-written file or folder where a later run would take it for a finished one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
import shutil
import stat
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path, PureWindowsPath

from irflow.core.config import register_check
from irflow.core.errors import ConfigError, DownloadError
from irflow.core.fingerprint import file_md5
from irflow.core.offline import env_offline
from irflow.core.redaction import public_url
from irflow.data.download_cache import (
    cached_file_name,
    digest,
    install,
    marked_key,
    refuse_unmarked,
)
from irflow.data.ir_datasets_fields import FIELDS_REVISION, document_fields

log = logging.getLogger("irflow.data.download")

# What a dataset zip may unpack to. BEIR's largest zips (msmarco, climate-fever) hold a few
# dozen files and unpack to a few GB; past these a zip is a bomb, or no dataset of this kind.
MAX_ZIP_BYTES = 100 * 2**30
MAX_ZIP_ENTRIES = 100_000

# Written beside the BEIR files of a dataset read through ir_datasets: where they came from.
IR_DATASETS_RECORD = "ir_datasets.json"

# --- dataset layouts --------------------------------------------------------------------------

# Each layout's corpus, queries and qrels files, in that order; each entry lists the names the
# file may have, the first found wins.
LAYOUT_FILES = {
    "beir": (
        ("corpus.jsonl", "corpus.jsonl.gz"),
        ("queries.jsonl", "queries.jsonl.gz"),
        ("qrels/{split}.tsv",),
    ),
    "posir": (("corpus.parquet",), ("queries.parquet",), ("qrels/{split}.parquet",)),
}
LAYOUT_NAMES = {"beir": "BEIR", "posir": "PosIR"}


def _layout_files(folder: Path, layout: str, split: str) -> tuple[list[Path], list[str]]:
    """The files of ``layout`` present in ``folder`` (corpus, queries, qrels) and those missing."""
    found, missing = [], []
    for candidates in LAYOUT_FILES[layout]:
        names = [name.format(split=split) for name in candidates]
        present = [folder / name for name in names if (folder / name).is_file()]
        if present:
            found.append(present[0])
        else:
            missing.append(" or ".join(names))
    return found, missing


def _missing_files(folder: Path, split: str) -> str:
    """What each layout lacks in ``folder``, for an error message."""
    return "; ".join(
        f"{LAYOUT_NAMES[layout]} layout lacks {', '.join(_layout_files(folder, layout, split)[1])}"
        for layout in LAYOUT_FILES
    )


def dataset_layout(folder: Path, split: str) -> str | None:
    """``"beir"`` or ``"posir"``: the layout whose files are all in ``folder``; None if neither.

    A folder complete in both layouts is refused: which files are the dataset would be a guess.
    """
    if not folder.is_dir():
        return None
    complete = [layout for layout in LAYOUT_FILES if not _layout_files(folder, layout, split)[1]]
    if len(complete) > 1:
        files = ", ".join(
            str(path.relative_to(folder))
            for layout in complete
            for path in _layout_files(folder, layout, split)[0]
        )
        raise DownloadError(
            f"{folder} holds a dataset in both BEIR and PosIR layout ({files}); "
            "keep the files of one layout only"
        )
    return complete[0] if complete else None


def dataset_files(folder: Path, split: str) -> list[Path]:
    """The corpus, queries and qrels files of ``folder``, in that order, in its layout."""
    layout = dataset_layout(folder, split)
    if layout is None:
        raise DownloadError(f"{folder} is not a dataset folder: {_missing_files(folder, split)}")
    return _layout_files(folder, layout, split)[0]


def dataset_fingerprint(folder: Path, split: str) -> dict:
    """MD5 of each dataset file, keyed by path relative to ``folder``, and one checksum over all."""
    files = {
        path.relative_to(folder).as_posix(): file_md5(path) for path in dataset_files(folder, split)
    }
    lines = "".join(f"{relpath}:{md5}\n" for relpath, md5 in sorted(files.items()))
    return {"files": files, "checksum": hashlib.md5(lines.encode()).hexdigest()}


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


def _dataset_root(folder: Path, split: str, origin: str) -> Path:
    """``folder`` itself or the top-level folder inside it that is a dataset folder."""
    if dataset_layout(folder, split):
        return folder
    for child in sorted(folder.iterdir()):
        if dataset_layout(child, split):
            return child
    raise DownloadError(f"{origin} is not a dataset folder: {_missing_files(folder, split)}")


def _unpack_into_cache(
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
        return _install(_dataset_root(extracted, split, str(zip_path)), target, key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _placed_folder(name: str, data_dir: Path | None) -> str:
    """Where a user places a dataset folder: data_dir, never the cache, where a folder irflow
    did not write is refused (irflow.data.download_cache)."""
    return f"{data_dir / name}/" if data_dir else f"<folder>/{name}/ and set data_dir: <folder>"


def _without_network(name: str, data_dir: Path | None, split: str, zip_path=None) -> str:
    """How to give a dataset whose download failed without the network: the config keys to
    set and the files to place."""
    folder = _placed_folder(name, data_dir)
    the_zip = f", or place {zip_path.name} at {zip_path}" if zip_path else ""
    return (
        f"to run without the network, place the dataset in BEIR layout (corpus.jsonl[.gz], "
        f"queries.jsonl[.gz], qrels/{split}.tsv) at {folder}{the_zip}, and set offline: true "
        "(or --config offline=true) so that nothing is fetched"
    )


def _from_huggingface(source: dict, target: Path, split: str, hint: str, key: dict) -> Path:
    """The repo's snapshot as a dataset folder in the cache; ``hint`` is added to a failed
    download's message."""
    from huggingface_hub import snapshot_download

    repo_id, revision = source["huggingface"], source.get("revision")
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        try:
            snapshot_download(
                repo_id=repo_id, repo_type="dataset", revision=revision, local_dir=staging
            )
        # The hub raises many types (HTTP, repo not found, offline cache miss); report them all,
        # each in one line, as a job reports a DownloadError (their messages span lines).
        except Exception as exc:
            reason = " ".join(str(exc).split()).rstrip(".")
            raise DownloadError(f"Hugging Face dataset {repo_id}: {reason}; {hint}") from exc
        root = _dataset_root(staging, split, f"Hugging Face dataset {repo_id}")
        return _install(root, target, key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# --- ir_datasets ------------------------------------------------------------------------------


@contextmanager
def _ir_datasets_files(offline: bool, used: dict, missing: list):
    """Record each file ir_datasets reads from its data folder (path -> its published md5)
    and, ``offline``, refuse every download it would start, noting the file it lacks.

    ir_datasets has no offline switch: it fetches whatever its data folder lacks. Its one
    entry point for a file is ``Download.path`` (``Download.stream`` for files it never
    stores), so both are wrapped while a dataset is read, and restored after."""
    from ir_datasets.util.download import Download, LocalDownload

    path, stream = Download.path, Download.stream

    def refuse(download) -> None:
        urls = [getattr(m, "url", None) for m in download.mirrors]
        urls = ", ".join(url for url in urls if url) or "its source"
        place = download._cache_path or "the data folder"
        missing.append(f"{place} (from {urls}, md5 {download.expected_md5})")
        raise DownloadError(f"offline: ir_datasets lacks {missing[-1]}")

    def checked_path(download, force=True):
        cache = download._cache_path
        needs_network = not all(isinstance(m, LocalDownload) for m in download.mirrors)
        if offline and force and needs_network and not (cache and os.path.exists(cache)):
            refuse(download)
        found = path(download, force)
        if cache:
            used[str(cache)] = download.expected_md5
        return found

    def checked_stream(download):
        if offline and download._stream:
            refuse(download)
        return stream(download)

    Download.path, Download.stream = checked_path, checked_stream
    try:
        yield
    finally:
        Download.path, Download.stream = path, stream


def _query_text(query) -> str:
    """A query's ``text``, or its default text when ir_datasets splits it into other fields
    (a TREC topic's title, description and narrative: default_text() is its title)."""
    if "text" in query._fields:
        return query.text or ""
    return query.default_text()


def _write_ir_datasets(dataset, judged, folder: Path, split: str) -> None:
    """The docs, queries and qrels of an ir_datasets dataset as a BEIR folder."""
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as out:
        for doc in dataset.docs_iter():
            title, text = document_fields(doc)
            record = {"_id": doc.doc_id, "title": title, "text": text}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as out:
        for query in dataset.queries_iter():
            record = {"_id": query.query_id, "text": _query_text(query)}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    with open(folder / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for qrel in judged.qrels_iter():
            out.write(f"{qrel.query_id}\t{qrel.doc_id}\t{qrel.relevance}\n")


def ir_datasets_files_checked(used: dict[str, str | None]) -> list[dict]:
    """Each file ir_datasets read (path -> the md5 it publishes for it) with its md5; a file
    whose md5 is not the published one is an error: it is another version of the data, or
    damaged, and ir_datasets itself checks the md5 only while it downloads."""
    files = []
    for path, expected in sorted(used.items()):
        actual = file_md5(Path(path)) if Path(path).is_file() else None
        if expected and actual and actual != expected:
            raise DownloadError(
                f"{path}: md5 {actual}, not the {expected} ir_datasets publishes for it; "
                "remove the file so that ir_datasets downloads it again, or put the published "
                "file in its place"
            )
        files.append({"path": path, "md5": actual, "published_md5": expected})
    return files


def _from_ir_datasets(dataset_id: str, target: Path, split: str, offline: bool, key: dict) -> Path:
    """An ir_datasets dataset written as a BEIR folder into the cache: docs and queries of
    ``dataset_id``, its qrels or, when it has none, those of ``<dataset_id>/<split>`` (as
    ir_datasets splits BEIR's qrels: beir/scifact/test). ``ir_datasets.json`` beside the files
    says which files of ir_datasets' data folder were read and whether each matched the md5
    ir_datasets publishes for it."""
    import ir_datasets

    def load(name: str):
        try:
            return ir_datasets.load(name)
        except KeyError:
            return None

    dataset = load(dataset_id)
    if dataset is None or not (dataset.has_docs() and dataset.has_queries()):
        what = "no dataset" if dataset is None else "no docs and queries in the dataset"
        raise DownloadError(f"ir_datasets has {what} {dataset_id!r}")
    judged = dataset if dataset.has_qrels() else load(f"{dataset_id}/{split}")
    if judged is None or not judged.has_qrels():
        raise DownloadError(
            f"ir_datasets dataset {dataset_id!r} has no qrels, nor has {dataset_id}/{split}"
        )
    used: dict[str, str | None] = {}
    missing: list[str] = []
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        with _ir_datasets_files(offline, used, missing):
            try:
                _write_ir_datasets(dataset, judged, staging / "beir", split)
            # ir_datasets raises many types, and wraps a refused download in RuntimeError.
            except Exception as exc:
                if missing:
                    raise DownloadError(
                        f"ir_datasets dataset {dataset_id!r} is not available offline: place "
                        f"{missing[0]} in ir_datasets' data folder "
                        f"({ir_datasets.util.home_path()})"
                    ) from exc
                reason = " ".join(str(exc).split()) or type(exc).__name__
                raise DownloadError(f"ir_datasets dataset {dataset_id!r}: {reason}") from exc
        provenance = {
            "ir_datasets": dataset_id,
            "qrels_from": dataset_id if judged is dataset else f"{dataset_id}/{split}",
            "version": ir_datasets.__version__,
            "fields_revision": FIELDS_REVISION,
            "home": str(ir_datasets.util.home_path()),
            "files": ir_datasets_files_checked(used),
        }
        (staging / "beir" / IR_DATASETS_RECORD).write_text(json.dumps(provenance, indent=2))
        return _install(staging / "beir", target, key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _download_zip(
    name: str, urls: list[str], zip_path: Path, md5: str | None, retries: int, backoff_s: float
) -> None:
    """Fetch the zip from the first URL (the main one, then each mirror) that delivers it."""
    # Imported here, as httpx (0.1 s) is: every dry run imports this module for its config check.
    from irflow.data.fetch import fetch_url

    failures = []
    for url in urls:
        log.info("dataset %r: downloading %s", name, public_url(url))
        try:
            fetch_url(url, zip_path, md5=md5, retries=retries, backoff_s=backoff_s)
            return
        except DownloadError as exc:
            log.warning("dataset %r: %s", name, exc)
            failures.append(str(exc))
    raise DownloadError(f"dataset {name!r}: every URL failed: " + "; ".join(failures))


def _source_key(source: dict) -> dict:
    """What identifies the content of a fetched ``source``: the cache key of its folder."""
    if "url" in source:
        # The folder only where one is given, so that a whole zip's cache key stays as it was.
        folder = {"folder": source["folder"]} if source.get("folder") else {}
        return {"url": source["url"], "md5": source.get("md5")} | folder
    if "huggingface" in source:
        return {"huggingface": source["huggingface"], "revision": source.get("revision")}
    if "ir_datasets" in source:
        return {"ir_datasets": source["ir_datasets"], "fields_revision": FIELDS_REVISION}
    local = Path(source["path"]).expanduser().resolve()
    found = local.stat()
    return {"zip": str(local), "size": found.st_size, "mtime_ns": found.st_mtime_ns}


def _install(folder: Path, target: Path, key: dict) -> Path:
    """``folder`` into the cache at ``target``, marked with the digest of its source ``key``
    and the key itself as it may be written (a public URL)."""
    public = key | {"url": public_url(key["url"])} if "url" in key else key
    return install(folder, target, digest(key), json.dumps(public, sort_keys=True))


def _cached_copy(target: Path, key: dict, split: str) -> bool:
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


def locate_dataset(
    name: str,
    source: dict,
    *,
    split: str,
    data_dir: Path | None,
    cache_dir: Path,
    offline: bool = False,
    retries: int = 4,
    backoff_s: float = 1.0,
) -> Path:
    """A folder in BEIR or PosIR layout holding dataset ``name``, fetched from ``source`` if
    need be. The cache's copy (``cache_dir/<name>``) is reused only when it was fetched from
    this very source (irflow.data.download_cache)."""
    if data_dir is not None and dataset_layout(data_dir / name, split):
        log.info("dataset %r: using the offline data directory %s", name, data_dir / name)
        return data_dir / name

    if "path" in source:
        local = Path(source["path"]).expanduser()
        if local.is_dir():
            dataset_files(local, split)
            log.info("dataset %r: using the local folder %s", name, local)
            return local
        if not (local.is_file() and local.suffix == ".zip"):
            raise DownloadError(f"dataset {name!r}: {local} is neither a folder nor a .zip file")
    elif not {"url", "huggingface", "ir_datasets"} & set(source):
        raise ConfigError(
            f"dataset {name!r}: source needs one of the keys 'url', 'huggingface', "
            f"'ir_datasets' or 'path' (got {sorted(source)})"
        )
    target, key = cache_dir / name, _source_key(source)
    if _cached_copy(target, key, split):
        log.info("dataset %r: using the cached copy %s", name, target)
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)

    if "path" in source:
        log.info("dataset %r: extracting the local zip %s", name, source["path"])
        return _unpack_into_cache(Path(source["path"]).expanduser(), target, split, key)
    offline = offline or env_offline()
    if "ir_datasets" in source:
        log.info("dataset %r: reading ir_datasets dataset %s", name, source["ir_datasets"])
        return _from_ir_datasets(source["ir_datasets"], target, split, offline, key)
    folder_hint = (
        f"place the BEIR folder at {_placed_folder(name, data_dir)} "
        f"(corpus.jsonl[.gz], queries.jsonl[.gz], qrels/{split}.tsv) or a PosIR folder there "
        f"(corpus.parquet, queries.parquet, qrels/{split}.parquet)"
    )

    if "huggingface" in source:
        if offline:
            raise DownloadError(f"dataset {name!r} is not available offline: {folder_hint}")
        log.info("dataset %r: downloading Hugging Face dataset %s", name, source["huggingface"])
        hint = _without_network(name, data_dir, split)
        return _from_huggingface(source, target, split, hint, key)

    url, md5 = source["url"], source.get("md5")
    zip_name = cached_file_name(url, fallback=f"{name}.zip")
    zip_path = cache_dir / zip_name
    if offline:
        if not zip_path.is_file():
            checksum = f" (md5 {md5})" if md5 else ""
            raise DownloadError(
                f"dataset {name!r} is not available offline: {folder_hint} "
                f"or the zip {zip_name}{checksum} at {zip_path}"
            )
        if md5 is not None and (actual := file_md5(zip_path)) != md5:
            raise DownloadError(f"{zip_path}: checksum mismatch: expected md5 {md5}, got {actual}")
        log.info("dataset %r: offline, extracting the cached zip %s", name, zip_path)
    else:
        urls = [url, *(source.get("mirrors") or [])]
        try:
            _download_zip(name, urls, zip_path, md5, retries, backoff_s)
        except DownloadError as exc:
            hint = _without_network(name, data_dir, split, zip_path)
            raise DownloadError(f"{exc}; {hint}") from exc
    return _unpack_into_cache(zip_path, target, split, key, source.get("folder"))
