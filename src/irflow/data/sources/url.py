"""url: a zip in BEIR layout at an http(s) URL, checked against its MD5 sum, with mirrors
tried in turn; ``folder`` picks one dataset out of a zip of several (cqadupstack/android).
Offline, only the zip already in the cache is unpacked."""

from __future__ import annotations

import logging
from pathlib import Path

from irflow.core.errors import DownloadError
from irflow.core.fingerprint import file_md5
from irflow.core.redaction import public_url
from irflow.core.settings_types import SourceUrl
from irflow.data.download import (
    folder_hint,
    unpack_into_cache,
    without_network,
)
from irflow.data.download_cache import cached_file_name
from irflow.data.sources.base import Fetch, SourceType

log = logging.getLogger("irflow.data.download")


class ZipUrl(SourceType):
    type = "url"
    schema_def = "source_url"
    untyped_key = "url"

    def cache_key(self, spec: dict) -> dict:
        source = SourceUrl.model_validate(spec)
        # The folder only where one is given, so that a whole zip's cache key stays as it was.
        folder = {"folder": source.folder} if source.folder else {}
        return {"url": source.url, "md5": source.md5} | folder

    def locate(self, dataset: str, spec: dict, fetch: Fetch) -> Path:
        target, key, cached = self.cached(dataset, spec, fetch)
        if cached:
            return target
        fetch.cache_dir.mkdir(parents=True, exist_ok=True)
        source = SourceUrl.model_validate(spec)
        url, md5 = source.url, source.md5
        zip_name = cached_file_name(url, fallback=f"{dataset}.zip")
        zip_path = fetch.cache_dir / zip_name
        if fetch.offline:
            if problem := self.offline_problem(dataset, spec, fetch):
                raise DownloadError(problem)
            if md5 is not None and (actual := file_md5(zip_path)) != md5:
                raise DownloadError(
                    f"{zip_path}: checksum mismatch: expected md5 {md5}, got {actual}"
                )
            log.info("dataset %r: offline, extracting the cached zip %s", dataset, zip_path)
        else:
            try:
                mirrors = [mirror.root for mirror in source.mirrors]
                download_zip(dataset, [url, *mirrors], zip_path, md5, fetch)
            except DownloadError as exc:
                hint = without_network(dataset, fetch.data_dir, fetch.split, zip_path)
                raise DownloadError(f"{exc}; {hint}") from exc
        return unpack_into_cache(zip_path, target, fetch.split, key, source.folder)

    def offline_problem(self, dataset: str, spec: dict, fetch: Fetch) -> str | None:
        source = SourceUrl.model_validate(spec)
        zip_name = cached_file_name(source.url, fallback=f"{dataset}.zip")
        zip_path = fetch.cache_dir / zip_name
        if self.cached(dataset, spec, fetch)[2] or zip_path.is_file():
            return None
        checksum = f" (md5 {source.md5})" if source.md5 else ""
        return (
            f"dataset {dataset!r} is not available offline: "
            f"{folder_hint(dataset, fetch.data_dir, fetch.split)} "
            f"or the zip {zip_name}{checksum} at {zip_path}"
        )


def download_zip(
    dataset: str, urls: list[str], zip_path: Path, md5: str | None, fetch: Fetch
) -> None:
    """Fetch the zip from the first URL (the main one, then each mirror) that delivers it."""
    # Imported here, as httpx (0.1 s) is: every dry run imports this module for its config check.
    from irflow.data.fetch import fetch_url

    failures = []
    for url in urls:
        log.info("dataset %r: downloading %s", dataset, public_url(url))
        try:
            fetch_url(url, zip_path, md5=md5, retries=fetch.retries, backoff_s=fetch.backoff_s)
            return
        except DownloadError as exc:
            log.warning("dataset %r: %s", dataset, exc)
            failures.append(str(exc))
    raise DownloadError(f"dataset {dataset!r}: every URL failed: " + "; ".join(failures))


SOURCE = ZipUrl()
