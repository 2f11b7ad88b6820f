"""measures: the measures irflow computes that trec_eval lacks, one module each.

Each module of this package defines ``MEASURE`` (an irflow.evaluation.measures.base.Measure):
the name a ``metrics`` spec gives it (``name.k1,k2``) and its per-query values, each named
``<name>_<k>``. irflow.evaluation.score asks this registry for every spec pytrec_eval does not
know, so a new measure is its module, its test and its part of docs/metrics.md.
"""

from __future__ import annotations

from functools import cache

from irflow.core.plugins import defined_in
from irflow.evaluation.measures.base import Measure


@cache
def irflow_measures() -> dict[str, Measure]:
    """Every module of this package that defines a MEASURE, by its name."""
    return defined_in(__name__, __path__, "MEASURE", key="name")
