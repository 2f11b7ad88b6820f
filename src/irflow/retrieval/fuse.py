"""fuse: several runs over the same queries combined into one run.

Reciprocal rank fusion reads only ranks, so runs whose scores live on unrelated scales (BM25
and cosine) combine without calibration. Weighted fusion reads the scores, normalised per run
and per query first so that no run wins merely by having the larger scale. Both order their
inputs and their output with ``trec_order``, so a tie means the same thing everywhere.
"""

from __future__ import annotations

import pandas as pd

from irflow.core.config import missing_key, register_check
from irflow.core.settings_types import Fusion
from irflow.retrieval.runs import trec_order

NORMALIZATIONS = ("minmax", "zscore", "none")


def reciprocal_rank_fusion(
    runs: list[pd.DataFrame], *, k: int = 60, top_k: int = 1000
) -> pd.DataFrame:
    """Cormack et al. (2009): each document scores the sum of 1/(k + rank) over the runs."""
    contributions = []
    for run in runs:
        ranked = trec_order(run[["query_id", "doc_id", "score"]])
        contributions.append(ranked.assign(score=1.0 / (k + ranked["rank"])))
    return _sum_and_rank(contributions, top_k)


def weighted_fusion(
    runs: list[pd.DataFrame],
    weights: list[float],
    *,
    normalization: str = "minmax",
    top_k: int = 1000,
) -> pd.DataFrame:
    """Sum of weight x normalised score; a run that lacks a document adds nothing for it."""
    if len(weights) != len(runs):
        raise ValueError(f"{len(weights)} weights given for {len(runs)} runs")
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"unknown normalization {normalization!r}: use one of {', '.join(NORMALIZATIONS)}"
        )
    contributions = []
    for run, weight in zip(runs, weights):
        run = run[["query_id", "doc_id", "score"]].reset_index(drop=True)  # rows align by index
        contributions.append(run.assign(score=weight * _normalize(run, normalization)))
    return _sum_and_rank(contributions, top_k)


def fuse_runs(runs: list[pd.DataFrame], settings: dict) -> pd.DataFrame:
    """The runs fused as a ``fusion`` entry says (its ``method``): reciprocal rank fusion, or
    weighted fusion with equal weights where none are given. ``settings``, the fuse job's
    params, are the entry and the run's ``top_k``; the entry is typed once, here
    (irflow.core.settings_types.Fusion)."""
    top_k = settings["top_k"]
    fusion = Fusion.model_validate(
        {key: value for key, value in settings.items() if key != "top_k"}
    )
    if fusion.method == "rrf":
        return reciprocal_rank_fusion(runs, k=fusion.k, top_k=top_k)
    weights = fusion.weights or [1.0] * len(runs)
    return weighted_fusion(runs, weights, normalization=fusion.normalization, top_k=top_k)


def _normalize(run: pd.DataFrame, normalization: str) -> pd.Series:
    """Per-query scores rescaled; a query whose scores are all equal gets a constant."""
    scores = run["score"].astype("float64")
    if normalization == "none":
        return scores
    by_query = scores.groupby(run["query_id"])
    if normalization == "minmax":
        low, high = by_query.transform("min"), by_query.transform("max")
        return ((scores - low) / (high - low)).where(high > low, 1.0)
    # Population standard deviation: the scores are the whole list, not a sample of one.
    mean, std = by_query.transform("mean"), by_query.transform("std", ddof=0)
    return ((scores - mean) / std).where(std > 0, 0.0)


def _sum_and_rank(contributions: list[pd.DataFrame], top_k: int) -> pd.DataFrame:
    if not contributions:
        raise ValueError("nothing to fuse: no runs given")
    summed = (
        pd.concat(contributions, ignore_index=True)
        .groupby(["query_id", "doc_id"], as_index=False, sort=False)["score"]
        .sum()
    )
    fused = trec_order(summed)
    return fused[fused["rank"] <= top_k].reset_index(drop=True)


@register_check
def fusion_problems(config: dict) -> list[str]:
    """Each ``fusion`` entry: a name no retriever has, runs of known retrievers and one weight
    per run."""
    problems = []
    for name, fusion in config["fusion"].items():
        if name in config["retrievers"]:
            problems.append(f"config key 'fusion.{name}': the name is already a retriever's")
        for i, run in enumerate(fusion["runs"]):
            if run not in config["retrievers"]:
                problems.append(
                    missing_key(f"fusion.{name}.runs.{i}", run, "retrievers", config["retrievers"])
                )
        weights = fusion["weights"]
        if weights is not None and len(weights) != len(fusion["runs"]):
            problems.append(
                f"config key 'fusion.{name}.weights': {len(weights)} weights for "
                f"{len(fusion['runs'])} runs"
            )
    return problems
