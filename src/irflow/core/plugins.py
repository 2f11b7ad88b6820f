"""plugins: the one registry of irflow's pluggable kinds (retriever families, reranker types,
dataset source types, measures, derived-dataset kinds): the modules of a package that each
define one, the ones installed packages add as entry points, and a look-up by name whose error
names the key and the known names."""

from __future__ import annotations

import copy
import importlib
import pkgutil
from collections.abc import Callable
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from irflow.core.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """The ``kind`` of thing (in words: "reranker type") that each module of ``package``
    defines as its ``attribute`` (by that object's ``key``), and that installed packages add as
    ``group`` entry points, each as ``load`` makes it (the loaded object by default). An
    installed one's schema fragment (its ``schema_fragment(schema)``) goes among the choices at
    ``choices``, the path of a ``oneOf`` list in the config schema."""

    def __init__(
        self,
        kind: str,
        package: str,
        attribute: str,
        *,
        key: str = "type",
        group: str | None = None,
        load: Callable[[EntryPoint], T] = EntryPoint.load,
        choices: tuple[str, ...] = (),
    ):
        self.kind, self.package, self.attribute, self.key = kind, package, attribute, key
        self.group, self.load, self.choices = group, load, choices
        # Read once per process: listing entry points reads every installed package's metadata
        # (40 ms here), and the rules ask for a family per job. A test that installs or removes
        # one empties the cache (``installed.cache_clear()``).
        self.built_in = cache(self.defined)
        self.installed = cache(self.entry_points)

    def defined(self) -> dict[str, T]:
        """Every module of the package (found on its ``__path__`` now) that defines the
        attribute, by its key."""
        found = {}
        for module in pkgutil.iter_modules(importlib.import_module(self.package).__path__):
            defining = importlib.import_module(f"{self.package}.{module.name}")
            item = getattr(defining, self.attribute, None)
            if item is not None:
                found[getattr(item, self.key)] = item
        return found

    def entry_points(self) -> dict[str, T]:
        """The entry points of the group; a name of a built-in one is refused, so that no
        package changes what a config means."""
        found = {}
        for entry_point in entry_points(group=self.group) if self.group else ():
            if entry_point.name in self.built_in():
                raise ConfigError(
                    f"the {self.group} entry point {entry_point.name!r} ({entry_point.value}) "
                    f"takes the name of a built-in {self.kind}"
                )
            found[entry_point.name] = self.load(entry_point)
        return found

    def all(self) -> dict[str, T]:
        """The built-in ones and the installed ones, by name."""
        return self.built_in() | self.installed()

    def get(self, name: str) -> T:
        """The one named ``name`` (a validated config names only known ones)."""
        known = self.all()
        if name not in known:
            raise ConfigError(f"no {self.kind} {name!r}; known: " + ", ".join(sorted(known)))
        return known[name]

    def with_installed(self, schema: dict) -> dict:
        """``schema`` with each installed one's fragment among the choices at ``choices``."""
        plugins = self.installed()
        if not plugins:
            return schema
        schema = copy.deepcopy(schema)
        choices = schema
        for key in self.choices:
            choices = choices[key]
        for name, plugin in sorted(plugins.items()):
            schema["$defs"][f"{self.group}:{name}"] = plugin.schema_fragment(schema)
            choices.append({"$ref": f"#/$defs/{self.group}:{name}"})
        return schema
