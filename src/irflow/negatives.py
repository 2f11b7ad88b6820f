"""negatives: mine hard negatives from a system's run, as Arctic-Embed does (§3.6).

For every judged query of the split, the candidates are the run's top ``top_k`` documents.
Judged positives (relevance >= ``min_relevance``) are never negatives. A candidate scoring
above ``max_score`` is dropped: Arctic-Embed caps the score, not the rank, because some queries
admit much harder negatives than others and a very high score usually means an unjudged
positive. With ``max_relative`` a negative may also score at most that fraction of the
positive's score (NV-Retriever's "TopK-PercPos"); for a negative positive score the cap is
``positive - |positive| * (1 - max_relative)``, the same margin on the other side of zero.
The ``num_negatives`` best-ranked survivors become the triple's negatives.

One triple per (query, positive) is written as Parquet, with ids, ranks and scores, and as the
JSONL that sentence-transformers trains from (``datasets.load_dataset("json")``): ``triplet``
rows (query, positive, negative), one per negative, or ``n-tuple`` rows (query, positive,
negative_1 .. negative_n) for triples with all ``num_negatives`` negatives.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from irflow import contracts

NEGATIVES = pa.schema(
    [
        ("query_id", pa.string()),
        ("query", pa.string()),
        ("positive_id", pa.string()),
        ("positive", pa.string()),
        ("positive_score", pa.float64()),  # null when the run did not retrieve the positive
        ("negative_ids", pa.list_(pa.string())),
        ("negatives", pa.list_(pa.string())),
        ("negative_scores", pa.list_(pa.float64())),
        ("negative_ranks", pa.list_(pa.int32())),
    ]
)


def score_cap(settings: dict, positive_score: float | None) -> float | None:
    """The highest score a negative may have for this positive; None for no cap."""
    caps = []
    if settings.get("max_score") is not None:
        caps.append(settings["max_score"])
    if settings.get("max_relative") is not None and positive_score is not None:
        relative = settings["max_relative"]
        caps.append(positive_score - abs(positive_score) * (1 - relative))
    return min(caps) if caps else None


def mine(run: pa.Table, qrels: pa.Table, settings: dict) -> tuple[list[dict], dict[str, int]]:
    """Triples of ids and scores: (query_id, positive_id, positive_score, negatives as (doc_id,
    score, rank)), and counts of what was dropped and why."""
    min_relevance = settings["min_relevance"]
    positives: dict[str, list[str]] = {}
    for query_id, doc_id, relevance in zip(
        *(qrels.column(c).to_pylist() for c in ("query_id", "doc_id", "relevance"))
    ):
        if relevance >= min_relevance:
            positives.setdefault(query_id, []).append(doc_id)

    run = run.sort_by([("query_id", "ascending"), ("rank", "ascending")])
    ranked: dict[str, list[tuple[str, float, int]]] = {}
    for query_id, doc_id, score, rank in zip(
        *(run.column(c).to_pylist() for c in ("query_id", "doc_id", "score", "rank"))
    ):
        ranked.setdefault(query_id, []).append((doc_id, score, rank))

    counts = dict.fromkeys(
        [
            "queries",
            "queries_without_positive",
            "triples",
            "negatives",
            "candidates_positive",
            "candidates_above_cap",
            "positives_not_retrieved",
            "triples_without_negatives",
        ],
        0,
    )
    triples = []
    for query_id in sorted(ranked.keys() | positives.keys()):
        counts["queries"] += 1
        if query_id not in positives:
            counts["queries_without_positive"] += 1
            continue
        positive_ids = set(positives[query_id])
        hits = ranked.get(query_id, [])
        scores = {doc_id: score for doc_id, score, _ in hits}
        candidates = [hit for hit in hits if hit[2] <= settings["top_k"]]
        counts["candidates_positive"] += sum(1 for hit in candidates if hit[0] in positive_ids)
        candidates = [hit for hit in candidates if hit[0] not in positive_ids]
        for positive_id in positives[query_id]:
            positive_score = scores.get(positive_id)
            if positive_score is None and settings.get("max_relative") is not None:
                # Without the positive's score its relative cap is unknown: no triple rather
                # than one whose negatives may be harder than the positive.
                counts["positives_not_retrieved"] += 1
                continue
            cap = score_cap(settings, positive_score)
            allowed = [hit for hit in candidates if cap is None or hit[1] <= cap]
            counts["candidates_above_cap"] += len(candidates) - len(allowed)
            chosen = allowed[: settings["num_negatives"]]
            if not chosen:
                counts["triples_without_negatives"] += 1
                continue
            triples.append(
                {
                    "query_id": query_id,
                    "positive_id": positive_id,
                    "positive_score": positive_score,
                    "negatives": chosen,
                }
            )
            counts["triples"] += 1
            counts["negatives"] += len(chosen)
    return triples, counts


def _texts(table: pa.Table, id_column: str, ids: set[str], document: bool) -> dict[str, str]:
    table = table.filter(pc.is_in(table.column(id_column), value_set=pa.array(sorted(ids))))
    keys = table.column(id_column).to_pylist()
    if document:
        texts = contracts.document_texts(
            table.column("title").to_pylist(), table.column("text").to_pylist()
        )
    else:
        texts = table.column("text").to_pylist()
    return dict(zip(keys, texts))


def with_texts(triples: list[dict], queries: pa.Table, corpus: pa.Table) -> pa.Table:
    """The ``NEGATIVES`` table: the triples with query and document texts as models read them
    (``contracts.document_text``). A triple whose positive is not in the corpus is left out
    (the filter stage may have dropped it) and so is a negative that is not."""
    doc_ids = {t["positive_id"] for t in triples} | {
        doc_id for t in triples for doc_id, _, _ in t["negatives"]
    }
    documents = _texts(corpus, "doc_id", doc_ids, document=True)
    query_texts = _texts(queries, "query_id", {t["query_id"] for t in triples}, document=False)
    rows = []
    for triple in triples:
        negatives = [hit for hit in triple["negatives"] if hit[0] in documents]
        if triple["positive_id"] not in documents or not negatives:
            continue
        rows.append(
            {
                "query_id": triple["query_id"],
                "query": query_texts[triple["query_id"]],
                "positive_id": triple["positive_id"],
                "positive": documents[triple["positive_id"]],
                "positive_score": triple["positive_score"],
                "negative_ids": [doc_id for doc_id, _, _ in negatives],
                "negatives": [documents[doc_id] for doc_id, _, _ in negatives],
                "negative_scores": [score for _, score, _ in negatives],
                "negative_ranks": [rank for _, _, rank in negatives],
            }
        )
    return pa.Table.from_pylist(rows, NEGATIVES)


def jsonl_rows(table: pa.Table, output_format: str, num_negatives: int) -> list[dict]:
    """Rows of sentence-transformers' training formats (columns by position: anchor,
    positive, negatives)."""
    rows = []
    for row in table.to_pylist():
        base = {"query": row["query"], "positive": row["positive"]}
        if output_format == "triplet":
            rows += [base | {"negative": negative} for negative in row["negatives"]]
        elif len(row["negatives"]) == num_negatives:
            # n-tuple: every row needs the same columns, so a triple with fewer negatives
            # than asked for is left out of the JSONL (it stays in the Parquet).
            rows.append(
                base | {f"negative_{i}": n for i, n in enumerate(row["negatives"], start=1)}
            )
    return rows


def write_jsonl(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def run_negatives(
    run: Path,
    qrels: Path,
    queries: Path,
    corpus: Path,
    settings: dict,
    out_parquet: Path,
    out_jsonl: Path,
) -> dict:
    triples, counts = mine(pq.read_table(run), pq.read_table(qrels), settings)
    table = with_texts(triples, pq.read_table(queries), pq.read_table(corpus))
    counts["triples_written"] = table.num_rows
    contracts.write_table(table, out_parquet, NEGATIVES)
    rows = jsonl_rows(table, settings["format"], settings["num_negatives"])
    write_jsonl(rows, out_jsonl)
    counts["jsonl_rows"] = len(rows)
    return counts
