"""kinds: the kinds of dataset made from another (derived datasets), by the config block that
defines them.

Each module of this package defines one kind (``KIND``, a subclass of
irflow.workflow.kinds.base.DerivedKind): the datasets its block defines, what their jobs read,
their place in the list of datasets and in the results tables. The plan
(irflow.workflow.plan) iterates over the registry, never over a list of kinds.
"""

from __future__ import annotations

from irflow.core.config import DERIVED_DATASETS, register_check
from irflow.core.errors import ConfigError
from irflow.core.plugins import Registry
from irflow.workflow.kinds.base import DerivedKind

KINDS: Registry[type[DerivedKind]] = Registry("derived-dataset kind", __name__, "KIND", key="name")


def kinds_in_order() -> list[type[DerivedKind]]:
    """Every kind, in the order their datasets follow the config's own (``order``)."""
    return sorted(KINDS.all().values(), key=lambda kind: kind.order)


def derived_datasets(config: dict) -> list[tuple[DerivedKind, str, dict]]:
    """Every derived dataset the config defines: (its kind, its name, its settings), the kinds
    in order. A kind whose block names an unknown base is left out: its own check says so."""
    found = []
    for kind in kinds_in_order():
        # ``listed`` and ``config_key`` read the config alone (DerivedKind): an instance
        # without a plan answers them.
        unplanned = kind.__new__(kind)
        try:
            listed = unplanned.listed(config)
        except ConfigError:
            continue
        found += [(unplanned, name, spec) for name, spec in listed.items()]
    return found


DERIVED_DATASETS.append(lambda config: [name for _, name, _ in derived_datasets(config)])


@register_check
def _dataset_name_problems(config: dict) -> list[str]:
    """Every dataset's name is its own: a derived one's is neither one of the config's own
    datasets nor another derived one's, of any kind (the later one, in the kinds' order, is
    named)."""
    problems, taken = [], set(config["datasets"])
    for kind, name, spec in derived_datasets(config):
        if name in taken:
            key = kind.config_key(name, spec)
            problems.append(f"config key '{key}': the name is already a dataset's")
        taken.add(name)
    return problems
