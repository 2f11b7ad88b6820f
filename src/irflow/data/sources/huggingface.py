"""huggingface: a Hugging Face dataset repo in BEIR layout (``BeIR/scifact``), at a revision
or its newest; its snapshot is moved into the cache. Offline, only the cache's copy is used."""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from irflow.core.errors import DownloadError
from irflow.core.settings_types import SourceHuggingface
from irflow.data.download import (
    dataset_root,
    folder_hint,
    install_folder,
    without_network,
)
from irflow.data.sources.base import Fetch, SourceType

log = logging.getLogger("irflow.data.download")


class HuggingFaceRepo(SourceType):
    type = "huggingface"
    schema_def = "source_huggingface"
    untyped_key = "huggingface"
    renamed = {"huggingface": "repo"}

    def cache_key(self, spec: dict) -> dict:
        source = SourceHuggingface.model_validate(spec)
        return {"huggingface": source.repo, "revision": source.revision}

    def locate(self, dataset: str, spec: dict, fetch: Fetch) -> Path:
        target, key, cached = self.cached(dataset, spec, fetch)
        if cached:
            return target
        if fetch.offline:
            raise DownloadError(self.offline_problem(dataset, spec, fetch))
        fetch.cache_dir.mkdir(parents=True, exist_ok=True)
        source = SourceHuggingface.model_validate(spec)
        log.info("dataset %r: downloading Hugging Face dataset %s", dataset, source.repo)
        hint = without_network(dataset, fetch.data_dir, fetch.split)
        return snapshot(source, target, fetch.split, hint, key)

    def offline_problem(self, dataset: str, spec: dict, fetch: Fetch) -> str | None:
        if self.cached(dataset, spec, fetch)[2]:
            return None
        return f"dataset {dataset!r} is not available offline: " + folder_hint(
            dataset, fetch.data_dir, fetch.split
        )


def snapshot(source: SourceHuggingface, target: Path, split: str, hint: str, key: dict) -> Path:
    """The repo's snapshot as a dataset folder in the cache; ``hint`` is added to a failed
    download's message."""
    from huggingface_hub import snapshot_download

    repo_id, revision = source.repo, source.revision
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
        root = dataset_root(staging, split, f"Hugging Face dataset {repo_id}")
        return install_folder(root, target, key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


SOURCE = HuggingFaceRepo()
