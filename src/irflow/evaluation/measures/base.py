"""What a measure of irflow's own is, and the pytrec_eval calls the measures share."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import pytrec_eval

RELEVANCE_LEVEL = 1  # a document is relevant at grade >= 1, trec_eval's default level

# The run in trec_eval's order (query_id, doc_id, score, rank), the qrels ({query: {doc:
# grade}}) and the cutoffs -> {query_id: {"<name>_<k>": value}} for the queries it scores.
Values = Callable[[pd.DataFrame, dict, list[int]], dict[str, dict[str, float]]]


@dataclass(frozen=True)
class Measure:
    """A measure irflow computes: ``name`` (the spec's, which takes cutoffs), ``values``, and
    how results.md and the report name it: ``title``, the name a paper prints, and
    ``meaning``, what it measures in a line; both with ``{k}`` for the cutoff
    (irflow.evaluation.measures.metric_name)."""

    name: str
    values: Values
    title: str
    meaning: str


def run_dict(run: pd.DataFrame) -> dict[str, dict[str, float]]:
    nested: dict[str, dict[str, float]] = defaultdict(dict)
    for query_id, doc_id, score in run[["query_id", "doc_id", "score"]].itertuples(index=False):
        nested[query_id][doc_id] = float(score)
    return dict(nested)


def pytrec_values(qrels: dict, run: dict, measures: set[str]) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query values of ``measures`` (none for no measure or an empty run)."""
    if not measures or not run:
        return {}
    return pytrec_eval.RelevanceEvaluator(
        qrels, measures, relevance_level=RELEVANCE_LEVEL
    ).evaluate(run)
