"""retrieve: first-stage top-k runs, dense (faiss) or lexical (bm25s, irflow.retrieval.bm25).

Dense search goes over query batches against the faiss index and keeps only the top-k per
query, so no query x corpus score matrix is ever held. BM25 searches the index its dataset's
index_bm25 job saved, memory-mapped; documents stay corpus rows (integers) until the run is
built, so the corpus is never held as Python strings.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from irflow.core import contracts
from irflow.core.progress import LoggedProgress
from irflow.core.timing import time_each
from irflow.encoding.embed import read_embeddings
from irflow.retrieval.bm25 import BM25Retriever
from irflow.retrieval.exact_search import ExactSearcher, open_searcher
from irflow.retrieval.index import Searcher
from irflow.retrieval.recall import measure_recall, recall_sample
from irflow.retrieval.runs import (
    build_run,
    short_queries,
    term_matching_reason,
)

log = logging.getLogger(__name__)


def dense_search(
    index_path: Path | None,
    index_spec: dict,
    doc_embeddings: Path,
    query_embeddings: Path,
    top_k: int,
    remove_self_matches: bool,
    *,
    batch_size: int,
    latency_queries: int,
    passages: Path | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Top-k documents per query. With ``passages`` (the table the index rows were embedded
    from, in the same order) a document scores its best passage (MaxP). ``index_path`` is
    None for a flat index searched in shards (it has no file)."""
    searcher = open_searcher(index_path, doc_embeddings, index_spec)
    rows_source, column = (doc_embeddings, "id") if passages is None else (passages, "doc_id")
    # Each index row's document as an integer code into the distinct doc ids.
    row_docs = contracts.read_table(rows_source, columns=[column]).column(column)
    row_docs = row_docs.combine_chunks().dictionary_encode()
    row_codes, doc_ids = row_docs.indices.to_numpy(), row_docs.dictionary
    query_ids, queries = read_embeddings(query_embeddings)
    documents = len(doc_ids)
    depth = min(top_k + remove_self_matches, documents)
    # Passages per document, on average: the first search is that much deeper, and one row
    # more, which tells whether a tie runs past the cut.
    first_depth = min(searcher.size, -(-depth * searcher.size // max(documents, 1)) + 1)
    query_ids = pa.array(query_ids, pa.string())
    recall = None
    if searcher.approximate and index_spec["recall_queries"]:
        searcher, recall = recall_against_exact(
            searcher, ExactSearcher(doc_embeddings), queries, query_ids, row_codes, doc_ids,
            depths=(depth, first_depth, top_k, remove_self_matches), spec=index_spec,
        )  # fmt: skip
    hits, searches = [], SearchLog()
    started = time.perf_counter()
    with LoggedProgress(desc="search", total=len(queries), unit="queries") as progress:
        for start in range(0, len(queries), batch_size):
            batch = queries[start : start + batch_size]
            hits += best_per_document(searcher, batch, row_codes, depth, first_depth, searches)
            progress.update(len(batch))
    seconds = time.perf_counter() - started
    one_by_one = time_each(
        lambda vector: best_per_document(searcher, vector[None], row_codes, depth, first_depth),
        queries[:latency_queries],
    )
    run, removed = build_run(query_ids, doc_ids, hits, top_k, remove_self_matches)
    short = short_queries(run, query_ids, doc_ids, top_k, remove_self_matches)
    search = searches.summary(searcher, first_depth)
    return run, _timing(seconds, query_ids.to_pylist(), removed, one_by_one, short) | {
        "search": search,
        "recall": recall,
    }


def recall_against_exact(
    searcher: Searcher,
    exact: ExactSearcher,
    queries: np.ndarray,
    query_ids: pa.Array,
    row_codes: np.ndarray,
    doc_ids: pa.Array,
    *,
    depths: tuple[int, int, int, bool],
    spec: dict,
) -> tuple[Searcher, dict]:
    """An approximate index's recall@top_k against exact search on ``recall_queries`` queries
    drawn with ``recall_seed``, both runs cut as the run is (``build_run``), and with
    ``target_recall`` the searcher that reaches it (``irflow.retrieval.recall.measure_recall``).
    ``depths``: (depth, first_depth, top_k, remove_self_matches) as ``dense_search`` has them."""
    depth, first_depth, top_k, remove_self_matches = depths
    sample = recall_sample(len(queries), spec)
    sample_ids = query_ids.take(pa.array(sample))

    def run_of(some: Searcher | ExactSearcher) -> pd.DataFrame:
        hits = best_per_document(some, queries[sample], row_codes, depth, first_depth)
        return build_run(sample_ids, doc_ids, hits, top_k, remove_self_matches)[0]

    return measure_recall(
        searcher, first_depth, run_of, run_of(exact), len(sample), spec, top_k=top_k
    )


# faiss returns k (score, row) pairs per query: searches go in query batches of at most this
# many pairs, so that a deep search (MaxP, ties) never asks for a (queries x k) block that
# does not fit in memory.
MAX_SEARCH_PAIRS = 1 << 24


@dataclass
class SearchLog:
    """What the searches of a run had to do beyond one search at the first depth."""

    deepened: set = field(default_factory=set)  # searched again with a larger k
    widened: dict = field(default_factory=dict)  # query -> widen level it needed
    short: set = field(default_factory=set)  # fewer than depth documents, all probing done
    deepest: int = 0

    def summary(self, searcher: Searcher, first_depth: int) -> dict:
        widest = max(self.widened.values(), default=0)
        return {
            "queries_searched_deeper": len(self.deepened),
            "queries_probed_wider": len(self.widened),
            "queries_short_after_search": len(self.short),
            "first_depth": first_depth,
            "deepest_k": max(self.deepest, first_depth),
            "settings": searcher.settings(first_depth, 0),
            "widest_settings": searcher.settings(max(self.deepest, first_depth), widest),
        }


def best_per_document(
    searcher: Searcher,
    queries: np.ndarray,
    row_docs: np.ndarray,
    depth: int,
    first_depth: int,
    searches: SearchLog | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query, the ``depth`` documents (``row_docs`` of index rows) whose best row scores
    highest, with that score, and any document tied with the last of them.

    Rows come from faiss best first, so a document's first row is its best, and documents in
    the order of their first rows are ranked by it. A query is searched again
    - twice as deep, up to every row, when its k rows name fewer than ``depth`` documents or
      end in a tie with the ``depth``-th (the tie is cut by doc id, as trec_eval cuts it, not
      in faiss' order), and
    - with twice the probes (``Searcher.can_widen``) when the index returned fewer than k rows:
      the probed IVF lists or HNSW's candidates ran out, which a larger k cannot change.
    A query that still names fewer than ``depth`` documents is counted in ``searches.short``.
    With one row per document this is the plain top ``depth``.
    """
    searches = searches or SearchLog()
    results: list = [None] * len(queries)
    todo = {(min(first_depth, searcher.size), 0): list(range(len(queries)))}
    while todo:
        (k, widen), pending = todo.popitem()
        pending = np.asarray(pending)
        step = max(1, MAX_SEARCH_PAIRS // k)
        for start in range(0, len(pending), step):
            some = pending[start : start + step]
            scores, rows = searcher.search(queries[some], k, widen)
            for query, score_row, row_row in zip(some, scores, rows):
                found = row_row >= 0
                docs, row_scores = row_docs[row_row[found]], score_row[found]
                _, first = np.unique(docs, return_index=True)
                first = np.sort(first)
                complete = found.all()
                if len(first) >= depth:
                    cut = row_scores[first[depth - 1]]
                    if not (complete and row_scores[-1] == cut and k < searcher.size):
                        best = first[row_scores[first] >= cut]
                        results[query] = (docs[best], row_scores[best])
                        continue
                    next_step = (min(2 * k, searcher.size), widen)
                elif complete and k < searcher.size:
                    next_step = (min(2 * k, searcher.size), widen)
                elif not complete and searcher.can_widen(k, widen):
                    next_step = (k, widen + 1)
                else:
                    searches.short.add(int(query))
                    results[query] = (docs[first], row_scores[first])
                    continue
                if next_step[0] > k:
                    searches.deepened.add(int(query))
                    searches.deepest = max(searches.deepest, next_step[0])
                else:
                    searches.widened[int(query)] = next_step[1]
                todo.setdefault(next_step, []).append(query)
    return results


def _timing(
    seconds: float,
    query_ids: list[str],
    removed: int,
    one_by_one: list[float],
    short: dict[str, int],
) -> dict:
    """Batch throughput, per-query latency of the first queries searched one at a time, and
    the queries that got fewer than min(top_k, corpus size) documents."""
    return {
        "search_seconds": seconds,
        "queries": len(query_ids),
        "ms_per_query_batched": 1000 * seconds / max(len(query_ids), 1),
        "self_matches_removed": removed,
        "short_queries": len(short),
        "short_query_examples": dict(list(short.items())[:20]),
        "latency": dict(zip(query_ids, one_by_one)),
    }


def exact_run(
    search: Callable[[int | None, int, int], list],
    query_ids: pa.Array,
    doc_ids: pa.Array,
    top_k: int,
    remove_self_matches: bool,
    batch_size: int,
    *,
    latency_queries: int,
) -> tuple[pd.DataFrame, dict]:
    """The run of an exact search and its timing facts. ``search(row, depth, batch_size)``
    returns per query (document rows, scores) for query ``row``, or for all when ``row`` is
    None; the first ``latency_queries`` are also searched one at a time for their latency."""
    depth = top_k + remove_self_matches
    started = time.perf_counter()
    hits = search(None, depth, batch_size)
    seconds = time.perf_counter() - started
    one_by_one = time_each(
        lambda row: search(row, depth, 1), range(min(latency_queries, len(query_ids)))
    )
    run, removed = build_run(query_ids, doc_ids, hits, top_k, remove_self_matches)
    short = short_queries(run, query_ids, doc_ids, top_k, remove_self_matches)
    return run, _timing(seconds, query_ids.to_pylist(), removed, one_by_one, short)


def bm25_search(
    index_folder: Path,
    queries_path: Path,
    spec: dict,
    top_k: int,
    remove_self_matches: bool,
    latency_queries: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """The run of BM25 variant ``spec`` from its index (irflow.retrieval.bm25, built once by
    the dataset's index_bm25 job), memory-mapped."""
    retriever = BM25Retriever.load(index_folder, spec)
    run, timing = search_texts(
        retriever, retriever.doc_ids, queries_path, top_k, remove_self_matches, latency_queries
    )
    return run, timing | term_matching_reason("BM25", timing["short_queries"])


def search_texts(
    retriever,
    doc_ids: pa.Array,
    queries_path: Path,
    top_k: int,
    remove_self_matches: bool,
    latency_queries: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """The run of a retriever that searches query texts (BM25, a user's own retriever,
    irflow.retrieval.custom): ``retriever.search(texts, depth)`` gives per query the rows of
    ``doc_ids`` it found and their scores; the first ``latency_queries`` are timed one by one."""
    queries = contracts.read_table(queries_path)
    query_ids = queries.column("query_id").combine_chunks()
    texts = queries.column("text").to_pylist()
    depth = top_k + remove_self_matches
    started = time.perf_counter()
    hits = retriever.search(texts, depth)
    seconds = time.perf_counter() - started
    one_by_one = time_each(lambda text: retriever.search([text], depth), texts[:latency_queries])
    run, removed = build_run(query_ids, doc_ids, hits, top_k, remove_self_matches)
    short = short_queries(run, query_ids, doc_ids, top_k, remove_self_matches)
    return run, _timing(seconds, query_ids.to_pylist(), removed, one_by_one, short)


def retrieve_judged(
    queries: pa.Table, qrels: pa.Table, retrieval: dict, files: dict, encoder=None
) -> pa.Table:
    """The run (``contracts.RUN``) of the ``queries`` judged in ``qrels``, for a split the
    workflow's retrieve jobs do not run (they retrieve the scored split's queries only): the
    negatives of another split, the quality control of a generated dataset's other split.

    ``retrieval`` holds the ``retriever`` spec, ``top_k``, ``remove_self_matches`` and, for a
    dense retriever, the ``index`` spec. ``files`` holds, for BM25, its ``bm25_index`` folder;
    for a dense retriever, the workflow's ``index``, the ``rows`` it was built from (document
    or passage embeddings) and, for passages, ``passages``: the queries are encoded by
    ``encoder`` (an ``irflow.encoding.models.Encoder`` of the retriever's model) and searched as
    ``dense_search`` searches the scored split's."""
    retriever = retrieval["retriever"]
    judged = queries.filter(pc.is_in(queries.column("query_id"), value_set=qrels["query_id"]))
    top_k, remove_self = retrieval["top_k"], retrieval["remove_self_matches"]
    if judged.num_rows == 0:
        return contracts.RUN.empty_table()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "queries.parquet"
        if retriever["type"] == "bm25":
            contracts.write_file(judged, path)
            run, _ = bm25_search(files["bm25_index"], path, retriever, top_k, remove_self)
        elif retriever["type"] == "dense":
            vectors = encoder.encode(
                judged.column("text").to_pylist(), encoder.spec["query_prompt"]
            )
            table = pa.table(
                {
                    "id": judged.column("query_id").combine_chunks(),
                    "vector": contracts.vector_array(vectors),
                },
                schema=contracts.embeddings_schema(vectors.shape[1]),
            )
            contracts.write_file(table, path)
            run, _ = dense_search(
                files.get("index"),
                retrieval["index"],
                files["rows"],
                path,
                top_k,
                remove_self,
                batch_size=retriever["query_batch_size"],
                latency_queries=0,
                passages=files.get("passages"),
            )
        else:
            raise ValueError(f"retriever type {retriever['type']!r} cannot retrieve another split")
    return pa.Table.from_pandas(run, contracts.RUN, preserve_index=False)
