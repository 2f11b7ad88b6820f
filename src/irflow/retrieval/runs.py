"""Runs: ranked lists as the ``run`` contract, in trec_eval's order, and as TREC run files.

trec_eval sorts a query's results by score descending and breaks ties by document id in
descending (byte) order. Every ordering in irflow goes through ``trec_order`` (or, for a
retriever's hits, ``build_run``, which sorts the same way) so that ranks here,
metrics from pytrec_eval and metrics computed by irflow all agree.

A run lists a document at most once per query. pytrec_eval would keep one of the repeats and
irflow's own measures would count each (``recall_cap`` above 1), so a repeated (query, doc)
is refused wherever a run file is written (``write_run``) or read (``read_run``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as csv

from irflow.core import contracts
from irflow.core.atomic import atomic_path
from irflow.core.errors import InputError

log = logging.getLogger(__name__)


def search_depth(top_k: int, remove_self_matches: bool) -> int:
    """How many documents a search asks for to fill a run of ``top_k``: one more where the
    query's own document (a self-match) is removed from its hits."""
    return top_k + remove_self_matches


@dataclass(frozen=True)
class SearchRequest:
    """What a searcher is asked for, on any query table: each query's ``top_k`` documents,
    without self-matches where ``remove_self_matches``, and the per-query latency of the first
    ``latency_queries`` searched one at a time."""

    top_k: int
    remove_self_matches: bool
    latency_queries: int = 0

    @classmethod
    def of(cls, settings: dict) -> SearchRequest:
        """The request of a retrieve job's settings (or of a split's ``retrieval``)."""
        return cls(
            settings["top_k"], settings["remove_self_matches"], settings.get("latency_queries", 0)
        )

    @property
    def depth(self) -> int:
        return search_depth(self.top_k, self.remove_self_matches)


class QuerySearcher(Protocol):
    """What a retriever family opens from its files (irflow.workflow.families): it searches
    any query table (``query_id``, ``text``; or the query vectors its model stored) with one
    request. irflow.retrieval.retrieve's ``TextSearcher`` and ``DenseSearcher`` are two."""

    def search(self, queries: pa.Table, request: SearchRequest) -> tuple[pd.DataFrame, dict]:
        """The run (``build_run``'s) of ``queries`` and its timing."""


def trec_order(run: pd.DataFrame) -> pd.DataFrame:
    """Sort by query, then score descending, then doc_id descending; set rank from 1."""
    # Sorting integer codes is far cheaper than sorting strings; factorize(sort=True) numbers
    # the ids in code point order, which is UTF-8 byte order, as trec_eval compares them.
    query_codes, _ = pd.factorize(run["query_id"], sort=True)
    doc_codes, _ = pd.factorize(run["doc_id"], sort=True)
    order = np.lexsort((-doc_codes, -run["score"].to_numpy(dtype=np.float64), query_codes))
    run = run.iloc[order].reset_index(drop=True)
    sorted_codes = query_codes[order]
    first_of_query = np.searchsorted(sorted_codes, sorted_codes, side="left")
    run["rank"] = (np.arange(len(run)) - first_of_query + 1).astype(np.int32)
    return run


def byte_order_codes(ids: pa.Array) -> np.ndarray:
    """Each id's place among the distinct ``ids`` in UTF-8 byte order (as trec_eval compares
    them), from 0; equal ids share one."""
    ranks = pc.rank(ids, sort_keys="ascending", tiebreaker="dense").to_numpy()
    return ranks.astype(np.int64) - 1  # signed: the sort negates codes


def _flatten(parts: list, dtype) -> np.ndarray:
    if not parts:
        return np.array([], dtype=dtype)
    return np.concatenate([np.asarray(part, dtype=dtype) for part in parts])


def top_with_ties(rows: np.ndarray, scores: np.ndarray, depth: int) -> tuple:
    """The ``rows`` of the ``depth`` best ``scores``, and any tied with the last of them: a run
    cut later in trec_eval's order (score, then doc id) then keeps the right tied documents."""
    if len(rows) > depth:
        last_kept = np.partition(scores, len(scores) - depth)[len(scores) - depth]
        keep = scores >= last_kept
        rows, scores = rows[keep], scores[keep]
    return rows, scores


def build_run(
    query_ids: pa.Array,
    doc_ids: pa.Array,
    hits: list[tuple[np.ndarray, np.ndarray]],
    top_k: int,
    remove_self_matches: bool,
) -> tuple[pd.DataFrame, int]:
    """A run from per-query hits, each (rows of ``doc_ids``, scores), in ``trec_order``'s
    order and cut to ``top_k``; returns it and the number of self-matches removed.

    Rows are ordered on integer codes one query at a time, and id strings are taken only for
    the rows kept. ``doc_ids`` is one Arrow array, not chunked."""
    doc_codes, query_codes = byte_order_codes(doc_ids), byte_order_codes(query_ids)
    if remove_self_matches:
        # A query's own id as a doc code (-1 when no document has it): comparing codes finds
        # every row holding that id, repeated ids included, as comparing strings would.
        own_row = pc.index_in(query_ids, value_set=doc_ids).fill_null(-1).to_numpy()
        own_code = np.where(own_row >= 0, doc_codes[own_row], -1)
    # Queries in byte order of their ids; queries sharing an id are ranked as one list, as
    # trec_order ranks them.
    same_id: dict[int, list[int]] = {}
    for query in np.argsort(query_codes, kind="stable"):
        same_id.setdefault(query_codes[query], []).append(query)
    run_queries, run_rows, run_scores, run_ranks = [], [], [], []
    removed = 0
    for queries in same_id.values():
        rows = _flatten([hits[query][0] for query in queries], np.int64)
        scores = _flatten([hits[query][1] for query in queries], np.float64)
        if remove_self_matches:
            other = doc_codes[rows] != own_code[queries[0]]
            removed += len(rows) - int(other.sum())
            rows, scores = rows[other], scores[other]
        # Stable, as trec_order: rows tied on score and doc id keep their order.
        order = np.lexsort((-doc_codes[rows], -scores))[:top_k]
        run_queries.append(np.full(len(order), queries[0]))
        run_rows.append(rows[order])
        run_scores.append(scores[order])
        run_ranks.append(np.arange(1, len(order) + 1, dtype=np.int32))
    run = pa.table(
        {
            "query_id": _strings_at(query_ids, _flatten(run_queries, np.int64)),
            "doc_id": _strings_at(doc_ids, _flatten(run_rows, np.int64)),
            "score": _flatten(run_scores, np.float64),
            "rank": _flatten(run_ranks, np.int32),
        }
    )
    return run.to_pandas(), removed


def short_queries(
    run: pd.DataFrame, query_ids: pa.Array, doc_ids: pa.Array, top_k: int, remove_self: bool
) -> dict[str, int]:
    """Queries whose run holds fewer than min(``top_k``, corpus size) documents (less the
    query's own id where self-matches are removed), with the count each holds: 0 for a query
    absent from the run."""
    documents = len(pc.unique(doc_ids))
    expected = np.full(len(query_ids), min(top_k, documents))
    if remove_self:
        own = pc.is_in(query_ids, value_set=doc_ids).to_numpy(zero_copy_only=False)
        expected = np.minimum(top_k, documents - own)
    held = run["query_id"].value_counts()
    counts = held.reindex(query_ids.to_pylist(), fill_value=0).to_numpy()
    short = counts < expected
    return dict(zip(np.asarray(query_ids.to_pylist(), dtype=object)[short], counts[short].tolist()))


def term_matching_reason(retriever: str, short: int) -> dict:
    """The manifest's reason for the ``short`` queries of a retriever that returns only the
    documents sharing a term with the query (BM25, a sparse model): expected, not a fault."""
    reason = (
        f"expected: {retriever} returns only the documents that share a term with the query, "
        "and these queries share one with fewer than min(top_k, corpus size) documents"
    )
    return {"short_queries_reason": reason if short else None}


def report_short_queries(timing: dict, top_k: int) -> None:
    """Log the queries that got fewer than min(top_k, corpus size) documents: as information
    with its reason where the search knows why (``term_matching_reason``), else as a warning
    (a dense search is short only when its index could not be searched to that depth; the
    manifest's ``search`` block says how far it went)."""
    if not timing["short_queries"]:
        return
    reason = timing.get("short_queries_reason")
    log.log(
        logging.INFO if reason else logging.WARNING,
        "%d of %d queries got fewer than min(top_k=%d, corpus size) documents, e.g. %s%s",
        timing["short_queries"],
        timing["queries"],
        top_k,
        timing["short_query_examples"],
        f" ({reason})" if reason else "",
    )


def _strings_at(ids: pa.Array, positions: np.ndarray) -> pa.Array:
    """``ids.take(positions)`` as large_string, the type pandas keeps str columns in, so pandas
    rewrites no offsets. The buffers come from the system allocator: Arrow's default, mimalloc,
    took 2-4 times as long to hand out a fresh 60 MB (ArguAna's BM25 run) on Linux."""
    return pc.take(ids.cast(pa.large_string()), positions, memory_pool=pa.system_memory_pool())


def check_unique(run: pd.DataFrame, path: str | Path) -> None:
    """Raise ``InputError`` naming ``path`` and the first (query, doc) the run repeats."""
    repeated = run.duplicated(["query_id", "doc_id"])
    if repeated.any():
        first = run.loc[repeated.idxmax()]
        raise InputError(
            path,
            f"document {first['doc_id']!r} is listed more than once for query "
            f"{first['query_id']!r} ({int(repeated.sum())} repeated (query, doc) rows); "
            "a run lists each document at most once per query",
        )


def read_run(path: str | Path) -> pd.DataFrame:
    """A run file (``run`` contract), refused if it repeats a (query, doc)."""
    run = contracts.read_frame(path)
    check_unique(run, path)
    return run


def write_run(run: pd.DataFrame, path: Path, lineage: dict, trec_path: Path, tag: str) -> None:
    """Parquet with lineage and the TREC file; refused, before either is written, if the run
    repeats a (query, doc) or holds an id the TREC format cannot."""
    check_unique(run, path)
    table = pa.Table.from_pandas(
        run[contracts.RUN.names], schema=contracts.RUN, preserve_index=False
    )
    check_trec_ids(table, trec_path)
    contracts.write_table(contracts.with_lineage(table, lineage), path)
    write_trec(table, trec_path, tag)


# TREC run lines are split on whitespace; Arrow's CSV writer, unquoted, also refuses quotes.
_NOT_IN_TREC_IDS = r'[\s"]'


def check_trec_ids(run: pa.Table, path: str | Path) -> None:
    """Raise ``InputError`` naming ``path`` and the first id a TREC run line cannot hold."""
    for column in ("query_id", "doc_id"):
        ids = pc.unique(run.column(column))
        unfit = ids.filter(pc.match_substring_regex(ids, _NOT_IN_TREC_IDS))
        if len(unfit):
            raise InputError(
                path,
                f"{column} {unfit[0].as_py()!r} holds whitespace or a double quote, which a "
                f"TREC run line cannot ({len(unfit)} such ids)",
            )


def write_trec(run: pa.Table, path: Path, tag: str) -> None:
    """TREC run format (``run`` contract columns); each score written as the shortest decimal
    that reads back as the same float64, so no tie appears that the Parquet lacks."""
    rows = len(run)

    def constant(text: str) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), [text])

    lines = pa.table(
        [
            run.column("query_id"),
            constant("Q0"),
            run.column("doc_id"),
            run.column("rank"),
            run.column("score"),
            constant(tag),
        ],
        names=["query_id", "q0", "doc_id", "rank", "score", "tag"],
    )
    with atomic_path(path) as tmp:
        csv.write_csv(
            lines, tmp, csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
        )
