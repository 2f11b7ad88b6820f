"""python: a reranker class written outside irflow, named by ``class: package.module:Class``
(type python) or installed as an ``irflow.rerankers`` entry point (type: the entry point's
name). irflow builds it as ``Class(**settings)`` and scores with it wherever a reranker
scores: reranking jobs and quality control's votes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from irflow.retrieval.custom import EntryPointClass, NamedClass, class_problem
from irflow.retrieval.rerankers.base import RerankerType
from irflow.retrieval.scorers import ScoringJob

# Imported once per process: the config check and every job's scorer name the same class.


class Reranker(Protocol):
    """What a user's reranker class implements."""

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        """One score per document text, in order; higher ranks first."""


@dataclass
class ClassScorer:
    """A user's reranker as irflow.retrieval.scorers.Scorer: it scores each query's candidates
    with one ``score`` call, on the CPU unless its instance's ``provenance`` says otherwise."""

    reranker: Reranker
    provenance: dict = field(default_factory=dict)

    def prepare(self, documents: list[str]) -> None:
        """Nothing to hold ahead: the class scores texts as it is given them."""

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        scores = np.asarray(self.reranker.score(query, documents), dtype=np.float64)
        if scores.shape != (len(documents),):
            name = type(self.reranker).__qualname__
            raise ValueError(
                f"{name}.score gave {scores.shape} scores for {len(documents)} documents"
            )
        return scores

    def score_queries(self, queries: list[str], candidates: list[list[str]]) -> list[np.ndarray]:
        return [self.score(query, documents) for query, documents in zip(queries, candidates)]

    def encode_seconds_elsewhere(self, query: str) -> float:
        return 0.0


class PythonClass(NamedClass, RerankerType):
    """``type: python``: the class is the entry's ``class``."""

    schema_def = "python_reranker"

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        """The class must import and have ``score``: refused now, not in the job."""
        problem = class_problem(
            lambda: self.user_class(spec),
            self.class_reference(spec),
            ("score",),
            "irflow's reranker protocol (irflow.retrieval.rerankers.python.Reranker)",
        )
        return [f"config key 'rerankers.{name}.{self.class_key}': {problem}"] if problem else []

    def scorer(self, spec: dict, job: ScoringJob) -> ClassScorer:
        reranker = self.user_class(spec)(**spec["settings"])
        record = {"class": self.class_reference(spec), "device": "cpu"}
        return ClassScorer(reranker, record | getattr(reranker, "provenance", {}))


class EntryPoint(EntryPointClass, PythonClass):
    """``type: <name>``: the class an installed package registers as the ``irflow.rerankers``
    entry point of that name."""


RERANKER = PythonClass()
