"""recall: how far an approximate search's run is from the exact search's, measured on a seeded
sample of queries, and the search settings that bring it to a target.

faiss' approximate indexes (``irflow.retrieval.index.Searcher``: nprobe, efSearch; searched in
``irflow.retrieval.retrieve``) and late interaction's Voyager index
(``irflow.retrieval.late_interaction``: ef_search, k_token) share the contract: ``recall_queries``
queries drawn with ``recall_seed``, recall@top_k against exact search on them, settings doubled
until ``target_recall`` is met, the manifest's ``recall`` block and a warning below the threshold.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import numpy as np
import pandas as pd

from irflow.core.settings_types import Index, LateInteractionVoyager

log = logging.getLogger(__name__)

# The approximate searches whose recall is measured: their config blocks share the recall keys.
RecallSettings = Index | LateInteractionVoyager

# An approximate index whose run holds less than this share of the exact search's top_k (on
# the sampled queries) is warned about in the retrieve log, unless target_recall is set: then
# the warning is for missing that target.
RECALL_WARNING = 0.95


class Raisable(Protocol):
    """A search whose settings at depth ``k`` can be raised (``raised``) until ``can_widen``
    says they reach the exact search's."""

    def settings(self, k: int) -> dict: ...

    def can_widen(self, k: int) -> bool: ...

    def raised(self, k: int) -> Raisable: ...


def recall_sample(queries: int, spec: RecallSettings) -> np.ndarray:
    """Rows (ascending) of the ``recall_queries`` of ``queries`` queries drawn with
    ``recall_seed``; every query where there are no more."""
    drawn = min(spec.recall_queries, queries)
    return np.sort(np.random.default_rng(spec.recall_seed).choice(queries, drawn, False))


def calibrate(
    searcher: Raisable, k: int, recall_of: Callable[[Raisable], float], target: float | None
) -> tuple[Raisable, list[dict]]:
    """``searcher`` with its settings raised until ``recall_of`` it reaches ``target`` (once,
    without a target), up to the exact search's; and each setting tried, with its recall.
    Doubling (faiss' ``ParameterSpace`` tries the same powers of two) keeps the tries few:
    log2 of the lists at most."""
    tried = []
    while True:
        recall = recall_of(searcher)
        tried.append(searcher.settings(k) | {"recall": recall})
        if target is None or recall >= target or not searcher.can_widen(k):
            return searcher, tried
        searcher = searcher.raised(k)


def measure_recall(
    searcher: Raisable,
    k: int,
    run_of: Callable[[Raisable], pd.DataFrame],
    exact: pd.DataFrame,
    sampled: int,
    spec: RecallSettings,
    *,
    top_k: int,
) -> tuple[Raisable, dict]:
    """An approximate search's recall@top_k against exact search on the sampled queries: the
    share of ``exact``'s (query, document) pairs (the exact run of the ``sampled`` queries) that
    ``run_of(searcher)`` (its run of the sample, cut as the exact one is) also holds. With
    ``target_recall``, the searcher whose settings (``calibrate``) first reach it, or the
    widest. Returns it and the manifest's ``recall`` block; warns below the threshold.

    This is faiss' ``knn_intersection_measure`` ("the intersection measure of two result
    tables": pairs in both over the reference's pairs), of documents rather than index rows."""
    keys = ["query_id", "doc_id"]
    reference = exact[keys]

    def recall_of(some: Raisable) -> float:
        found = reference.merge(run_of(some)[keys], on=keys, how="inner")
        return len(found) / len(reference) if len(reference) else 1.0

    target = spec.target_recall
    searcher, tried = calibrate(searcher, k, recall_of, target)
    recall = tried[-1]["recall"]
    threshold = RECALL_WARNING if target is None else target
    if recall < threshold:
        log.warning(
            "%s index: recall@%d against exact search %.4f on %d sampled queries, below %s %.2f"
            " (settings %s): its run differs from the exact one",
            spec.type, top_k, recall, sampled,
            "the warning threshold" if target is None else "target_recall", threshold,
            tried[-1],
        )  # fmt: skip
    return searcher, {
        "queries": sampled,
        "seed": spec.recall_seed,
        "top_k": top_k,
        "recall": recall,
        "target_recall": target,
        "warning_below": threshold,
        "settings": searcher.settings(k),
        "tried": tried,
    }
