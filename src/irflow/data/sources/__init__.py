"""sources: the dataset source types, by the ``type`` a dataset's ``source`` names.

Each module of this package defines one type (``SOURCE``, an irflow.data.sources.base.
SourceType); installed packages add theirs as ``irflow.sources`` entry points, each a
SourceType whose ``schema`` is its block's fragment. The config check, the download job's
params and the download itself ask the registry; the type is never guessed from the keys a
block has.
"""

from __future__ import annotations

import json
from pathlib import Path

from irflow.core.config import register_check, scored_split
from irflow.core.errors import ConfigError
from irflow.core.plugins import Registry
from irflow.data import download
from irflow.data.download import Fetch, SourceParams
from irflow.data.layouts import dataset_layout
from irflow.data.sources.base import SourceType
from irflow.data.sources.path import folder_problem

ENTRY_POINT_GROUP = "irflow.sources"


def loaded_source(entry_point) -> SourceType:
    """An irflow.sources entry point's SourceType, refused unless it is of the entry point's
    type and has its schema fragment."""
    loaded = entry_point.load()
    source = loaded() if isinstance(loaded, type) else loaded
    if source.type != entry_point.name or not isinstance(source.schema, dict):
        raise ConfigError(
            f"the {ENTRY_POINT_GROUP} entry point {entry_point.name!r} ({entry_point.value}) "
            f"must be a SourceType of type {entry_point.name!r} with its schema fragment"
        )
    return source


SOURCES: Registry[SourceType] = Registry(
    "dataset source type",
    __name__,
    "SOURCE",
    group=ENTRY_POINT_GROUP,
    load=loaded_source,
    choices=("$defs", "dataset", "properties", "source", "oneOf"),
)
# The source type a block names (a validated config names only known ones).
source_type = SOURCES.get


# --- the spelling before source types ----------------------------------------------------------


def untyped_problems(config: dict) -> list[str]:
    """Each dataset source without a ``type`` (irflow's spelling before source types), with
    the block to write instead, and each ``split`` written into a source: checked before the
    schema, whose message for a source would list every type's keys."""
    problems = []
    datasets = config.get("datasets")
    for dataset, block in datasets.items() if isinstance(datasets, dict) else ():
        source = block.get("source") if isinstance(block, dict) else None
        if not isinstance(source, dict):
            continue
        key = f"config key 'datasets.{dataset}.source"
        if "split" in source:
            problems.append(
                f"{key}.split': a source has no split; the split scored is the top-level "
                f"`split` (for this dataset alone: `datasets.{dataset}.split`)"
            )
        if "type" not in source:
            problems.append(f"{key}' has no `type`; {_typed_spelling(source)}")
    return problems


def _typed_spelling(source: dict) -> str:
    """The fix for an untyped source: the block with its type, where the keys tell it."""
    for found in SOURCES.built_in().values():
        if found.untyped_key in source:
            typed = {"type": found.type} | {
                found.renamed.get(key, key): value for key, value in source.items()
            }
            return f"write {_flow(typed)} (was {_flow(source)})"
    return "name one of the types: " + ", ".join(sorted(SOURCES.all()))


def _flow(block: dict) -> str:
    """``block`` as YAML's flow style writes it, strings unquoted."""
    values = (v if isinstance(v, str) else json.dumps(v) for v in block.values())
    return "{" + ", ".join(f"{key}: {value}" for key, value in zip(block, values)) + "}"


# --- what the config says and the download job does ------------------------------------------


def concrete_source(config: dict, dataset: str) -> dict:
    """The source block dataset ``dataset`` is fetched from: its own, or the one its catalog
    name stands for."""
    spec = config["datasets"][dataset]["source"]
    return source_type(spec["type"]).concrete(dataset, spec, config)


def download_params(config: dict, dataset: str) -> SourceParams:
    """The download job's params (rules/download.smk): what ``dataset`` is fetched from, in
    sorted keys, as its type gives them, carrying the type and block that fetch it."""
    return bind(concrete_source(config, dataset))


def bind(spec: dict) -> SourceParams:
    """A concrete source block with its type, as irflow.data.download.locate_dataset takes it."""
    found = source_type(spec["type"])
    params = found.params(spec)
    return SourceParams({key: params[key] for key in sorted(params)}, found, spec)


@register_check
def source_problems(config: dict) -> list[str]:
    """Each source's own checks (its type's ``problems``), and each folder of ``data_dir``
    that a dataset would be read from."""
    problems = []
    for dataset, block in config["datasets"].items():
        spec = block["source"]
        problems += source_type(spec["type"]).problems(dataset, spec, config) or (
            data_dir_problems(config, dataset)
        )
    return problems


def data_dir_problems(config: dict, dataset: str) -> list[str]:
    """A folder of the dataset's name in ``data_dir`` is what the dataset is read from: it
    must be a whole dataset folder (before, one without qrels was passed over for the source)."""
    if not config.get("data_dir"):
        return []
    folder = Path(config["data_dir"]).expanduser() / dataset
    problem = folder_problem(folder, scored_split(config, dataset)) if folder.exists() else None
    return [f"config key 'data_dir': {problem}"] if problem else []


def offline_dataset_problems(config: dict, results: Path = Path("results")) -> list[str]:
    """Under ``offline: true``, one line per dataset that its download job could not find
    without the network (neither a folder of ``data_dir``, the download cache's copy nor, for
    a zip, the zip in the cache), each naming the dataset and where to place it, so that the
    dry run refuses it before any job runs. A dataset already found (its
    ``results/datasets/<name>/source.json``) is not looked for again."""
    if not config.get("offline"):
        return []
    data_dir = Path(config["data_dir"]).expanduser() if config.get("data_dir") else None
    problems = []
    for dataset in config["datasets"]:
        split = scored_split(config, dataset)
        if (results / "datasets" / dataset / "source.json").is_file() or (
            data_dir is not None and dataset_layout(data_dir / dataset, split)
        ):
            continue
        spec = concrete_source(config, dataset)
        fetch = Fetch(split, data_dir, Path(config["download_dir"]), offline=True)
        if problem := source_type(spec["type"]).offline_problem(dataset, spec, fetch):
            problems.append(problem)
    return problems


def locate_dataset(name: str, spec: dict, **fetch) -> Path:
    """irflow.data.download.locate_dataset of a concrete source block (``concrete_source``)."""
    return download.locate_dataset(name, bind(spec), **fetch)
