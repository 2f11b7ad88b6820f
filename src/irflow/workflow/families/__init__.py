"""families: the retriever families, by the ``type`` a retriever entry names.

Each module of this package defines one family (``FAMILY``, an
irflow.workflow.families.base.RetrieverFamily); installed packages add theirs as
``irflow.retrievers`` entry points (irflow.workflow.families.python.EntryPoint). The rules, the
config check, the memory requests and the cost table ask the registry, never a list of types.
"""

from __future__ import annotations

from irflow.core.config import register_check
from irflow.core.plugins import Registry
from irflow.workflow.families.base import RetrieverFamily
from irflow.workflow.families.python import EntryPoint

FAMILIES: Registry[RetrieverFamily] = Registry(
    "retriever type",
    __name__,
    "FAMILY",
    group="irflow.retrievers",
    load=EntryPoint,
    choices=("properties", "retrievers", "additionalProperties", "oneOf"),
)
families = FAMILIES.all
# The family of a retriever type (a validated config names only known ones).
family = FAMILIES.get


def systems_by_rule(config: dict) -> dict[str, list[str]]:
    """The retrievers each search rule runs (an empty list for a rule that runs none)."""
    by_rule = {f.search_rule: [] for f in FAMILIES.built_in().values()}
    for name, spec in sorted(config["retrievers"].items()):
        by_rule.setdefault(family(spec["type"]).search_rule, []).append(name)
    return by_rule


def systems_with_step(config: dict, step: str) -> list[str]:
    """The retrievers whose family has ``step`` (encode, index, search, import)."""
    return sorted(
        name for name, spec in config["retrievers"].items() if step in family(spec["type"]).steps
    )


def encoders() -> list[str]:
    """The results/ folders encode steps write vectors to, of every family."""
    return sorted({f.encoder for f in families().values() if f.encoder})


def models_by_encoder(config: dict) -> dict[str, list[str]]:
    """Per encoder folder, the models whose vectors it holds."""
    by_folder = {folder: set() for folder in encoders()}
    for spec in config["retrievers"].values():
        found = family(spec["type"])
        if found.encoder:
            by_folder[found.encoder].update(found.models(spec))
    return {folder: sorted(models) for folder, models in by_folder.items()}


@register_check
def retriever_problems(config: dict) -> list[str]:
    """Each retriever's own checks (its family's ``problems``)."""
    return [
        problem
        for name, spec in config["retrievers"].items()
        for problem in family(spec["type"]).problems(name, spec, config)
    ]


def by_encoder(folder: str) -> RetrieverFamily:
    """The family whose encode step writes results/<folder>/."""
    (found,) = [f for f in families().values() if f.encoder == folder]
    return found
