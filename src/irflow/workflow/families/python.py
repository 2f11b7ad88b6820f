"""python: a retriever class written outside irflow (irflow.retrieval.custom.Retriever), named
by ``class: package.module:Class`` (type python) or installed as an ``irflow.retrievers`` entry
point (type: the entry point's name). Its runs are made by the generic rule retrieve_python."""

from __future__ import annotations

from irflow.retrieval.custom import EntryPointClass, NamedClass, class_problem
from irflow.workflow.families.base import RetrieverFamily, SearchJob


class ClassJob(SearchJob):
    """The job of a user's class: built with the entry's ``settings``, given the corpus."""

    def __init__(self, family: PythonClass):
        self.family = family

    def open_searcher(self, files, settings, threads, *, models=None):
        from irflow.retrieval.custom import custom_searcher

        spec = settings["retriever"]
        user_class = self.family.user_class(spec)
        return custom_searcher(user_class(**spec["settings"]), files["corpus"])


class PythonClass(NamedClass, RetrieverFamily):
    """``type: python``: the class is the entry's ``class``."""

    schema_def = "python"

    @property
    def job(self) -> ClassJob:
        return ClassJob(self)

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        """The class must import and implement the protocol: refused now, not in the job."""
        key = f"retrievers.{name}.{self.class_key}"
        problem = class_problem(lambda: self.user_class(spec), self.class_reference(spec))
        return [f"config key '{key}': {problem}"] if problem else []


class EntryPoint(EntryPointClass, PythonClass):
    """``type: <name>``: the class an installed package registers as the ``irflow.retrievers``
    entry point of that name."""


FAMILY = PythonClass()
