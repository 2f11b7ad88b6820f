"""config: the workflow's whole configuration check.

irflow.core.config validates against config/config.schema.yaml and checks the cross-references
of the core blocks; each feature registers the checks of its own blocks
(``irflow.core.config.register_check``) when its module is imported. This module imports every
feature that registers one, so that validating through it runs them all: the Snakefile, the
tests and the benchmarks validate here. Retriever families, reranker types and dataset source
types installed as entry points add their entries' schema fragments (each registry's
``with_installed``, irflow.core.plugins.Registry).
"""

import importlib
import pkgutil
from contextlib import contextmanager
from pathlib import Path

import yaml

# Each import registers that feature's checks; every analysis registers its own (analyses()).
import irflow.analyses
import irflow.data.download
import irflow.data.sources
import irflow.derived.expand
import irflow.derived.generate.dataset
import irflow.derived.llm.client
import irflow.derived.negatives
import irflow.derived.qc.settings
import irflow.encoding.onnx_export
import irflow.evaluation.score
import irflow.evaluation.significance
import irflow.evaluation.tables
import irflow.retrieval.fuse
import irflow.retrieval.index
import irflow.workflow.split_search
from irflow.core import config as core
from irflow.core.config import load_schema
from irflow.core.errors import ConfigError, UserError
from irflow.data.catalog import resolve_catalog
from irflow.data.sources import SOURCES, untyped_problems
from irflow.retrieval.rerankers import RERANKERS
from irflow.workflow.families import FAMILIES
from irflow.workflow.kinds import KINDS


def analyses() -> list[str]:
    """Import every module of irflow.analyses, so that each analysis's checks are registered
    without a line here (a module there imports a job's libraries where it uses them)."""
    names = [
        f"irflow.analyses.{module.name}"
        for module in pkgutil.iter_modules(irflow.analyses.__path__)
    ]
    for name in names:
        importlib.import_module(name)
    return names


FAMILIES.built_in()  # imports every family module: each registers its checks
RERANKERS.built_in()  # and every reranker type module
KINDS.built_in()  # and every derived-dataset kind module
analyses()

__all__ = [
    "errors_end_on_the_message",
    "expand_config",
    "load_config",
    "load_schema",
    "validate_config",
]


def expand_config(config: dict) -> dict:
    """irflow.core.config.expand_config (environment variables and ``~``), then the datasets
    named from a benchmark's catalog (irflow.data.catalog) as ordinary dataset blocks. A source
    without a ``type`` is refused first, with the block to write instead."""
    config = core.expand_config(config)
    if problems := untyped_problems(config):
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    return resolve_catalog(config)


def validate_config(config: dict, schema: dict) -> dict:
    """irflow.core.config.validate_config, with the installed retriever families', reranker
    types' and source types' fragments; every mapping's keys in sorted order (``sorted_keys``)."""
    for registry in (FAMILIES, RERANKERS, SOURCES):
        schema = registry.with_installed(schema)
    return sorted_keys(core.validate_config(config, schema))


def sorted_keys(value):
    """``value`` with the keys of every mapping in it sorted, recursively; lists keep their order.

    Snakemake reruns a job whose params changed, comparing each value's ``repr``, and a dict's
    repr follows its key order: every params value is made from this config, so with its keys
    sorted, writing a config's keys in another order reruns nothing (defaults are filled in
    after the keys written, so their place would move too)."""
    if isinstance(value, dict):
        return {key: sorted_keys(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list):
        return [sorted_keys(item) for item in value]
    return value


def load_config(path: str | Path, schema_path: str | Path) -> dict:
    with open(path, encoding="utf-8") as handle:
        config = expand_config(yaml.safe_load(handle) or {})
    return validate_config(config, load_schema(schema_path))


@contextmanager
def errors_end_on_the_message():
    """A user error raised inside the block exits with its message as the last line.
    Snakemake prints an error raised while it reads the Snakefile with the file and line of
    each frame after the message (irflow's and the Snakefile's), which buries the message."""
    try:
        yield
    except UserError as error:
        raise SystemExit(f"{type(error).__name__}: {error}") from None
