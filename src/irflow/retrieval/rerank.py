"""rerank: each query's top-k first-stage candidates rescored by a second model.

Only the k candidates are kept: appending the rest below them would mix two score scales in
one ranking, so they are dropped. Every query's candidates are scored together, in the model's
batches; the first ``latency_queries`` queries are also scored one at a time, as a search
would, and each is timed around the scoring call alone: what a reranker adds to a search.
The scorer is the reranker type's (irflow.retrieval.rerankers; the scorers themselves are
irflow.retrieval.scorers).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from irflow.core.timing import time_each
from irflow.retrieval.rerankers import reranker_type
from irflow.retrieval.runs import trec_order
from irflow.retrieval.scorers import CrossEncoderScorer, Scorer, ScoringJob

# The scorer scripts/expand.py loads for its filter, by this module's name.
__all__ = ["CrossEncoderScorer", "load_scorer", "rerank", "top_candidates"]

log = logging.getLogger(__name__)


def top_candidates(run: pd.DataFrame, k: int) -> pd.DataFrame:
    """Each query's first k documents in trec_eval order, whatever order ``run`` is in."""
    ordered = trec_order(run[["query_id", "doc_id", "score"]])
    return ordered[ordered["rank"] <= k].reset_index(drop=True)


def load_scorer(spec: dict, models: dict, documents: dict[str, str], **job) -> Scorer:
    """The scorer of reranker ``spec`` (a ``rerankers`` entry), its type's
    (irflow.retrieval.rerankers), for a job with ``models`` (the config's) that scores
    ``documents`` (id -> text); ``job``: irflow.retrieval.scorers.ScoringJob's other fields (the
    queries, the vector files a bi-encoder may read, its vector cache, the torch threads)."""
    return reranker_type(spec["type"]).scorer(spec, ScoringJob(models, documents, **job))


def rerank(
    run: pd.DataFrame,
    queries: dict[str, str],
    documents: dict[str, str],
    scorer: Scorer,
    k: int,
    latency_queries: int = 0,
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Rescore each query's top k; returns the new run and, for the first ``latency_queries``
    queries (in the order of ``queries``) scored one at a time, each one's scoring seconds."""
    candidates = top_candidates(run, k)
    for kind, ids, texts in (
        ("query", candidates["query_id"], queries),
        ("document", candidates["doc_id"], documents),
    ):
        missing = sorted(set(ids) - texts.keys())
        if missing:
            raise ValueError(f"{len(missing)} candidate {kind} id(s) without text: {missing[:5]}")
    doc_ids = candidates["doc_id"].to_numpy()
    rows = candidates.groupby("query_id", sort=False).indices
    texts = {
        query_id: [documents[doc_id] for doc_id in doc_ids[at]] for query_id, at in rows.items()
    }
    scores = np.empty(len(candidates), dtype=np.float64)
    for query_id, query_scores in zip(
        rows, scorer.score_queries([queries[q] for q in rows], list(texts.values()))
    ):
        scores[rows[query_id]] = query_scores
    timed = latency_queries_of(queries, rows, scorer, latency_queries)
    if len(timed) < min(latency_queries, len(rows)):
        log.warning(
            "latency: %d of the %d queries asked are timed, those whose encoding the embed "
            "job timed that have candidates (its other timed queries have none)",
            len(timed),
            latency_queries,
        )
    seconds = []
    for query_id in timed:
        # The candidates' representations a search would hold already (document vectors),
        # made before the clock starts; a cross-encoder has none.
        scorer.prepare(texts[query_id])
        seconds += time_each(lambda q: scorer.score(queries[q], texts[q]), [query_id])
    seconds = [s + scorer.encode_seconds_elsewhere(queries[q]) for q, s in zip(timed, seconds)]
    return trec_order(candidates.assign(score=scores)), dict(zip(timed, seconds))


def latency_queries_of(queries: dict[str, str], reranked, scorer: Scorer, count: int) -> list[str]:
    """The first ``count`` queries timed one at a time, in the order of ``queries``: those
    ``reranked`` (with candidates) whose encoding another job timed (a bi-encoder's embed job,
    which times the first queries of the file, some of which may have no candidates), where
    there are any, so that the model is never loaded for a few queries past them (and its
    loading never timed); else the queries reranked."""
    if count == 0:
        return []
    with_candidates = [query_id for query_id in queries if query_id in reranked]
    timed_elsewhere = [
        query_id
        for query_id in with_candidates
        if scorer.encode_seconds_elsewhere(queries[query_id])
    ]
    return (timed_elsewhere or with_candidates)[:count]
