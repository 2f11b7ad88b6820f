"""path: a dataset on local disk, a folder in BEIR or PosIR layout (used where it is) or a zip
of one (unpacked into the cache). The config check finds a path that does not exist, and a
folder without the scored split's qrels, before any job runs."""

from __future__ import annotations

import logging
from pathlib import Path

from irflow.core.config import scored_split
from irflow.core.errors import DownloadError
from irflow.core.settings_types import SourcePath
from irflow.data.download import unpack_into_cache
from irflow.data.layouts import dataset_files, dataset_layout, missing_files
from irflow.data.sources.base import Fetch, SourceType

log = logging.getLogger("irflow.data.download")


class LocalPath(SourceType):
    type = "path"
    schema_def = "source_path"
    untyped_key = "path"

    def problems(self, dataset: str, spec: dict, config: dict) -> list[str]:
        path = Path(SourcePath.model_validate(spec).path).expanduser()
        problem = folder_problem(path, scored_split(config, dataset))
        return [f"config key 'datasets.{dataset}.source.path': {problem}"] if problem else []

    def local_path(self, spec: dict) -> str | None:
        return SourcePath.model_validate(spec).path

    def cache_key(self, spec: dict) -> dict:
        local = Path(SourcePath.model_validate(spec).path).expanduser().resolve()
        found = local.stat()
        return {"zip": str(local), "size": found.st_size, "mtime_ns": found.st_mtime_ns}

    def locate(self, dataset: str, spec: dict, fetch: Fetch) -> Path:
        local = Path(SourcePath.model_validate(spec).path).expanduser()
        if local.is_dir():
            dataset_files(local, fetch.split)
            log.info("dataset %r: using the local folder %s", dataset, local)
            return local
        if not (local.is_file() and local.suffix == ".zip"):
            raise DownloadError(f"dataset {dataset!r}: {local} is neither a folder nor a .zip file")
        target, key, cached = self.cached(dataset, spec, fetch)
        if cached:
            return target
        fetch.cache_dir.mkdir(parents=True, exist_ok=True)
        log.info("dataset %r: extracting the local zip %s", dataset, local)
        return unpack_into_cache(local, target, fetch.split, key)


def folder_problem(path: Path, split: str) -> str | None:
    """Why ``path`` is no dataset to read: missing, neither a folder nor a zip, or a folder
    that lacks a file of its layout (the scored split's qrels, say). None when it is one."""
    if path.is_file() and path.suffix == ".zip":
        return None
    if not path.exists():
        return f"{path} does not exist"
    if not path.is_dir():
        return f"{path} is neither a folder nor a .zip file"
    try:
        complete = dataset_layout(path, split)
    except DownloadError as error:  # complete in both layouts
        return str(error)
    if complete is None:
        return f"{path} is not a dataset folder for split {split!r}: {missing_files(path, split)}"
    return None


SOURCE = LocalPath()
