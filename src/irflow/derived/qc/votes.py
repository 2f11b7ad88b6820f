"""votes: candidates pooled from runs, reranked by each voting reranker, and the votes that
pre-label a (query, document) pair."""

from __future__ import annotations

import numpy as np
import pandas as pd

from irflow.core import contracts

RANK_PREFIX = "rank_"


def pool_runs(runs: list[pd.DataFrame], depth: int) -> pd.DataFrame:
    """Each query's documents ranked 1..depth by any of ``runs`` (query_id, doc_id, systems,
    best_rank, score): ``systems`` counts the runs that put it there, and ``score`` orders the
    pool by its best rank (an input for ``irflow.retrieval.rerank.rerank``)."""
    from irflow.retrieval.runs import trec_order

    parts = []
    for run in runs:
        ordered = trec_order(run[["query_id", "doc_id", "score"]])
        parts.append(ordered.loc[ordered["rank"] <= depth, ["query_id", "doc_id", "rank"]])
    if not parts:
        return pd.DataFrame(columns=["query_id", "doc_id", "systems", "best_rank", "score"])
    pooled = (
        pd.concat(parts, ignore_index=True)
        .groupby(["query_id", "doc_id"], sort=True)["rank"]
        .agg(systems="size", best_rank="min")
        .reset_index()
    )
    pooled["score"] = -pooled["best_rank"].astype(np.float64)
    return pooled


def rerank_pool(
    pool: pd.DataFrame, queries: dict[str, str], documents: dict[str, str], scorer
) -> pd.DataFrame:
    """A reranker's ranking of each query's pool (query_id, doc_id, score, rank), scored by
    ``irflow.retrieval.rerank`` as the rerank stage scores."""
    from irflow.retrieval.rerank import rerank

    if pool.empty:
        return pd.DataFrame(columns=contracts.RUN.names)
    depth = int(pool.groupby("query_id").size().max())
    ranked, _ = rerank(pool[["query_id", "doc_id", "score"]], queries, documents, scorer, depth)
    return ranked[contracts.RUN.names]


def candidate_pools(
    runs: list[pd.DataFrame], split_runs: list[pd.DataFrame], depth: int
) -> list[pd.DataFrame]:
    """The pools a reranker ranks: the top ``depth`` of ``runs`` pooled (every system's run,
    for the label audit; the retriever's run of the scored split, for quality control), and
    that of each of ``split_runs`` (another split's, from qc_candidates) on its own, so the
    scored split's queries are scored in the same batches as without them."""
    return [pool_runs(runs, depth)] + [pool_runs([run], depth) for run in split_runs]


def rerank_pools(
    pools: list[pd.DataFrame], queries: dict[str, str], documents: dict[str, str], scorer
) -> pd.DataFrame:
    """``rerank_pool`` of each pool in turn, the rankings together."""
    ranked = [rerank_pool(pool, queries, documents, scorer) for pool in pools if not pool.empty]
    if not ranked:
        return pd.DataFrame(columns=contracts.RUN.names)
    return pd.concat(ranked, ignore_index=True)


def vote_table(
    pairs: pd.DataFrame,
    ranks: dict[str, pd.DataFrame],
    thresholds: dict[str, int],
    needed: int,
) -> pd.DataFrame:
    """``pairs`` (query_id, doc_id, kind) with each reranker's rank (``rank_<name>``, NA when
    the pair is not among its candidates), ``votes`` (rerankers ranking it within the kind's
    threshold), ``needed`` and ``prelabel`` (votes >= needed)."""
    table = pairs.copy()
    unknown = sorted(set(table["kind"]) - set(thresholds))
    if unknown:
        raise ValueError(f"no rank threshold for kind(s) {unknown}; thresholds: {thresholds}")
    limit = table["kind"].map(thresholds).to_numpy()
    votes = np.zeros(len(table), dtype=np.int64)
    for name, ranked in ranks.items():
        column = f"{RANK_PREFIX}{name}"
        lookup = ranked.set_index(["query_id", "doc_id"])["rank"]
        keys = pd.MultiIndex.from_frame(table[["query_id", "doc_id"]])
        table[column] = lookup.reindex(keys).astype("Int32").to_numpy()
        rank = table[column].to_numpy(dtype="float64", na_value=np.nan)
        votes += np.nan_to_num(rank <= limit, nan=0).astype(np.int64)
    table["votes"] = votes
    table["needed"] = needed
    table["prelabel"] = table["votes"] >= needed
    return table
