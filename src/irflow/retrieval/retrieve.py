"""retrieve: first-stage top-k runs, dense (faiss) or lexical (bm25s, irflow.retrieval.bm25).

Dense search goes over query batches against the faiss index and keeps only the top-k per
query, so no query x corpus score matrix is ever held. BM25 searches the index its dataset's
index_bm25 job saved, memory-mapped; documents stay corpus rows (integers) until the run is
built, so the corpus is never held as Python strings.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from irflow.core import contracts
from irflow.core.errors import InputError
from irflow.core.progress import LoggedProgress
from irflow.core.settings_types import Index
from irflow.core.timing import time_each
from irflow.encoding.embed import read_embeddings
from irflow.retrieval.bm25 import BM25Retriever
from irflow.retrieval.exact_search import ExactSearcher, open_searcher
from irflow.retrieval.index import Searcher
from irflow.retrieval.recall import measure_recall, recall_sample
from irflow.retrieval.runs import (
    QuerySearcher,
    SearchRequest,
    build_run,
    search_depth,
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
    """Top-k documents per query of an embeddings file (``DenseSearcher``)."""
    searcher = DenseSearcher(index_path, index_spec, doc_embeddings, batch_size, passages=passages)
    request = SearchRequest(top_k, remove_self_matches, latency_queries)
    return searcher.search(contracts.read_table(query_embeddings), request)


class DenseSearcher:
    """A dense retriever's search of its document (or passage) vectors ``doc_embeddings``,
    in its faiss index, or with no index file (``index_path`` None) exactly, in shards. With
    ``passages`` (the table the rows were embedded from, in the same order) a document scores
    its best passage (MaxP). It searches a table of query vectors (``id``, ``vector``: the
    embed job's) or of query texts (``query_id``, ``text``), which ``encode`` (texts ->
    vectors, the retriever's own model) turns into vectors."""

    def __init__(
        self,
        index_path: Path | None,
        index_spec: dict,
        doc_embeddings: Path,
        batch_size: int,
        *,
        passages: Path | None = None,
        encode: Callable[[list[str]], np.ndarray] | None = None,
    ):
        # The index's config block, typed once for the searcher and its recall measure.
        self.index_spec, self.doc_embeddings = Index.model_validate(index_spec), doc_embeddings
        self.batch_size = batch_size
        self.encode, self.passages = encode, passages
        # The vectors of the query texts it encoded, by query id (score_pairs reuses them).
        self.encoded: dict[str, np.ndarray] = {}
        self.searcher = open_searcher(index_path, doc_embeddings, self.index_spec)
        rows_source, column = (doc_embeddings, "id") if passages is None else (passages, "doc_id")
        # Each index row's document as an integer code into the distinct doc ids.
        row_docs = contracts.read_table(rows_source, columns=[column]).column(column)
        row_docs = row_docs.combine_chunks().dictionary_encode()
        self.row_codes, self.doc_ids = row_docs.indices.to_numpy(), row_docs.dictionary

    def query_vectors(self, queries: pa.Table) -> tuple[pa.Array, np.ndarray]:
        """The queries' ids and vectors: as given, or their texts encoded."""
        if "vector" not in queries.column_names:
            if self.encode is None:
                raise ValueError("query texts to search, but no model to encode them")
            vectors = np.asarray(self.encode(queries.column("text").to_pylist()))
            ids = queries.column("query_id").combine_chunks()
            self.encoded |= dict(zip(ids.to_pylist(), vectors))
            queries = pa.table(
                {"id": ids, "vector": contracts.vector_array(vectors)},
                schema=contracts.embeddings_schema(vectors.shape[1]),
            )
        matrix = contracts.vector_matrix(queries.column("vector").combine_chunks())
        width = contracts.read_schema(self.doc_embeddings).field("vector").type
        if matrix.shape[1] != width.list_size:
            # A dual encoder's two models (irflow.workflow.families.dense) must agree.
            raise InputError(
                self.doc_embeddings,
                f"the document vectors have {width.list_size} dimensions and the query vectors "
                f"{matrix.shape[1]}: a dense retriever's query_model must give vectors of its "
                "model's size",
                field="vector",
            )
        ids = pa.array(queries.column("id").to_pylist(), pa.string())
        return ids, np.ascontiguousarray(matrix, dtype=np.float32)

    # It scores any (query, document) pair (``score_pairs``).
    scores_pairs = True

    def score_pairs(
        self, queries: pa.Table, pairs: list[tuple[str, str]]
    ) -> dict[tuple[str, str], float]:
        """Each (query, document) pair's score as the search gives it: the inner product of
        the query's vector (as encoded for the search) and the document's (best passage's)."""
        wanted = {query_id for query_id, _ in pairs}
        missing = wanted - self.encoded.keys()
        if missing:
            chosen = pc.is_in(queries.column("query_id"), pa.array(sorted(missing), pa.string()))
            self.query_vectors(queries.filter(chosen))
        return best_row_scores(self.encoded, self.doc_embeddings, self.passages, pairs)

    def search(self, queries: pa.Table, request: SearchRequest) -> tuple[pd.DataFrame, dict]:
        """The run of ``queries`` and its timing, search and recall facts."""
        query_ids, vectors = self.query_vectors(queries)
        searcher, row_codes, doc_ids = self.searcher, self.row_codes, self.doc_ids
        top_k, remove_self_matches = request.top_k, request.remove_self_matches
        documents = len(doc_ids)
        depth = min(request.depth, documents)
        # Passages per document, on average: the first search is that much deeper, and one row
        # more, which tells whether a tie runs past the cut.
        first_depth = min(searcher.size, -(-depth * searcher.size // max(documents, 1)) + 1)
        recall = None
        if searcher.approximate and self.index_spec.recall_queries:
            searcher, recall = recall_against_exact(
                searcher, ExactSearcher(self.doc_embeddings), vectors, query_ids, row_codes,
                doc_ids, depths=(depth, first_depth, top_k, remove_self_matches),
                spec=self.index_spec,
            )  # fmt: skip
        hits, searches = [], SearchLog()
        started = time.perf_counter()
        with LoggedProgress(desc="search", total=len(vectors), unit="queries") as progress:
            for start in range(0, len(vectors), self.batch_size):
                batch = vectors[start : start + self.batch_size]
                hits += best_per_document(searcher, batch, row_codes, depth, first_depth, searches)
                progress.update(len(batch))
        seconds = time.perf_counter() - started
        one_by_one = time_each(
            lambda vector: best_per_document(searcher, vector[None], row_codes, depth, first_depth),
            vectors[: request.latency_queries],
        )
        run, removed = build_run(query_ids, doc_ids, hits, top_k, remove_self_matches)
        short = short_queries(run, query_ids, doc_ids, top_k, remove_self_matches)
        search = searches.summary(searcher, first_depth)
        timing = _timing(seconds, query_ids.to_pylist(), removed, one_by_one, short)
        return run, timing | {"search": search, "recall": recall}


def best_row_scores(
    query_vectors: dict[str, np.ndarray],
    doc_embeddings: Path,
    passages: Path | None,
    pairs: list[tuple[str, str]],
) -> dict[tuple[str, str], float]:
    """The inner product of each (query id, doc id) pair's vectors, of ``query_vectors`` and
    of the rows of ``doc_embeddings``: with ``passages``, a document's best passage (MaxP, as
    the search scores it)."""
    doc_ids = {doc_id for _, doc_id in pairs}
    if passages is not None:
        table = contracts.read_table(
            passages,
            columns=["passage_id", "doc_id"],
            filters=pc.field("doc_id").isin(pa.array(sorted(doc_ids), pa.string())),
        )
        doc_of = dict(zip(*(table.column(c).to_pylist() for c in ("passage_id", "doc_id"))))
    else:
        doc_of = {doc_id: doc_id for doc_id in doc_ids}
    row_ids, row_matrix = read_embeddings(doc_embeddings, doc_of)
    rows_of: dict[str, list[int]] = {}
    for i, row_id in enumerate(row_ids):
        rows_of.setdefault(doc_of[row_id], []).append(i)
    return {
        (query_id, doc_id): float(np.max(row_matrix[rows_of[doc_id]] @ query_vectors[query_id]))
        for query_id, doc_id in pairs
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
    spec: Index,
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
    depth = search_depth(top_k, remove_self_matches)
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
    request = SearchRequest(top_k, remove_self_matches, latency_queries)
    return bm25_searcher(index_folder, spec).search(contracts.read_table(queries_path), request)


def bm25_searcher(index_folder: Path, spec: dict) -> TextSearcher:
    """BM25 variant ``spec``'s searcher of the index its index_bm25 job saved."""
    retriever = BM25Retriever.load(index_folder, spec)
    return TextSearcher(retriever, retriever.doc_ids, reason="BM25")


def search_texts(
    retriever,
    doc_ids: pa.Array,
    queries_path: Path,
    top_k: int,
    remove_self_matches: bool,
    latency_queries: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """The run of the queries of ``queries_path`` by a retriever of texts (``TextSearcher``)."""
    request = SearchRequest(top_k, remove_self_matches, latency_queries)
    return TextSearcher(retriever, doc_ids).search(contracts.read_table(queries_path), request)


@dataclass
class TextSearcher:
    """The search of a retriever of query texts (BM25, a user's own retriever,
    irflow.retrieval.custom): ``retriever.search(texts, depth)`` gives per query the rows of
    ``doc_ids`` it found and their scores. ``facts`` join every search's timing; with
    ``reason``, the name of a term-matching retriever, short queries are explained as such
    (``term_matching_reason``)."""

    retriever: object
    doc_ids: pa.Array
    facts: dict = field(default_factory=dict)
    reason: str | None = None

    def search(self, queries: pa.Table, request: SearchRequest) -> tuple[pd.DataFrame, dict]:
        """The run of ``queries`` (``query_id``, ``text``); the first ``latency_queries`` are
        also timed one by one."""
        retriever, doc_ids = self.retriever, self.doc_ids
        query_ids = queries.column("query_id").combine_chunks()
        texts = queries.column("text").to_pylist()
        depth = request.depth
        started = time.perf_counter()
        hits = retriever.search(texts, depth)
        seconds = time.perf_counter() - started
        one_by_one = time_each(
            lambda text: retriever.search([text], depth), texts[: request.latency_queries]
        )
        top_k, remove_self_matches = request.top_k, request.remove_self_matches
        run, removed = build_run(query_ids, doc_ids, hits, top_k, remove_self_matches)
        short = short_queries(run, query_ids, doc_ids, top_k, remove_self_matches)
        timing = _timing(seconds, query_ids.to_pylist(), removed, one_by_one, short)
        if self.reason:
            timing |= term_matching_reason(self.reason, timing["short_queries"])
        return run, timing | self.facts

    @property
    def scores_pairs(self) -> bool:
        """Whether it scores any (query, document) pair (``score_pairs``): BM25 does."""
        return callable(getattr(self.retriever, "score_pairs", None))

    def score_pairs(
        self, queries: pa.Table, pairs: list[tuple[str, str]]
    ) -> dict[tuple[str, str], float]:
        """Each (query id, doc id) pair's score, the queries' texts from ``queries``."""
        texts = dict(zip(queries["query_id"].to_pylist(), queries["text"].to_pylist()))
        return self.retriever.score_pairs(texts, pairs)


def retrieve_judged(
    queries: pa.Table, qrels: pa.Table, searcher: QuerySearcher, request: SearchRequest
) -> pa.Table:
    """The run (``contracts.RUN``) of the ``queries`` judged in ``qrels``, for a split the
    workflow's retrieve jobs do not run (they retrieve the scored split's queries only): the
    negatives of another split, the quality control of a generated dataset's other split."""
    judged = queries.filter(pc.is_in(queries.column("query_id"), value_set=qrels["query_id"]))
    if judged.num_rows == 0:
        return contracts.RUN.empty_table()
    run, _ = searcher.search(judged, request)
    return pa.Table.from_pandas(run, contracts.RUN, preserve_index=False)
