"""base: what irflow knows of a dataset source type, the protocol each type implements.

A source type is the ``type`` of a dataset's ``source`` (url, huggingface, ir_datasets, path,
beir). Its one module under irflow.data.sources says everything the config check and the
download job need: its schema fragment, its own config checks, what it is fetched from (the
download job's params), the key its copy is cached under, and how it is fetched, online or
offline.
"""

from __future__ import annotations

import logging
from pathlib import Path

from irflow.data.download import Fetch, cached_copy

log = logging.getLogger("irflow.data.download")


class SourceType:
    """One source type. Class attributes describe it; methods take the dataset's name and its
    ``source`` block (``spec``, with its ``type``): the config's dict, as a type that a package
    installs gets it. A built-in type reads the block through its model generated from the
    schema (irflow.core.settings_types: ``SourceUrl``, ...), typed in the method that receives
    it. ``params`` and ``cache_key``, which are recorded, hold the block's own values, never
    a model's dump."""

    # The ``type`` a source block names.
    type: str
    # Its block's schema: the name of its fragment in config/config.schema.yaml's $defs. A type
    # installed as an ``irflow.sources`` entry point has none there and gives its fragment as
    # ``schema`` (``schema_fragment``).
    schema_def: str | None = None
    schema: dict | None = None
    # How irflow spelled this source before sources had a type: the key that told it apart
    # (``{url: ...}``) and the keys since renamed ({old: new}). The download job's params
    # keep that spelling (``params``), so that results made before are not made again. None
    # for a type that came after.
    untyped_key: str | None = None
    renamed: dict[str, str] = {}

    def schema_fragment(self, schema: dict) -> dict:
        """An installed type's fragment among the source's choices
        (irflow.core.plugins.Registry.with_installed)."""
        return self.schema

    def concrete(self, dataset: str, spec: dict, config: dict) -> dict:
        """The source block this one stands for (a catalog name: its zip URL and MD5 sum)."""
        return spec

    def params(self, spec: dict) -> dict:
        """The download job's params: what the dataset is fetched from. A change reruns the
        download job and everything after it (irflow.workflow.stamps)."""
        if self.untyped_key is None:
            return spec
        old = {new: old for old, new in self.renamed.items()}
        return {old.get(key, key): value for key, value in spec.items() if key != "type"}

    def problems(self, dataset: str, spec: dict, config: dict) -> list[str]:
        """What is wrong with the source of ``dataset`` beyond its schema, each naming its key."""
        return []

    def local_path(self, spec: dict) -> str | None:
        """The user's own folder or zip on this machine that the dataset is read from: the
        download job's input (a folder's dataset files, irflow.workflow.inputs), so that an
        edit reruns the dataset's downstream. None for a source fetched from elsewhere."""
        return None

    def cache_key(self, spec: dict) -> dict:
        """What identifies the content fetched from ``spec``: the key of its cache folder
        (irflow.data.download_cache)."""
        raise NotImplementedError

    def cached(self, dataset: str, spec: dict, fetch: Fetch) -> tuple[Path, dict, bool]:
        """Where this source's copy of ``dataset`` is kept (its folder in the download cache),
        its cache key, and whether a copy made with that key is there."""
        target, key = fetch.cache_dir / dataset, self.cache_key(spec)
        if cached_copy(target, key, fetch.split):
            log.info("dataset %r: using the cached copy %s", dataset, target)
            return target, key, True
        return target, key, False

    def locate(self, dataset: str, spec: dict, fetch: Fetch) -> Path:
        """A dataset folder holding ``dataset``: its own, the cache's copy, or fetched into the
        cache (offline: refused, naming the file to place and where)."""
        raise NotImplementedError

    def offline_problem(self, dataset: str, spec: dict, fetch: Fetch) -> str | None:
        """Why ``locate`` would refuse ``dataset`` offline (``fetch.offline``), as its error
        says it, found before any job runs; None where it would find it, or where this type
        cannot tell without trying (the job then says it)."""
        return None
