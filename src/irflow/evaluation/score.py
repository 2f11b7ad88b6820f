"""score: a run and its qrels -> per-query metric values, named as trec_eval names them.

pytrec_eval computes every measure it knows. irflow adds five that trec_eval lacks, computed
on the same trec_eval ordering (score descending, then doc id descending):

- ``recip_rank_cut_k``: reciprocal rank of the first relevant document within the top k
  (MRR@k), computed by pytrec_eval on the run cut to its top k;
- ``recall_cap_k``: BEIR's capped recall, relevant documents in the top k / min(k, relevant
  documents). BEIR's Table 9: "Scores denote Recall@100. ⋆ shows the capped Recall@100";
  BEIR's own code (``beir.retrieval.custom_metrics.recall_cap``, "R_cap@k") divides by
  ``denominator = min(len(query_relevant_docs), k)``. A query with 500 relevant documents and
  a perfect top 100 has 1.0, where trec_eval's ``recall_100`` has 0.2;
- ``ndcg_exp_cut_k``: nDCG@k with the exponential gain 2^grade − 1 (Burges et al., 2005,
  "Learning to rank using gradient descent"), computed by trec_eval's own ``ndcg_cut``
  (pytrec_eval) on qrels whose grades are mapped to those gains, as ``m_ndcg_cut.c`` says to:
  "Gain values are the relevance values in the qrels file. For now, if you want different
  gains, change the qrels file appropriately." ``ndcg_cut_k``, the default, keeps trec_eval's
  gain, the grade itself, as BEIR and MTEB report it;
- ``judged_k``: share of the top k that carries a judgement for that query (denominator k);
- ``hole_k``: share of the top k that no query of the split judged (BEIR's Hole@k).

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
from irflow.retrieval.runs import trec_order

IRFLOW_MEASURES = ("recip_rank_cut", "recall_cap", "ndcg_exp_cut", "judged", "hole")
RELEVANCE_LEVEL = 1
MIN_GEO_MEAN = 1e-5  # trec_eval's floor for a query's value in a geometric mean


def parse_measures(specs: list[str]) -> tuple[set[str], dict[str, list[int]]]:
    """Split measure specs ("ndcg_cut.10,100") into pytrec_eval's and irflow's own."""
    native, extra = set(), {}
    for spec in specs:
        name, _, cutoffs = spec.partition(".")
        if name in IRFLOW_MEASURES:
            if not cutoffs:
                raise ValueError(f"measure {name!r} needs cutoffs, e.g. {name}.10")
            extra[name] = sorted({int(c) for c in cutoffs.split(",")})
        elif name in pytrec_eval.supported_measures:
            native.add(spec)
        else:
            known = sorted(pytrec_eval.supported_measures | set(IRFLOW_MEASURES))
            raise ValueError(f"unknown measure {name!r}; known measures: {', '.join(known)}")
    return native, extra


def qrels_dict(qrels: pd.DataFrame) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = defaultdict(dict)
    for query_id, doc_id, relevance in qrels[["query_id", "doc_id", "relevance"]].itertuples(
        index=False
    ):
        nested[query_id][doc_id] = int(relevance)
    return dict(nested)


def run_dict(run: pd.DataFrame) -> dict[str, dict[str, float]]:
    nested: dict[str, dict[str, float]] = defaultdict(dict)
    for query_id, doc_id, score in run[["query_id", "doc_id", "score"]].itertuples(index=False):
        nested[query_id][doc_id] = float(score)
    return dict(nested)


def exponential_gains(qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Qrels whose positive grades are their exponential gains, 2^grade − 1 (1 → 1, 2 → 3,
    3 → 7): trec_eval's nDCG, which takes the grade as the gain, then gives Burges et al.'s
    nDCG. Grades of 0 and below keep their value: trec_eval counts no gain for them."""
    return {
        query_id: {doc: 2**grade - 1 if grade > 0 else grade for doc, grade in docs.items()}
        for query_id, docs in qrels.items()
    }


def _pytrec(qrels: dict, run: dict, measures: set[str]) -> dict[str, dict[str, float]]:
    if not measures or not run:
        return {}
    return pytrec_eval.RelevanceEvaluator(
        qrels, measures, relevance_level=RELEVANCE_LEVEL
    ).evaluate(run)


def _irflow_measures(
    ranked: pd.DataFrame, qrels: dict, extra: dict[str, list[int]]
) -> dict[str, dict[str, float]]:
    judged_anywhere = {doc for docs in qrels.values() for doc in docs}
    values: dict[str, dict[str, float]] = defaultdict(dict)
    for query_id, group in ranked.groupby("query_id", sort=False):
        judgements = qrels.get(query_id, {})
        relevant = {doc for doc, grade in judgements.items() if grade >= RELEVANCE_LEVEL}
        docs = group["doc_id"].tolist()
        for k in extra.get("recall_cap", []):
            hits = sum(doc in relevant for doc in docs[:k])
            values[query_id][f"recall_cap_{k}"] = hits / min(k, len(relevant)) if relevant else 0.0
        for k in extra.get("judged", []):
            values[query_id][f"judged_{k}"] = sum(doc in judgements for doc in docs[:k]) / k
        for k in extra.get("hole", []):
            values[query_id][f"hole_{k}"] = sum(doc not in judged_anywhere for doc in docs[:k]) / k
    return values


def score_run(run: pd.DataFrame, qrels: pd.DataFrame, measure_specs: list[str]) -> pd.DataFrame:
    """Per-query values as the ``per_query`` contract (query_id, metric, value)."""
    native, extra = parse_measures(measure_specs)
    qrels_nested = qrels_dict(qrels)
    ranked = trec_order(run[run["query_id"].isin(qrels_nested)][["query_id", "doc_id", "score"]])
    per_query: dict[str, dict[str, float]] = defaultdict(dict)
    for query_id, values in _pytrec(qrels_nested, run_dict(ranked), native).items():
        per_query[query_id].update(values)
    for k in extra.get("recip_rank_cut", []):
        cut = run_dict(ranked[ranked["rank"] <= k])
        for query_id, values in _pytrec(qrels_nested, cut, {"recip_rank"}).items():
            per_query[query_id][f"recip_rank_cut_{k}"] = values["recip_rank"]
    if "ndcg_exp_cut" in extra:
        cutoffs = ",".join(map(str, extra["ndcg_exp_cut"]))
        exponential = _pytrec(
            exponential_gains(qrels_nested), run_dict(ranked), {f"ndcg_cut.{cutoffs}"}
        )
        for query_id, values in exponential.items():
            per_query[query_id].update(
                {f"ndcg_exp_cut_{k}": values[f"ndcg_cut_{k}"] for k in extra["ndcg_exp_cut"]}
            )
    for query_id, values in _irflow_measures(ranked, qrels_nested, extra).items():
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
    probe = _pytrec(qrels, {query_id: {"\0": 0.0}}, native)
    names = set(probe.get(query_id, {}))
    names |= {f"{name}_{k}" for name, cutoffs in extra.items() for k in cutoffs}
    return sorted(names)


@register_check
def _metric_problems(config: dict) -> list[str]:
    """Every metric a table, test or analysis names must be one that ``metrics`` computes:
    otherwise the run fails only at its last stages."""
    try:
        computed = metric_names(config["metrics"])
    except ValueError as exc:
        return [f"config key 'metrics': {exc}"]
    named = [(f"report_metrics.{i}", m) for i, m in enumerate(config["report_metrics"])]
    named += [
        (f"significance.metrics.{i}", m) for i, m in enumerate(config["significance"]["metrics"])
    ]
    named += [
        ("correlation.metric", config["correlation"]["metric"]),
        ("position_analysis.metric", config["position_analysis"]["metric"]),
    ]
    return [
        f"config key '{path}': {metric!r} is not a metric that 'metrics' computes; "
        f"computed: {', '.join(computed)}"
        for path, metric in named
        if metric not in computed
    ]
