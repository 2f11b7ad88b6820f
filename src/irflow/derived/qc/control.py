"""qc: quality control of a generated benchmark, after AIR-Bench (Chen et al., 2024, §2.4 and
App. A.3), and the machinery it shares with the label audit (``irflow.derived.label_audit``).

Two questions about every generated query:

- *Is the query any good?* A language model (the judge) rates its positive, the document it
  was written from, on a four-level scale (``config/prompts/judge.yaml``, AIR-Bench's
  Table 8). A positive judged below ``relevant_level`` means the query does not match its own
  document: the query is dropped.
- *Are its labels right?* The query's candidates (the top ``depth`` of a configured
  retriever's run, AIR-Bench: 1000 from an embedding model) are reranked by several rerankers
  (``rerankers.<name>``, cross-encoders or bi-encoders, scored by ``irflow.retrieval.rerank``). Each
  reranker votes for a document it ranks within a threshold: ``generated_negative`` documents
  (the query's own generated hard negatives) within 20, ``corpus_document`` (unlabelled) ones
  within 10, by default. ``majority`` votes (by default more than half the rerankers) make a
  pre-label; the judge then rates each pre-labelled document and AIR-Bench's Table 2 decides:

  ==================  =======================================  ==========================
  kind                judged relevant                          judged not relevant
  ==================  =======================================  ==========================
  positive            keep                                     drop_query
  generated_negative  remove_document (or promote, by config)  keep
  corpus_document     add_positive                             keep
  ==================  =======================================  ==========================

  A generated negative without a pre-label is kept unjudged (the rerankers agree it is not
  relevant); an unlabelled document without one is not in the audit at all.

Decisions:
- Every decision is one audit row: query, document, kind, each reranker's rank, the votes and
  how many were needed, the pre-label, the judge's level and explanation (or why there is
  none), the action and its reason in words.
- Positives are judged first; the other documents only for the queries that survive, so a
  dropped query costs no more requests. Their rows say ``not_judged`` with the reason.
- A judgement the client had to drop (``irflow.derived.llm``: HTTP failures that outlived the
  retries, answers still unusable after the re-asks) changes nothing: the row says ``keep`` and why,
  the manifest counts it, and the next run asks again (HTTP failures are not cached). More than
  ``llm.max_dropped_share`` of the judgements dropped fails the job (``LLMError``), so a
  dataset whose queries went unchecked never passes as quality-controlled.
- The QC'd dataset is a new dataset in the ordinary contract (``quality_control.generated``
  names it), built from the generated one's tables: dropped queries and their qrels removed,
  removed documents gone from the corpus and the qrels, promoted negatives and added positives
  at relevance 1. The generated dataset itself stays as it was, so both are evaluated.
- A generated negative removed because it answers its own query is gone for every query: a
  row that would add it as another query's positive says ``remove_document`` and why.
- The judge is asked at ``judge.temperature`` (default 0) with the ``llm`` block's other
  settings and cache: a rerun asks nothing.
- Splits: every split the generation wrote (``dev`` and ``test``; or the configured
  ``splits``, which must hold the scored one) is checked, all in one pass, each audit row
  naming its query's split; the statistics count each split on its own (``by_split``) and the
  QC'd dataset has each checked split's judgements (``Controlled.split_qrels``). A query of a
  split left out is left out of the QC'd dataset, its labels unchecked. Candidates come from
  the votes. The workflow's retriever runs only the scored split's queries, so the queries of
  another checked split are retrieved by the qc_candidates job, with the same retriever (BM25,
  or dense: its model encodes them and its index is searched), on the same filtered corpus and
  to the same ``depth`` (``irflow.retrieval.retrieve.retrieve_judged``, as the negatives stage
  retrieves another split). A query the rerankers did not rank (no candidate retrieved) has only its
  positive and its own negatives in the audit, its split's ``queries_with_candidates`` counts
  the others, and the log warns.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from irflow.core import contracts
from irflow.core.errors import InputError
from irflow.core.settings_types import Thresholds
from irflow.derived.qc.judge import Judge, Judgement
from irflow.derived.qc.settings import majority_needed
from irflow.derived.qc.votes import RANK_PREFIX, vote_table

log = logging.getLogger(__name__)


KINDS = ("positive", "generated_negative", "corpus_document")
ACTIONS = (
    "keep",
    "drop_query",
    "remove_document",
    "promote",
    "add_positive",
    "not_judged",
)
AUDIT_COLUMNS = [
    "dataset",
    "split",
    "query_id",
    "doc_id",
    "kind",
    "votes",
    "needed",
    "prelabel",
    "judged",
    "judge_level",
    "judge_explanation",
    "judge_error",
    "action",
    "reason",
]


# --- decisions (AIR-Bench's Table 2) ----------------------------------------------------------


def decide(
    kind: str,
    prelabel: bool,
    judgement: Judgement | None,
    relevant_level: int,
    relevant_negative: str = "remove",
) -> tuple[str, str]:
    """(action, reason) for one audit row. ``judgement`` is None when the row was not sent to
    the judge."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    if kind != "positive" and not prelabel:
        if kind == "generated_negative":
            return "keep", "too few rerankers rank it high: kept as a negative, not judged"
        return "keep", "too few rerankers rank it high: left unjudged"
    if judgement is None:
        raise ValueError(f"a pre-labelled {kind} needs a judgement")
    if judgement.error is not None:
        return "keep", f"the judge gave no usable answer ({judgement.error}): unchanged"
    relevant = judgement.level >= relevant_level
    said = f"judged {judgement.level} ({'>=' if relevant else '<'} {relevant_level})"
    if kind == "positive":
        if relevant:
            return "keep", f"{said}: the query matches its document"
        return "drop_query", f"{said}: the query does not match its own document"
    if kind == "generated_negative":
        if not relevant:
            return "keep", f"{said}: a true hard negative"
        if relevant_negative == "promote":
            return "promote", f"{said}: the generated negative answers the query; now relevant"
        return "remove_document", f"{said}: the generated negative answers the query; removed"
    if relevant:
        return "add_positive", f"{said}: an overlooked relevant document"
    return "keep", f"{said}: left unjudged"


# --- quality control of a generated dataset ---------------------------------------------------


@dataclass
class Controlled:
    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame  # every checked split's
    audit: pd.DataFrame
    stats: dict
    split_qrels: dict[str, pd.DataFrame] | None = None  # by split


def audit_pairs(
    qrels: pd.DataFrame, negatives: pd.DataFrame, ranks: dict[str, pd.DataFrame]
) -> pd.DataFrame:
    """Every (query, document) QC looks at, with its kind: each positive, each generated
    negative of its own query, and each other document some reranker ranked."""
    positives = qrels.loc[qrels["relevance"] >= 1, ["query_id", "doc_id"]].assign(kind="positive")
    own = negatives[["query_id", "doc_id"]].assign(kind="generated_negative")
    ranked = [frame[["query_id", "doc_id"]] for frame in ranks.values()]
    others = (
        pd.concat(ranked, ignore_index=True).drop_duplicates()
        if ranked
        else pd.DataFrame(columns=["query_id", "doc_id"])
    ).assign(kind="corpus_document")
    pairs = pd.concat([positives, own, others], ignore_index=True)
    # The first kind wins: a positive is never also a negative or an unlabelled document.
    return pairs.drop_duplicates(["query_id", "doc_id"], keep="first").reset_index(drop=True)


def split_after_control(controlled: Controlled, dev_share: float, seed: int) -> dict:
    """The kept queries split anew into dev and test, as AIR-Bench orders it: "After the
    quality control stage, we split the generated queries into different sets. For QA task, we
    split the queries in each dataset into dev set and test set in a 1:4 ratio."
    (airbench.txt, line 295). So ``dev_share`` of the queries quality control kept are dev
    (``irflow.derived.generate.sampling.assign_splits``, the same seeded order as at
    generation), whichever split generation gave them. Sets ``controlled.split_qrels``;
    returns each split's count of kept queries."""
    from irflow.derived.generate.sampling import assign_splits

    split_of = assign_splits(sorted(controlled.queries["query_id"]), dev_share, seed)
    in_split = controlled.qrels["query_id"].map(split_of)
    controlled.split_qrels = {
        split: controlled.qrels[in_split == split].reset_index(drop=True)
        for split in ("dev", "test")
    }
    return {split: sum(1 for s in split_of.values() if s == split) for split in ("dev", "test")}


def quality_control(
    dataset: str,
    corpus: pd.DataFrame,
    queries: pd.DataFrame,
    split_qrels: dict[str, pd.DataFrame],
    negatives: pd.DataFrame,
    ranks: dict[str, pd.DataFrame],
    *,
    judge: Judge,
    settings: dict,
) -> Controlled:
    """The QC'd tables and the audit of the splits in ``split_qrels`` (each split's qrels, by
    name). ``ranks`` maps each reranker to its ranking of the candidates; ``settings`` holds
    thresholds, majority, relevant_level, relevant_negative."""
    queries = queries.reset_index(drop=True)
    query_ids = set(queries["query_id"])
    for name, frame in ranks.items():
        unknown = sorted(set(frame["query_id"]) - query_ids)
        if unknown:
            raise InputError(
                f"votes of {name}", f"query {unknown[0]!r} is not a query of {dataset}"
            )
    split_of: dict[str, str] = {}
    for split, frame in split_qrels.items():
        for query_id in frame["query_id"].unique():
            if split_of.setdefault(query_id, split) != split:
                raise InputError(
                    f"{dataset} qrels",
                    f"query {query_id!r} is in splits {split_of[query_id]} and {split}",
                )
    qrels = pd.concat(list(split_qrels.values()), ignore_index=True)
    # Only the checked splits' queries: one of another split would keep unchecked labels.
    queries = queries[queries["query_id"].isin(split_of)].reset_index(drop=True)
    query_ids = set(queries["query_id"])
    needed = majority_needed(len(ranks), settings["majority"])
    # The block's thresholds typed once here (irflow.core.settings_types.Thresholds); a
    # query's own positive is voted on as a corpus document is.
    block = Thresholds.model_validate(settings["thresholds"])
    thresholds = block.model_dump() | {"positive": block.corpus_document}
    table = vote_table(audit_pairs(qrels, negatives, ranks), ranks, thresholds, needed)
    table = table[table["kind"].ne("corpus_document") | table["prelabel"]].reset_index(drop=True)
    # Only pairs of the dataset's queries are controlled (a negative of a query the filter
    # dropped has no query text).
    table = table[table["query_id"].isin(query_ids)].reset_index(drop=True)
    texts = dict(zip(queries["query_id"], queries["text"]))
    documents = dict(
        zip(corpus["doc_id"], contracts.document_texts(corpus["title"], corpus["text"]))
    )
    missing = sorted(set(table["doc_id"]) - documents.keys())
    if missing:
        raise InputError(f"{dataset} corpus", f"doc_id {missing[0]!r} has no text")

    relevant_level = settings["relevant_level"]
    judgements: dict[int, Judgement] = {}
    first = table.index[table["kind"].eq("positive")].tolist()
    for row, judgement in zip(
        first,
        judge.rate(
            [(texts[table.at[i, "query_id"]], documents[table.at[i, "doc_id"]]) for i in first],
            desc=f"qc {dataset}: positives",
        ),
    ):
        judgements[row] = judgement
    dropped = {
        table.at[row, "query_id"]
        for row, judgement in judgements.items()
        if judgement.error is None and judgement.level < relevant_level
    }
    second = table.index[
        table["kind"].ne("positive") & table["prelabel"] & ~table["query_id"].isin(dropped)
    ].tolist()
    for row, judgement in zip(
        second,
        judge.rate(
            [(texts[table.at[i, "query_id"]], documents[table.at[i, "doc_id"]]) for i in second],
            desc=f"qc {dataset}: pre-labelled",
        ),
    ):
        judgements[row] = judgement

    actions, reasons = [], []
    for row in table.itertuples():
        judgement = judgements.get(row.Index)
        if row.kind != "positive" and row.prelabel and row.query_id in dropped:
            action, reason = "not_judged", "its query was dropped"
        else:
            action, reason = decide(
                row.kind, row.prelabel, judgement, relevant_level, settings["relevant_negative"]
            )
        actions.append(action)
        reasons.append(reason)
    # A generated negative that answers its own query leaves the corpus, so another query
    # that judged it relevant cannot keep it as a positive.
    removed = {d for d, action in zip(table["doc_id"], actions) if action == "remove_document"}
    for i, (doc_id, action) in enumerate(zip(table["doc_id"], actions)):
        if action in ("add_positive", "promote") and doc_id in removed:
            actions[i] = "remove_document"
            reasons[i] += "; but the document is removed (it answers the query it was made for)"
    table["judged"] = [i in judgements for i in table.index]
    table["judge_level"] = pd.array(
        [judgements[i].level if i in judgements else None for i in table.index], dtype="Int32"
    )
    table["judge_explanation"] = [
        judgements[i].explanation if i in judgements else None for i in table.index
    ]
    table["judge_error"] = [
        (f"{judgements[i].error}: {judgements[i].detail}" if judgements[i].error else None)
        if i in judgements
        else None
        for i in table.index
    ]
    table["action"] = actions
    table["reason"] = reasons
    table.insert(0, "dataset", dataset)
    table.insert(1, "split", table["query_id"].map(split_of))
    rank_columns = sorted(c for c in table.columns if c.startswith(RANK_PREFIX))
    audit = table[[*AUDIT_COLUMNS[:5], *rank_columns, *AUDIT_COLUMNS[5:]]]
    controlled = apply_decisions(corpus, queries, qrels, audit)
    in_split = controlled.qrels["query_id"].map(split_of)
    controlled.split_qrels = {
        split: controlled.qrels[in_split == split].reset_index(drop=True) for split in split_qrels
    }
    ranked = set().union(*(set(frame["query_id"]) for frame in ranks.values()))
    by_split = {}
    for split in split_qrels:
        rows = audit[audit["split"] == split]
        checked = {q for q, s in split_of.items() if s == split}
        by_split[split] = {
            "queries": len(checked),
            "queries_kept": len(checked & set(controlled.queries["query_id"])),
            "queries_dropped": len(checked & dropped),
            "queries_with_candidates": len(checked & ranked),
            "audit_rows": len(rows),
            "actions": _actions(rows),
        }
        if checked - ranked:
            log.warning(
                "%s, split %s: %d of %d queries have no candidates in the votes: only their "
                "positives and own negatives were checked",
                dataset,
                split,
                len(checked - ranked),
                len(checked),
            )
    stats = {
        "queries": len(queries),
        "queries_kept": len(controlled.queries),
        "queries_dropped": len(dropped),
        "audit_rows": len(audit),
        "actions": _actions(audit),
        "by_split": by_split,
        "judge_requests": judge.asked,
        "judge_failures": dict(sorted(judge.failures.items())),
        "needed_votes": needed,
        "rerankers": sorted(ranks),
        "corpus": len(controlled.corpus),
        "removed_documents": int(
            audit.loc[audit["action"] == "remove_document", "doc_id"].nunique()
        ),
        "added_positives": int((audit["action"] == "add_positive").sum()),
        "promoted_negatives": int((audit["action"] == "promote").sum()),
    }
    controlled.audit, controlled.stats = audit, stats
    for (kind, action), n in audit.groupby(["kind", "action"]).size().items():
        log.info("%s: %d %s rows -> %s", dataset, n, kind, action)
    if judge.failures:
        log.warning(
            "%s: the judge gave no usable answer for %d pairs (%s); they were left unchanged",
            dataset,
            sum(judge.failures.values()),
            ", ".join(f"{k}: {v}" for k, v in sorted(judge.failures.items())),
        )
    # A failed judgement leaves its query unchecked: past the limit, the job fails.
    judge.client.check_dropped()
    return controlled


def _actions(audit: pd.DataFrame) -> dict[str, int]:
    return {
        f"{kind}/{action}": int(n)
        for (kind, action), n in audit.groupby(["kind", "action"]).size().items()
    }


def apply_decisions(
    corpus: pd.DataFrame, queries: pd.DataFrame, qrels: pd.DataFrame, audit: pd.DataFrame
) -> Controlled:
    """The dataset after the audit's actions."""
    dropped = set(audit.loc[audit["action"] == "drop_query", "query_id"])
    removed = set(audit.loc[audit["action"] == "remove_document", "doc_id"])
    promoted = audit.loc[audit["action"].isin(["promote", "add_positive"]), ["query_id", "doc_id"]]
    # A removed document is gone for every query, even one that judged it relevant.
    promoted = promoted[~promoted["query_id"].isin(dropped) & ~promoted["doc_id"].isin(removed)]
    kept_qrels = qrels[~qrels["query_id"].isin(dropped) & ~qrels["doc_id"].isin(removed)].copy()
    keys = pd.MultiIndex.from_frame(kept_qrels[["query_id", "doc_id"]])
    upgraded = keys.isin(pd.MultiIndex.from_frame(promoted))
    kept_qrels.loc[upgraded, "relevance"] = 1
    new = promoted[~pd.MultiIndex.from_frame(promoted).isin(keys)]
    new_rows = new.assign(relevance=1, span_start=None, span_end=None)
    new_qrels = pd.concat(
        [kept_qrels, new_rows.reindex(columns=kept_qrels.columns)], ignore_index=True
    )
    new_qrels["relevance"] = new_qrels["relevance"].astype("int32")
    return Controlled(
        corpus=corpus[~corpus["doc_id"].isin(removed)].reset_index(drop=True),
        queries=queries[~queries["query_id"].isin(dropped)].reset_index(drop=True),
        qrels=new_qrels.sort_values(["query_id", "doc_id"], kind="stable").reset_index(drop=True),
        audit=audit,
        stats={},
    )


def read_votes(paths: dict[str, str | Path]) -> dict[str, pd.DataFrame]:
    """Each reranker's ranking, by name, from the votes files."""
    frames = {}
    for name, path in paths.items():
        frame = contracts.read_frame(path, columns=["query_id", "doc_id", "rank"])
        if frame.duplicated(["query_id", "doc_id"]).any():
            row = frame[frame.duplicated(["query_id", "doc_id"])].iloc[0]
            raise InputError(path, f"({row['query_id']}, {row['doc_id']}) is ranked twice")
        frames[name] = frame
    return frames


QC_SUMMARY_COLUMNS = [
    "dataset",
    "split",
    "queries",
    "queries_dropped",
    "queries_kept",
    "negatives",
    "negatives_judged",
    "negatives_removed",
    "negatives_promoted",
    "documents_judged",
    "positives_added",
    "judge_failures",
]


def summarize_audit(audit: pd.DataFrame) -> pd.DataFrame:
    """Per QC'd dataset and split, what quality control did (one row each): the report's
    table."""
    rows = []
    for (dataset, split), rows_of in audit.groupby(["dataset", "split"], sort=True):
        positives = rows_of[rows_of["kind"] == "positive"]
        negatives = rows_of[rows_of["kind"] == "generated_negative"]
        documents = rows_of[rows_of["kind"] == "corpus_document"]
        dropped = int((positives["action"] == "drop_query").sum())
        rows.append(
            {
                "dataset": dataset,
                "split": split,
                "queries": int(positives["query_id"].nunique()),
                "queries_dropped": dropped,
                "queries_kept": int(positives["query_id"].nunique()) - dropped,
                "negatives": len(negatives),
                "negatives_judged": int(negatives["judged"].sum()),
                "negatives_removed": int((negatives["action"] == "remove_document").sum()),
                "negatives_promoted": int((negatives["action"] == "promote").sum()),
                "documents_judged": int(documents["judged"].sum()),
                "positives_added": int((documents["action"] == "add_positive").sum()),
                "judge_failures": int(rows_of["judge_error"].notna().sum()),
            }
        )
    return pd.DataFrame(rows, columns=QC_SUMMARY_COLUMNS)


def summary_table_html(summary: pd.DataFrame) -> str:
    """HTML table of ``summarize_audit``."""
    if summary.empty:
        return "<p>No generated dataset is quality-controlled.</p>"
    return summary.rename(columns=lambda c: c.replace("_", " ")).to_html(index=False)
