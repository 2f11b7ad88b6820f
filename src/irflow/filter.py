"""filter: drop empty, out-of-bounds and duplicate documents; pick the queries to score.

Every decision lands in an audit table with its reason. A judged document is never dropped
silently: by default it is kept and flagged, so published numbers stay comparable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from irflow import contracts

BATCH_ROWS = 50_000


def _decide(title: str, text: str, rules: dict, seen: set[bytes]) -> str | None:
    """The reason to drop a document, or None to keep it."""
    words = len(title.split()) + len(text.split())
    if rules["drop_empty"] and words == 0:
        return "empty"
    if rules["min_words"] is not None and words < rules["min_words"]:
        return f"shorter than {rules['min_words']} words"
    if rules["max_words"] is not None and words > rules["max_words"]:
        return f"longer than {rules['max_words']} words"
    if rules["drop_duplicates"]:
        digest = hashlib.blake2b(f"{title}\0{text}".encode(), digest_size=16).digest()
        if digest in seen:
            return "exact duplicate"
        seen.add(digest)
    return None


def filter_corpus(
    corpus_path: Path, judged: set[str], rules: dict, out_path: Path
) -> tuple[pa.Table, dict]:
    """Stream the corpus through the rules; return the audit table and counts."""
    audit: list[dict] = []
    seen: set[bytes] = set()
    counts = {"documents_in": 0, "documents_out": 0, "dropped": 0, "flagged": 0}

    def kept_batches() -> Iterator[pa.RecordBatch]:
        for batch in pq.ParquetFile(corpus_path).iter_batches(BATCH_ROWS):
            keep = []
            for doc_id, title, text in zip(
                *(batch.column(n).to_pylist() for n in contracts.CORPUS.names)
            ):
                reason = _decide(title, text, rules, seen)
                is_judged = doc_id in judged
                action = "keep"
                if reason is not None:
                    action = "flag" if is_judged and rules["judged"] == "flag" else "drop"
                    audit.append(
                        {"doc_id": doc_id, "action": action, "reason": reason, "judged": is_judged}
                    )
                keep.append(action != "drop")
            counts["documents_in"] += batch.num_rows
            yield batch.filter(pa.array(keep, pa.bool_()))

    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    with pq.ParquetWriter(tmp, contracts.CORPUS) as writer:
        for batch in kept_batches():
            counts["documents_out"] += batch.num_rows
            writer.write_batch(batch)
    tmp.replace(out_path)
    for row in audit:
        counts["dropped" if row["action"] == "drop" else "flagged"] += 1
    return pa.Table.from_pylist(audit, contracts.AUDIT), counts


def queries_to_score(queries_path: Path, qrels_path: Path) -> pa.Table:
    """Queries with at least one judgement in the split, as BEIR evaluates them."""
    queries = pq.read_table(queries_path)
    judged = pq.read_table(qrels_path, columns=["query_id"]).column("query_id").unique()
    return queries.filter(pc.is_in(queries.column("query_id"), value_set=judged))


def run_filter(
    corpus: Path,
    queries: Path,
    qrels: Path,
    rules: dict,
    out_corpus: Path,
    out_queries: Path,
    out_audit: Path,
) -> dict:
    judged = set(pq.read_table(qrels, columns=["doc_id"]).column("doc_id").to_pylist())
    audit, counts = filter_corpus(corpus, judged, rules, out_corpus)
    contracts.write_table(audit, out_audit, contracts.AUDIT)
    scored = queries_to_score(queries, qrels)
    contracts.write_table(scored, out_queries, contracts.QUERIES)
    return counts | {"queries_scored": scored.num_rows, "rules": rules}
