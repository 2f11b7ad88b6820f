"""kinds: the kinds of dataset made from another (derived datasets), by the config block that
defines them.

Each module of this package defines one kind (``KIND``, a subclass of
irflow.workflow.kinds.base.DerivedKind): the datasets its block defines, what their jobs read,
their place in the list of datasets and in the results tables. The plan
(irflow.workflow.plan) iterates over the registry, never over a list of kinds.
"""

from __future__ import annotations

from irflow.core.plugins import Registry
from irflow.workflow.kinds.base import DerivedKind

KINDS: Registry[type[DerivedKind]] = Registry("derived-dataset kind", __name__, "KIND", key="name")


def kinds_in_order() -> list[type[DerivedKind]]:
    """Every kind, in the order their datasets follow the config's own (``order``)."""
    return sorted(KINDS.all().values(), key=lambda kind: kind.order)
