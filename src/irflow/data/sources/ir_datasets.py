"""ir_datasets: a dataset read through ir_datasets (``beir/trec-covid``,
``msmarco-passage/trec-dl-2019/judged``), from its own data folder (``$IR_DATASETS_HOME``),
which it fills from the network unless offline, and written into the cache as a BEIR folder,
so it is ingested as any other; each document's title and text come from its type's own fields
(irflow.data.ir_datasets_fields)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from irflow.core.errors import DownloadError
from irflow.core.fingerprint import file_md5
from irflow.core.settings_types import SourceIrDatasets
from irflow.data.download import IR_DATASETS_RECORD, install_folder
from irflow.data.ir_datasets_fields import FIELDS_REVISION, document_fields
from irflow.data.sources.base import Fetch, SourceType

log = logging.getLogger("irflow.data.download")


class IrDatasetsId(SourceType):
    type = "ir_datasets"
    schema_def = "source_ir_datasets"
    untyped_key = "ir_datasets"
    renamed = {"ir_datasets": "id"}

    def cache_key(self, spec: dict) -> dict:
        source = SourceIrDatasets.model_validate(spec)
        return {"ir_datasets": source.id, "fields_revision": FIELDS_REVISION}

    def locate(self, dataset: str, spec: dict, fetch: Fetch) -> Path:
        target, key, cached = self.cached(dataset, spec, fetch)
        if cached:
            return target
        fetch.cache_dir.mkdir(parents=True, exist_ok=True)
        source = SourceIrDatasets.model_validate(spec)
        log.info("dataset %r: reading ir_datasets dataset %s", dataset, source.id)
        return from_ir_datasets(source.id, target, fetch.split, fetch.offline, key)


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


def from_ir_datasets(dataset_id: str, target: Path, split: str, offline: bool, key: dict) -> Path:
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
        return install_folder(staging / "beir", target, key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


SOURCE = IrDatasetsId()
