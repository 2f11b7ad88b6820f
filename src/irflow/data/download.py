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
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path, PureWindowsPath

import httpx
import tenacity
from tqdm import tqdm

from irflow.core.errors import ConfigError, DownloadError
from irflow.core.fingerprint import file_md5
from irflow.data.ir_datasets_fields import FIELDS_REVISION, document_fields

log = logging.getLogger("irflow.data.download")

MAX_BACKOFF_S = 60
OFFLINE_ENV_VARS = ("HF_HUB_OFFLINE", "IRFLOW_OFFLINE")

# Written beside the BEIR files of a dataset read through ir_datasets: where they came from.
IR_DATASETS_RECORD = "ir_datasets.json"

# Module level so tests can replace the backoff wait with a no-op.
_sleep = time.sleep


class _UnexpectedRange(OSError):
    """The server answered a Range request with another range; retried from the start."""


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


# --- HTTP -------------------------------------------------------------------------------------


def _transfer(client: httpx.Client, url: str, part: Path) -> None:
    """One request, appending to ``part`` when the server honours a Range request."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    with client.stream("GET", url, headers=headers) as response:
        if response.status_code == 416:  # the .part is no prefix of this file: start over
            part.unlink(missing_ok=True)
        response.raise_for_status()
        resuming = offset > 0 and response.status_code == 206
        content_range = response.headers.get("Content-Range", "")
        if resuming and not content_range.startswith(f"bytes {offset}-"):
            part.unlink()
            raise _UnexpectedRange(f"server sent {content_range!r} for bytes={offset}-")
        if resuming:
            log.info("resuming %s at byte %d", url, offset)
        elif offset:
            log.info("%s ignored the Range request; downloading from the start", url)
            offset = 0
        length = response.headers.get("Content-Length")
        with (
            part.open("ab" if resuming else "wb") as out,
            tqdm(
                total=offset + int(length) if length is not None else None,
                initial=offset,
                unit="B",
                unit_scale=True,
                desc=part.name.removesuffix(".part"),
                disable=None if length is not None else True,
            ) as progress,
        ):
            # Each piece as it arrives, so a killed job keeps every byte it received. httpx
            # raises if the body ends short of Content-Length, and the retry resumes.
            for chunk in response.iter_raw():
                out.write(chunk)
                progress.update(len(chunk))


def _worth_retrying(error: BaseException) -> bool:
    """Network failures, server errors and a range the .part made invalid; other client errors
    will not change on retry."""
    if isinstance(error, httpx.HTTPStatusError):
        code = error.response.status_code
        return code >= 500 or code in (408, 416, 429)
    return isinstance(error, (httpx.TransportError, _UnexpectedRange))


def _reason(error: Exception) -> str:
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code} {error.response.reason_phrase}"
    return str(error) or type(error).__name__


def fetch_url(
    url: str,
    dest: Path,
    *,
    md5: str | None = None,
    retries: int = 4,
    backoff_s: float = 1.0,
    timeout_s: float = 60,
) -> Path:
    """Download ``url`` to ``dest``, resuming and retrying; only a verified file reaches dest."""
    if dest.is_file():
        if md5 is None or file_md5(dest) == md5:
            return dest
        log.warning("%s does not match md5 %s; downloading it again", dest, md5)
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(retries + 1),
        wait=tenacity.wait_exponential(multiplier=backoff_s, max=MAX_BACKOFF_S),
        retry=tenacity.retry_if_exception(_worth_retrying),
        sleep=_sleep,
        before_sleep=tenacity.before_sleep_log(log, logging.WARNING),
        reraise=True,
    )
    # identity: the bytes on disk are the file's bytes, so a Range request can resume them.
    client = httpx.Client(
        timeout=timeout_s, follow_redirects=True, headers={"Accept-Encoding": "identity"}
    )
    try:
        with client:
            retrying(_transfer, client, url, part)
    except (httpx.HTTPError, _UnexpectedRange) as exc:
        attempts = retrying.statistics.get("attempt_number", 1)
        tries = f"{attempts} attempts" if attempts > 1 else "1 attempt"
        raise DownloadError(f"{url}: {_reason(exc)} (after {tries})") from exc
    if md5 is not None:
        actual = file_md5(part)
        if actual != md5:
            part.unlink()
            raise DownloadError(f"{url}: checksum mismatch: expected md5 {md5}, got {actual}")
    os.replace(part, dest)
    return dest


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


def safe_extract_zip(zip_path: Path, target: Path) -> Path:
    """Extract ``zip_path`` into the new folder ``target``; refuse members that could escape it."""
    if target.exists():
        raise DownloadError(f"cannot extract {zip_path}: {target} already exists")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(zip_path) as archive:
            for member in archive.infolist():
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


def _env_offline() -> bool:
    return any(
        os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on")
        for var in OFFLINE_ENV_VARS
    )


def _dataset_root(folder: Path, split: str, origin: str) -> Path:
    """``folder`` itself or the top-level folder inside it that is a dataset folder."""
    if dataset_layout(folder, split):
        return folder
    for child in sorted(folder.iterdir()):
        if dataset_layout(child, split):
            return child
    raise DownloadError(f"{origin} is not a dataset folder: {_missing_files(folder, split)}")


def _install(folder: Path, target: Path) -> Path:
    """Move a complete dataset folder into the cache in one step."""
    if target.exists():
        log.warning("replacing the cache folder %s", target)
        shutil.rmtree(target)
    os.replace(folder, target)
    return target


def _unpack_into_cache(zip_path: Path, target: Path, split: str) -> Path:
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        extracted = safe_extract_zip(zip_path, staging / "zip")
        return _install(_dataset_root(extracted, split, str(zip_path)), target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _without_network(name: str, data_dir: Path | None, split: str, zip_path=None) -> str:
    """How to give a dataset whose download failed without the network: the config keys to
    set and the files to place."""
    folder = f"{data_dir / name}/" if data_dir else f"<folder>/{name}/ and set data_dir: <folder>"
    the_zip = f", or place {zip_path.name} at {zip_path}" if zip_path else ""
    return (
        f"to run without the network, place the dataset in BEIR layout (corpus.jsonl[.gz], "
        f"queries.jsonl[.gz], qrels/{split}.tsv) at {folder}{the_zip}, and set offline: true "
        "(or --config offline=true) so that nothing is fetched"
    )


def _from_huggingface(
    repo_id: str, revision: str | None, target: Path, split: str, hint: str
) -> Path:
    """The repo's snapshot as a dataset folder in the cache; ``hint`` is added to a failed
    download's message."""
    from huggingface_hub import snapshot_download

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
        return _install(_dataset_root(staging, split, f"Hugging Face dataset {repo_id}"), target)
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


def _fields_revision(folder: Path) -> int | None:
    """The revision of irflow.data.ir_datasets_fields an ir_datasets copy was written with."""
    record = folder / IR_DATASETS_RECORD
    return json.loads(record.read_text()).get("fields_revision") if record.is_file() else None


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


def _from_ir_datasets(dataset_id: str, target: Path, split: str, offline: bool) -> Path:
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
        files = []
        for path, expected in sorted(used.items()):
            actual = file_md5(Path(path)) if Path(path).is_file() else None
            if expected and actual and actual != expected:
                log.warning(
                    "%s: md5 %s, not the %s ir_datasets publishes for it", path, actual, expected
                )
            files.append({"path": path, "md5": actual, "published_md5": expected})
        provenance = {
            "ir_datasets": dataset_id,
            "qrels_from": dataset_id if judged is dataset else f"{dataset_id}/{split}",
            "version": ir_datasets.__version__,
            "fields_revision": FIELDS_REVISION,
            "home": str(ir_datasets.util.home_path()),
            "files": files,
        }
        (staging / "beir" / IR_DATASETS_RECORD).write_text(json.dumps(provenance, indent=2))
        return _install(staging / "beir", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _download_zip(
    name: str, urls: list[str], zip_path: Path, md5: str | None, retries: int, backoff_s: float
) -> None:
    """Fetch the zip from the first URL (the main one, then each mirror) that delivers it."""
    failures = []
    for url in urls:
        log.info("dataset %r: downloading %s", name, url)
        try:
            fetch_url(url, zip_path, md5=md5, retries=retries, backoff_s=backoff_s)
            return
        except DownloadError as exc:
            log.warning("dataset %r: %s", name, exc)
            failures.append(str(exc))
    raise DownloadError(f"dataset {name!r}: every URL failed: " + "; ".join(failures))


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
    need be."""
    if data_dir is not None and dataset_layout(data_dir / name, split):
        log.info("dataset %r: using the offline data directory %s", name, data_dir / name)
        return data_dir / name
    target = cache_dir / name
    if dataset_layout(target, split):
        if "ir_datasets" not in source or _fields_revision(target) == FIELDS_REVISION:
            log.info("dataset %r: using the cached copy %s", name, target)
            return target
        log.warning(
            "dataset %r: the cached copy %s was written with other document fields (before "
            "revision %d, titles twice); writing it again",
            name,
            target,
            FIELDS_REVISION,
        )
    cache_dir.mkdir(parents=True, exist_ok=True)

    if "path" in source:
        local = Path(source["path"]).expanduser()
        if local.is_dir():
            dataset_files(local, split)
            log.info("dataset %r: using the local folder %s", name, local)
            return local
        if local.is_file() and local.suffix == ".zip":
            log.info("dataset %r: extracting the local zip %s", name, local)
            return _unpack_into_cache(local, target, split)
        raise DownloadError(f"dataset {name!r}: {local} is neither a folder nor a .zip file")

    if not {"url", "huggingface", "ir_datasets"} & set(source):
        raise ConfigError(
            f"dataset {name!r}: source needs one of the keys 'url', 'huggingface', "
            f"'ir_datasets' or 'path' (got {sorted(source)})"
        )
    offline = offline or _env_offline()
    if "ir_datasets" in source:
        log.info("dataset %r: reading ir_datasets dataset %s", name, source["ir_datasets"])
        return _from_ir_datasets(source["ir_datasets"], target, split, offline)
    folder_hint = (
        f"place the BEIR folder at {(data_dir or cache_dir) / name}/ "
        f"(corpus.jsonl[.gz], queries.jsonl[.gz], qrels/{split}.tsv) or a PosIR folder there "
        f"(corpus.parquet, queries.parquet, qrels/{split}.parquet)"
    )

    if "huggingface" in source:
        if offline:
            raise DownloadError(f"dataset {name!r} is not available offline: {folder_hint}")
        log.info("dataset %r: downloading Hugging Face dataset %s", name, source["huggingface"])
        hint = _without_network(name, data_dir, split)
        return _from_huggingface(source["huggingface"], source.get("revision"), target, split, hint)

    url, md5 = source["url"], source.get("md5")
    zip_name = posixpath.basename(httpx.URL(url).path) or f"{name}.zip"
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
    return _unpack_into_cache(zip_path, target, split)
