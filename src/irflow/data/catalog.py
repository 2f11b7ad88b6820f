"""catalog: benchmark datasets by name, so that a config says
``source: {type: beir, name: scifact}`` and never writes a URL or an MD5 sum.

The catalog files (``irflow/data/catalogs/<benchmark>.yaml``) hold each dataset's official zip
and MD5 sum, the split the benchmark scores, the ``remove_self_matches`` it applies and the ids
of its mirrors (ir_datasets, Hugging Face), each with where it was read. A config names one
dataset (``source: {type: beir, name: <name>}``), a whole benchmark (``datasets: {beir: all}``),
the datasets of it that anyone can download (``datasets: {beir: public}``) or a list of names;
``resolve_catalog`` turns both into ordinary dataset blocks before the
config is validated, and ``catalog_source`` gives the zip URL and MD5 sum a name stands for
(irflow.data.sources.beir).

CQADupStack is 12 datasets, one per subforum (``cqadupstack-android``, ...), each a folder of
one zip, in the group ``cqadupstack``: the results tables count the group once, as the mean of
its members, as BEIR's Table 2 does. The four datasets BEIR cannot redistribute (BioASQ,
Signal-1M, TREC-NEWS, Robust04) are read from ``data_dir``; a config naming one that is not
there gets how to obtain it, and ``all`` without them in ``data_dir`` is refused, naming them
and ``public``.
"""

from __future__ import annotations

import difflib
import functools
from importlib import resources
from pathlib import Path

import yaml

from irflow.core.errors import ConfigError

BENCHMARKS = ("beir",)
# A catalog dataset's block keys that the user's own block overrides.
DATASET_DEFAULTS = ("remove_self_matches", "group", "in_domain")


@functools.cache
def catalog(benchmark: str) -> dict:
    """The catalog of ``benchmark``, as its YAML file holds it."""
    text = resources.files("irflow.data").joinpath("catalogs", f"{benchmark}.yaml").read_text()
    return yaml.safe_load(text)


def dataset_names(benchmark: str, public: bool = False) -> list[str]:
    """Every dataset of ``benchmark`` in catalog order, CQADupStack as its 12 subforums;
    ``public``: only those the benchmark distributes (a zip anyone can download)."""
    names = []
    for name, entry in catalog(benchmark)["datasets"].items():
        if public and "zip" not in entry:
            continue
        names += [f"{name}-{member}" for member in entry.get("members", [])] or [name]
    return names


def catalog_entry(benchmark: str, name: str) -> dict:
    """What the catalog says of dataset ``name`` (a CQADupStack member: ``cqadupstack-<forum>``):
    ``title``, ``split``, ``source`` (``url``, ``md5`` and ``folder``, or None where the dataset
    must be obtained), ``obtain``, ``remove_self_matches``, ``group``, ``in_domain`` (the
    benchmark's systems were trained on it) and ``mirrors``."""
    book = catalog(benchmark)
    base, member = _base_and_member(benchmark, name)
    entry = book["datasets"][base]
    source = None
    if "zip" in entry:
        source = {"url": f"{book['url_prefix']}/{entry['zip']}", "md5": entry["md5"]}
        if member:
            source["folder"] = f"{base}/{member}"
    mirrors = dict(entry.get("mirrors", {}))
    if member:
        mirrors = {"ir_datasets": f"beir/{base}/{member}", "mteb": f"mteb/{base}-{member}"}
    return {
        "title": f"{entry['title']} {member}" if member else entry["title"],
        "split": entry.get("split", "test"),
        "source": source,
        "obtain": entry.get("obtain"),
        "remove_self_matches": entry.get("remove_self_matches", False),
        "group": base if member else None,
        "in_domain": entry.get("in_domain", False),
        "mirrors": mirrors,
    }


def _base_and_member(benchmark: str, name: str) -> tuple[str, str]:
    """The catalog entry of dataset ``name`` and its member ('' for a dataset of its own)."""
    datasets = catalog(benchmark)["datasets"]
    members = datasets.get(name, {}).get("members")
    if name in datasets and not members:
        return name, ""
    if members:
        raise ConfigError(
            f"{benchmark}'s {name} is {len(members)} datasets, one per subforum "
            f"({name}-{members[0]}, ...): name one, or list {name!r} under 'datasets.{benchmark}' "
            "for all of them"
        )
    base, _, member = name.partition("-")
    if member in datasets.get(base, {}).get("members", []):
        return base, member
    raise _unknown(benchmark, name)


def _unknown(benchmark: str, name: str) -> ConfigError:
    known = dataset_names(benchmark) + ["cqadupstack"]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(
        f"{benchmark} has no dataset {name!r}{hint} Its datasets: {', '.join(known)}"
    )


def resolve_catalog(config: dict) -> dict:
    """``config`` with each benchmark named under ``datasets`` expanded into dataset blocks
    (``source: {type: <benchmark>, name: <name>}``), and each block whose source names a
    catalog dataset given the catalog's split, ``remove_self_matches``, ``group`` and
    ``in_domain`` unless it sets them. The source itself is resolved by its type
    (irflow.data.sources.beir). Shapes it does not know are left to the schema to report."""
    datasets = config.get("datasets")
    if not isinstance(datasets, dict):
        return config
    expanded: dict = {}
    for key, block in datasets.items():
        if key in BENCHMARKS and isinstance(block, str | list):
            for name in _benchmark_selection(key, block, config.get("data_dir")):
                expanded.setdefault(name, {"source": {"type": key, "name": name}})
        else:
            expanded[key] = block
    split = config.get("split", "test")
    for dataset, block in expanded.items():
        source = block.get("source") if isinstance(block, dict) else None
        if not (isinstance(source, dict) and source.get("type") in BENCHMARKS):
            continue
        if not isinstance(name := source.get("name"), str):
            continue
        entry = _entry(source["type"], name, dataset)
        block = {key: entry[key] for key in DATASET_DEFAULTS if entry[key]} | block
        if entry["split"] != split:
            block = {"split": entry["split"]} | block
        expanded[dataset] = block
    return config | {"datasets": expanded}


def catalog_source(benchmark: str, name: str, dataset: str, config: dict) -> dict:
    """The source block that dataset ``name`` of ``benchmark`` stands for, as ``dataset`` of
    ``config``: the catalog's zip URL and MD5 sum (from ``catalog_mirrors`` where the config
    names a mirror), or, for a dataset the benchmark does not distribute, its folder in
    ``data_dir`` (a ConfigError saying how to obtain it when it is not there)."""
    entry = _entry(benchmark, name, dataset)
    data_dir = config.get("data_dir")
    if entry["source"] is None:
        placed = Path(data_dir).expanduser() / dataset if data_dir else None
        if placed is None or not placed.is_dir():
            where = f"at {placed}" if placed else f"in a folder {dataset}/ of data_dir"
            raise ConfigError(
                f"config key 'datasets.{dataset}.source.name': {entry['title']} is not "
                f"distributed with {benchmark}; {entry['obtain']}: {where}"
            )
        return {"type": "path", "path": str(placed)}
    # The keys and defaults of a url source as validated (irflow.data.sources.url), so that
    # the download job's params are those a url source of the same zip has.
    source = {"type": "url", "mirrors": []} | entry["source"]
    mirror = (config.get("catalog_mirrors") or {}).get(benchmark)
    if mirror:
        official = catalog(benchmark)["url_prefix"]
        source["url"] = source["url"].replace(official, mirror.rstrip("/"))
    return source


def _benchmark_selection(benchmark: str, selection: str | list, data_dir: str | None) -> list[str]:
    """The dataset names ``datasets: {<benchmark>: all | public | [names]}`` stands for;
    ``cqadupstack`` stands for its 12 subforums. ``all`` is refused while a dataset the
    benchmark does not distribute is missing from ``data_dir``, naming it and ``public``."""
    if selection == "public":
        return dataset_names(benchmark, public=True)
    if selection == "all":
        _check_obtained(benchmark, data_dir)
        return dataset_names(benchmark)
    if isinstance(selection, str):
        raise ConfigError(
            f"config key 'datasets.{benchmark}': {selection!r} is neither 'all', 'public' nor a "
            f"list of {benchmark} dataset names"
        )
    names = []
    for name in selection:
        members = catalog(benchmark)["datasets"].get(name, {}).get("members")
        names += [f"{name}-{member}" for member in members] if members else [name]
    return names


def _check_obtained(benchmark: str, data_dir: str | None) -> None:
    """Refuse ``all`` while a dataset that must be obtained is not a folder of ``data_dir``."""
    placed = Path(data_dir).expanduser() if data_dir else None
    missing = [
        name
        for name in dataset_names(benchmark)
        if catalog_entry(benchmark, name)["source"] is None
        and not (placed is not None and (placed / name).is_dir())
    ]
    if not missing:
        return
    titles = ", ".join(f"{catalog_entry(benchmark, name)['title']} ({name})" for name in missing)
    where = f"folders of data_dir ({placed})" if placed else "folders of data_dir (unset)"
    public = len(dataset_names(benchmark, public=True))
    raise ConfigError(
        f"config key 'datasets.{benchmark}': 'all' includes {titles}, which {benchmark} does not "
        f"distribute and which are not {where}; write `datasets: {{{benchmark}: public}}` for "
        f"the {public} datasets anyone can download, or obtain them as docs/datasets.md says "
        '("Datasets to obtain yourself") and place each in data_dir'
    )


def _entry(benchmark: str, name: str, dataset: str) -> dict:
    try:
        return catalog_entry(benchmark, name)
    except ConfigError as error:
        raise ConfigError(f"config key 'datasets.{dataset}.source.name': {error}") from None
