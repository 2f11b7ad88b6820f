"""families: the retriever families, by the ``type`` a retriever entry names.

Each module of this package defines one family (``FAMILY``, an
irflow.workflow.families.base.RetrieverFamily); installed packages add theirs as
``irflow.retrievers`` entry points (irflow.workflow.families.python.EntryPoint). The rules, the
config check, the memory requests and the cost table ask the registry, never a list of types.
"""

from __future__ import annotations

from irflow.core.config import register_check, scored_split, system_kinds
from irflow.core.plugins import Registry
from irflow.derived.generate.dataset import checked_splits
from irflow.derived.qc.settings import quality_settings
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


def searching() -> list[str]:
    """The types whose family opens a searcher, which retrieves any split's queries."""
    return sorted(name for name, found in families().items() if found.searches)


@register_check
def split_search_problems(config: dict) -> list[str]:
    """A split the workflow's runs do not cover (they are of the scored split) is retrieved in
    the job that needs it, a negatives export's or a QC'd copy's qc_candidates, by the
    retriever's searcher: a system without one cannot."""
    problems = []

    def unsearchable(system: str) -> str | None:
        """The system's kind, where it has no searcher; None where it has one (or is no
        system, which the stage's own check reports)."""
        kind = system_kinds(config).get(system)
        if kind is None or (system in config["retrievers"] and family(kind).searches):
            return None
        return kind

    for name, spec in config["negatives"].items():
        kind = unsearchable(spec["system"])
        if kind and spec["split"] != scored_split(config, spec["dataset"]):
            problems.append(
                f"config key 'negatives.{name}.system': {spec['system']!r} is a {kind} system; "
                f"split {spec['split']!r} is not the scored split, and only a retriever with a "
                f"searcher ({', '.join(searching())}) mines another split"
            )
    generate = config.get("generate", {})
    for name, spec in quality_settings(config)["generated"].items():
        scored = generate.get(spec["dataset"], {}).get("split", "test")
        others = [split for split in checked_splits(spec) if split != scored]
        kind = unsearchable(spec["retriever"])
        if others and kind:
            path = f"quality_control.generated.{name}"
            problems.append(
                f"config key '{path}.retriever': {spec['retriever']!r} is a {kind} retriever, "
                f"which cannot retrieve the queries of split(s) {others} (only a retriever with "
                f"a searcher can: {', '.join(searching())}); name one, or set '{path}.splits' "
                f"to [{scored!r}]"
            )
    return problems


def by_encoder(folder: str) -> RetrieverFamily:
    """The family whose encode step writes results/<folder>/."""
    (found,) = [f for f in families().values() if f.encoder == folder]
    return found
