"""score: a run and its qrels -> per-query metric values, named as trec_eval names them.

pytrec_eval computes every measure it knows. irflow adds those that trec_eval lacks, one module
each in irflow.evaluation.measures (``recip_rank_cut``, ``recall_cap``, ``ndcg_exp_cut``,
``judged``, ``hole``: each module says what it computes and whose definition it follows), all on
the same trec_eval ordering (score descending, then doc id descending).

Every query with a judgement in the split is scored. A query the run has no results for gets
what ``trec_eval -c`` counts for it: 0 for every measure, except ``num_q`` (1), ``num_rel`` (its
relevant documents) and the geometric means. Relevant means a grade >= 1 (trec_eval's default
level).

Values are per query as pytrec_eval gives them. For ``gm_map`` and ``gm_bpref`` that is the
natural log of the query's value, floored at log(1e-5) as trec_eval does; the summary turns them
into a geometric mean (``irflow.evaluation.aggregate``), and sums the ``num_*`` counts.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pandas as pd
import pytrec_eval

from irflow.core.config import register_check
from irflow.core.settings_types import Correlation, Significance
from irflow.evaluation.measures import MEASURES
from irflow.evaluation.measures.base import RELEVANCE_LEVEL, pytrec_values, run_dict
from irflow.retrieval.runs import trec_order

MIN_GEO_MEAN = 1e-5  # trec_eval's floor for a query's value in a geometric mean


def parse_measures(specs: list[str]) -> tuple[set[str], dict[str, list[int]]]:
    """Split measure specs ("ndcg_cut.10,100") into pytrec_eval's and irflow's own."""
    native, extra = set(), {}
    for spec in specs:
        name, _, cutoffs = spec.partition(".")
        if name in MEASURES.all():
            if not cutoffs:
                raise ValueError(f"measure {name!r} needs cutoffs, e.g. {name}.10")
            extra[name] = sorted({int(c) for c in cutoffs.split(",")})
        elif name in pytrec_eval.supported_measures:
            native.add(spec)
        else:
            known = sorted(pytrec_eval.supported_measures | set(MEASURES.all()))
            raise ValueError(f"unknown measure {name!r}; known measures: {', '.join(known)}")
    return native, extra


def qrels_dict(qrels: pd.DataFrame) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = defaultdict(dict)
    for query_id, doc_id, relevance in qrels[["query_id", "doc_id", "relevance"]].itertuples(
        index=False
    ):
        nested[query_id][doc_id] = int(relevance)
    return dict(nested)


def score_run(run: pd.DataFrame, qrels: pd.DataFrame, measure_specs: list[str]) -> pd.DataFrame:
    """Per-query values as the ``per_query`` contract (query_id, metric, value)."""
    native, extra = parse_measures(measure_specs)
    qrels_nested = qrels_dict(qrels)
    ranked = trec_order(run[run["query_id"].isin(qrels_nested)][["query_id", "doc_id", "score"]])
    per_query: dict[str, dict[str, float]] = defaultdict(dict)
    for query_id, values in pytrec_values(qrels_nested, run_dict(ranked), native).items():
        per_query[query_id].update(values)
    for name, cutoffs in extra.items():
        measured = MEASURES.all()[name].values(ranked, qrels_nested, cutoffs)
        for query_id, values in measured.items():
            per_query[query_id].update(values)

    metric_names = sorted({name for values in per_query.values() for name in values})
    metric_names = metric_names or _metric_names(qrels_nested, native, extra)
    rows = []
    for query_id in sorted(qrels_nested):
        values = per_query.get(query_id) or _without_results(qrels_nested[query_id], metric_names)
        rows += [(query_id, metric, values[metric]) for metric in metric_names]
    return pd.DataFrame(rows, columns=["query_id", "metric", "value"])


def _without_results(judgements: dict[str, int], metric_names: list[str]) -> dict[str, float]:
    """The values ``trec_eval -c`` counts for a judged query the run has no results for."""
    relevant = sum(grade >= RELEVANCE_LEVEL for grade in judgements.values())
    counted = {"num_q": 1.0, "num_rel": float(relevant)}
    return {
        metric: math.log(MIN_GEO_MEAN) if metric.startswith("gm_") else counted.get(metric, 0.0)
        for metric in metric_names
    }


def metric_names(specs: list[str]) -> list[str]:
    """The per-query metric names (``ndcg_cut_10``, ``hole_100``, ...) that measure ``specs``
    make; ``ValueError`` for a spec neither pytrec_eval nor irflow knows."""
    return _metric_names({"q": {"d": 1}}, *parse_measures(specs))


def _metric_names(qrels: dict, native: set[str], extra: dict[str, list[int]]) -> list[str]:
    """Metric names when the run is empty: ask pytrec_eval with a one-document run."""
    query_id = next(iter(qrels))
    probe = pytrec_values(qrels, {query_id: {"\0": 0.0}}, native)
    names = set(probe.get(query_id, {}))
    names |= {f"{name}_{k}" for name, cutoffs in extra.items() for k in cutoffs}
    return sorted(names)


@register_check
def _metric_problems(config: dict) -> list[str]:
    """Every metric a table or test names must be one that ``metrics`` computes: otherwise the
    run fails only at its last stages (an analysis checks the metrics it names itself, with
    ``uncomputed_metrics``)."""
    try:
        metric_names(config["metrics"])
    except ValueError as exc:
        return [f"config key 'metrics': {exc}"]
    significance = Significance.model_validate(config["significance"])
    correlation = Correlation.model_validate(config["correlation"])
    named = [(f"report_metrics.{i}", m) for i, m in enumerate(config["report_metrics"])]
    named += [(f"significance.metrics.{i}", m) for i, m in enumerate(significance.metrics)]
    named += [("correlation.metric", correlation.metric)]
    return uncomputed_metrics(config, named)


def uncomputed_metrics(config: dict, named: list[tuple[str, str]]) -> list[str]:
    """Each (config key, metric) of ``named`` whose metric ``metrics`` does not compute, as a
    problem naming the key (none when ``metrics`` itself is wrong: its check says so)."""
    try:
        computed = metric_names(config["metrics"])
    except ValueError:
        return []
    return [
        f"config key '{path}': {metric!r} is not a metric that 'metrics' computes; "
        f"computed: {', '.join(computed)}"
        for path, metric in named
        if metric not in computed
    ]
