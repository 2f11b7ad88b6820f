"""split_search: the config check of the jobs that search a split the workflow's runs do not
cover (a negatives export's, a quality-controlled copy's qc_candidates): only a retriever whose
family opens a searcher can. It stands apart from the family registry
(irflow.workflow.families), which the jobs that search load, so that they do not load the
derived datasets' modules it reads."""

from __future__ import annotations

from irflow.core.config import register_check, scored_split, system_kinds
from irflow.derived.generate.dataset import checked_splits
from irflow.derived.qc.settings import list_quality_controlled
from irflow.workflow.families import families, family


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
    for name, spec in list_quality_controlled(config).items():
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
