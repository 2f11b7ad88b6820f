"""label_audit: which judgements does an existing dataset likely miss?

The quality-control machinery (``irflow.derived.qc``) turned on a dataset's own labels, without
generating anything: the top ``depth`` documents of every configured system's run are pooled
per query (as TREC pools), the pooled documents that carry no judgement for the query are
reranked by the ``quality_control.rerankers``, and a document that a majority of them rank
within ``threshold`` of the pool is a candidate. With ``judge: true`` the language model rates
each candidate (``config/prompts/judge.yaml``) and only those judged at least
``relevant_level`` are proposed; without it every candidate is proposed, for a person to check.

Outputs per dataset: every unjudged pooled pair with its votes (``candidates.parquet``), the
proposed judgements as TREC qrels (``qid 0 docid rel``, relevance 1) and the candidates with
their texts as CSV for reviewers, and each system's Hole@k (and nDCG@10) with the dataset's
qrels and with the proposed judgements added: the drop in Hole@k is how much of the top k
the missing judgements account for.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from irflow.core import contracts
from irflow.core.atomic import atomic_path
from irflow.derived.qc.judge import Judge, Judgement
from irflow.derived.qc.votes import RANK_PREFIX, vote_table
from irflow.evaluation.score import score_run

CANDIDATE_COLUMNS = [
    "dataset",
    "query_id",
    "doc_id",
    "systems",
    "best_rank",
    "votes",
    "needed",
    "prelabel",
    "judged",
    "judge_level",
    "judge_explanation",
    "judge_error",
    "proposed",
    "reason",
]
HOLE_COLUMNS = ["dataset", "system", "metric", "queries", "before", "after", "change"]
SUMMARY_COLUMNS = [
    "dataset",
    "queries",
    "judgements",
    "systems",
    "depth",
    "pooled",
    "unjudged",
    "candidates",
    "judged",
    "proposed",
    "proposed_per_query",
    "queries_with_proposed",
    "hole_before",
    "hole_after",
]


def unjudged_pool(pool: pd.DataFrame, qrels: pd.DataFrame) -> pd.DataFrame:
    """The pooled (query, document) pairs that carry no judgement for that query."""
    judged = pd.MultiIndex.from_frame(qrels[["query_id", "doc_id"]])
    keys = pd.MultiIndex.from_frame(pool[["query_id", "doc_id"]])
    return pool[~keys.isin(judged)].reset_index(drop=True)


def audit_candidates(
    dataset: str,
    pool: pd.DataFrame,
    qrels: pd.DataFrame,
    ranks: dict[str, pd.DataFrame],
    threshold: int,
    needed: int,
    *,
    relevant_level: int,
    judge: Judge | None,
    texts: tuple[dict[str, str], dict[str, str]] | None = None,
) -> pd.DataFrame:
    """Every unjudged pooled pair with its reranker ranks and votes; candidates (``prelabel``)
    are judged when a ``judge`` is given (``texts``: queries and documents by id)."""
    unjudged = unjudged_pool(pool, qrels)
    table = vote_table(
        unjudged[["query_id", "doc_id"]].assign(kind="corpus_document"),
        ranks,
        {"corpus_document": threshold},
        needed,
    ).drop(columns="kind")
    table["systems"] = unjudged["systems"].to_numpy()
    table["best_rank"] = unjudged["best_rank"].to_numpy()
    candidates = table.index[table["prelabel"]].tolist()
    judgements: dict[int, Judgement] = {}
    if judge is not None and candidates:
        queries, documents = texts
        pairs = [
            (queries[table.at[i, "query_id"]], documents[table.at[i, "doc_id"]]) for i in candidates
        ]
        judgements = dict(zip(candidates, judge.rate(pairs, desc=f"label audit {dataset}")))
        judge.client.check_dropped()  # a judge that mostly failed must not pass as an audit
    proposed, reasons = [], []
    for row in table.itertuples():
        ranked = f"{row.votes} of {len(ranks)} rerankers rank it within {threshold}"
        if not row.prelabel:
            proposed.append(False)
            reasons.append(f"{ranked} ({row.needed} needed): not a candidate")
            continue
        judgement = judgements.get(row.Index)
        if judgement is None:
            proposed.append(True)
            reasons.append(f"{ranked}: proposed, not judged")
        elif judgement.error is not None:
            proposed.append(False)
            reasons.append(f"{ranked}; the judge gave no usable answer ({judgement.error})")
        else:
            relevant = judgement.level >= relevant_level
            proposed.append(relevant)
            sign = ">=" if relevant else "<"
            verdict = "proposed" if relevant else "not proposed"
            reasons.append(
                f"{ranked}; judged {judgement.level} ({sign} {relevant_level}): {verdict}"
            )
    table["judged"] = [i in judgements for i in table.index]
    table["judge_level"] = pd.array(
        [judgements[i].level if i in judgements else None for i in table.index], dtype="Int32"
    )
    table["judge_explanation"] = [
        judgements[i].explanation if i in judgements else None for i in table.index
    ]
    table["judge_error"] = [judgements[i].error if i in judgements else None for i in table.index]
    table["proposed"] = proposed
    table["reason"] = reasons
    table.insert(0, "dataset", dataset)
    rank_columns = sorted(c for c in table.columns if c.startswith(RANK_PREFIX))
    return table[[*CANDIDATE_COLUMNS[:5], *rank_columns, *CANDIDATE_COLUMNS[5:]]]


def proposed_qrels(candidates: pd.DataFrame) -> pd.DataFrame:
    """The proposed judgements in the qrels contract (relevance 1)."""
    chosen = candidates.loc[candidates["proposed"], ["query_id", "doc_id"]]
    frame = chosen.assign(relevance=1, span_start=None, span_end=None)
    frame = frame.sort_values(["query_id", "doc_id"]).reset_index(drop=True)
    frame["relevance"] = frame["relevance"].astype("int32")
    return frame[contracts.QRELS.names]


def write_trec_qrels(qrels: pd.DataFrame, path: str | Path) -> None:
    """TREC qrels (``qid 0 docid rel``), written atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        handle.writelines(
            f"{query_id} 0 {doc_id} {int(relevance)}\n"
            for query_id, doc_id, relevance in qrels[
                ["query_id", "doc_id", "relevance"]
            ].itertuples(index=False)
        )


def review_table(
    candidates: pd.DataFrame, queries: dict[str, str], corpus: pd.DataFrame
) -> pd.DataFrame:
    """The candidates (pre-labelled pairs) with the query text and document title and text,
    for reviewers (the CSV)."""
    chosen = candidates[candidates["prelabel"]].copy()
    titles = dict(zip(corpus["doc_id"], corpus["title"]))
    bodies = dict(zip(corpus["doc_id"], corpus["text"]))
    chosen.insert(2, "query", chosen["query_id"].map(queries))
    chosen.insert(4, "title", chosen["doc_id"].map(titles))
    chosen.insert(5, "text", chosen["doc_id"].map(bodies))
    return chosen.reset_index(drop=True)


def hole_before_after(
    dataset: str,
    runs: dict[str, pd.DataFrame],
    qrels: pd.DataFrame,
    added: pd.DataFrame,
    k: int,
) -> pd.DataFrame:
    """Each system's mean Hole@k and nDCG@10 with the qrels, and with ``added`` judgements."""
    measures = [f"hole.{k}", "ndcg_cut.10"]
    after_qrels = pd.concat([qrels, added.reindex(columns=qrels.columns)], ignore_index=True)
    rows = []
    for system, run in sorted(runs.items()):
        before = score_run(run, qrels, measures).groupby("metric")["value"].agg(["mean", "size"])
        after = score_run(run, after_qrels, measures).groupby("metric")["value"].mean()
        for metric in (f"hole_{k}", "ndcg_cut_10"):
            rows.append(
                {
                    "dataset": dataset,
                    "system": system,
                    "metric": metric,
                    "queries": int(before.at[metric, "size"]),
                    "before": float(before.at[metric, "mean"]),
                    "after": float(after[metric]),
                }
            )
    frame = pd.DataFrame(rows, columns=HOLE_COLUMNS[:-1])
    frame["change"] = frame["after"] - frame["before"]
    return frame


def summarize(
    dataset: str,
    candidates: pd.DataFrame,
    pool: pd.DataFrame,
    qrels: pd.DataFrame,
    queries: int,
    hole: pd.DataFrame,
    *,
    systems: int,
    depth: int,
    k: int,
) -> dict:
    """One row of the report: how many judgements the dataset likely misses."""
    proposed = candidates[candidates["proposed"]]
    holes = hole[hole["metric"] == f"hole_{k}"]
    return {
        "dataset": dataset,
        "queries": queries,
        "judgements": len(qrels),
        "systems": systems,
        "depth": depth,
        "pooled": len(pool),
        "unjudged": len(candidates),
        "candidates": int(candidates["prelabel"].sum()),
        "judged": int(candidates["judged"].sum()),
        "proposed": len(proposed),
        "proposed_per_query": len(proposed) / queries if queries else np.nan,
        "queries_with_proposed": int(proposed["query_id"].nunique()),
        "hole_before": float(holes["before"].mean()) if len(holes) else np.nan,
        "hole_after": float(holes["after"].mean()) if len(holes) else np.nan,
    }


def summary_table_html(summary: pd.DataFrame) -> str:
    """HTML table of the audit summary, one row per dataset."""
    if summary.empty:
        return "<p>No dataset is audited.</p>"
    columns = {
        "dataset": "dataset",
        "queries": "queries",
        "judgements": "judgements",
        "systems": "systems pooled",
        "depth": "depth",
        "pooled": "pooled pairs",
        "unjudged": "unjudged pooled",
        "candidates": "candidates (majority)",
        "judged": "judged by the LLM",
        "proposed": "proposed judgements",
        "proposed_per_query": "proposed per query",
        "queries_with_proposed": "queries with a proposal",
        "hole_before": "Hole@k before",
        "hole_after": "Hole@k after",
    }
    return (
        summary.sort_values("dataset")[list(columns)]
        .rename(columns=columns)
        .to_html(index=False, float_format="{:.4f}".format, na_rep="–")
    )
