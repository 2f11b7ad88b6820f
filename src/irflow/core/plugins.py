"""plugins: what the registries of irflow's pluggable kinds share (retriever families, reranker
types, dataset source types, measures): the modules of a package that each define one, and the
ones installed packages add as entry points."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points

from irflow.core.errors import ConfigError


def defined_in(package: str, path: Iterable[str], attribute: str, key: str = "type") -> dict:
    """Every module of ``package`` (found on its ``__path__``, ``path``) that defines
    ``attribute``, by that object's ``key``."""
    found = {}
    for module in pkgutil.iter_modules(path):
        item = getattr(importlib.import_module(f"{package}.{module.name}"), attribute, None)
        if item is not None:
            found[getattr(item, key)] = item
    return found


def installed_plugins(
    group: str, built_in: dict, kind: str, load: Callable[[EntryPoint], object]
) -> dict:
    """The ``group`` entry points installed packages register, each as ``load`` makes it; a
    name of a built-in ``kind`` is refused, so that no package changes what a config means."""
    found = {}
    for entry_point in entry_points(group=group):
        if entry_point.name in built_in:
            raise ConfigError(
                f"the {group} entry point {entry_point.name!r} ({entry_point.value}) takes the "
                f"name of a built-in {kind}"
            )
        found[entry_point.name] = load(entry_point)
    return found
