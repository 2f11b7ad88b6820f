"""python: a retriever class written outside irflow (irflow.retrieval.custom.Retriever), named
by ``class: package.module:Class`` (type python) or installed as an ``irflow.retrievers`` entry
point (type: the entry point's name). Its runs are made by the generic rule retrieve_python."""

from __future__ import annotations

from irflow.retrieval.custom import (
    EntryPointClass,
    NamedClass,
    class_problem,
    custom_searcher,
)
from irflow.workflow.families.base import RetrieverFamily


class PythonClass(NamedClass, RetrieverFamily):
    """``type: python``: the class is the entry's ``class``."""

    schema_def = "python"

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        """The class must import and implement the protocol: refused now, not in the job."""
        key = f"retrievers.{name}.{self.class_key}"
        problem = class_problem(lambda: self.user_class(spec), self.class_reference(spec))
        return [f"config key '{key}': {problem}"] if problem else []

    def open_searcher(self, files, settings, threads, *, models=None):
        spec = settings["retriever"]
        return custom_searcher(self.user_class(spec)(**spec["settings"]), files["corpus"])


class EntryPoint(EntryPointClass, PythonClass):
    """``type: <name>``: the class an installed package registers as the ``irflow.retrievers``
    entry point of that name."""


FAMILY = PythonClass()
