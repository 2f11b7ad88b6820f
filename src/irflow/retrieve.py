"""retrieve: first-stage top-k runs, dense (faiss) or lexical (bm25s).

Dense search goes over query batches against the faiss index and keeps only the top-k per
query, so no query x corpus score matrix is ever held. BM25 is bm25s with every part of its
variant (scoring method, k1, b, stemmer, stopwords, fields) taken from config. A BM25 hit is a
document that shares at least one term with the query, whatever its score: ``robertson`` gives a
term found in more than half the documents idf 0 (bm25s clamps it there), and ``bm25l``/``bm25+``
give every document a positive score, so the score alone cannot say which documents matched.
The corpus is read and tokenised in record batches, and documents stay corpus rows (integers)
until the run is built, so the corpus is never held as Python strings.
"""

from __future__ import annotations

import gc
import logging
import time
from array import array
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from irflow import contracts
from irflow.cost import time_each
from irflow.embed import read_embeddings
from irflow.index import load_index
from irflow.runs import build_run

log = logging.getLogger(__name__)


def dense_search(
    index_path: Path,
    index_spec: dict,
    doc_embeddings: Path,
    query_embeddings: Path,
    top_k: int,
    remove_self_matches: bool,
    batch_size: int,
    latency_queries: int,
    passages: Path | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Top-k documents per query. With ``passages`` (the table the index rows were embedded
    from, in the same order) a document scores its best passage (MaxP)."""
    index = load_index(index_path, index_spec)
    rows_source, column = (doc_embeddings, "id") if passages is None else (passages, "doc_id")
    # Each index row's document as an integer code into the distinct doc ids.
    row_docs = pq.read_table(rows_source, columns=[column]).column(column)
    row_docs = row_docs.combine_chunks().dictionary_encode()
    row_codes, doc_ids = row_docs.indices.to_numpy(), row_docs.dictionary
    query_ids, queries = read_embeddings(query_embeddings)
    documents = len(doc_ids)
    depth = min(top_k + remove_self_matches, documents)
    # Passages per document, on average: the first search is that much deeper.
    first_depth = min(index.ntotal, -(-depth * index.ntotal // max(documents, 1)))
    hits = []
    started = time.perf_counter()
    for start in range(0, len(queries), batch_size):
        hits += best_per_document(
            index, queries[start : start + batch_size], row_codes, depth, first_depth
        )
    seconds = time.perf_counter() - started
    one_by_one = time_each(
        lambda vector: best_per_document(index, vector[None], row_codes, depth, first_depth),
        queries[:latency_queries],
    )
    run, removed = build_run(
        pa.array(query_ids, pa.string()), doc_ids, hits, top_k, remove_self_matches
    )
    return run, _timing(seconds, query_ids, removed, one_by_one)


def best_per_document(
    index, queries: np.ndarray, row_docs: np.ndarray, depth: int, first_depth: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query, the ``depth`` documents (``row_docs`` of index rows) whose best row scores
    highest, with that score.

    Rows come from faiss best first, so a document's first row is its best, and documents in
    the order of their first rows are ranked by it. A query whose ``first_depth`` rows name
    fewer than ``depth`` documents is searched again twice as deep, up to every row. With one
    row per document this is the plain top ``depth``.
    """
    results: list = [None] * len(queries)
    pending, k = np.arange(len(queries)), min(first_depth, index.ntotal)
    while len(pending):
        scores, rows = index.search(queries[pending], k)
        deeper = []
        for query, score_row, row_row in zip(pending, scores, rows):
            found = row_row >= 0  # HNSW may return fewer than k rows
            docs, row_scores = row_docs[row_row[found]], score_row[found]
            _, first = np.unique(docs, return_index=True)
            if len(first) < depth and k < index.ntotal:
                deeper.append(query)
                continue
            best = np.sort(first)[:depth]
            results[query] = (docs[best], row_scores[best])
        pending, k = np.array(deeper, dtype=int), min(2 * k, index.ntotal)
    return results


def _timing(seconds: float, query_ids: list[str], removed: int, one_by_one: list[float]) -> dict:
    """Batch throughput, and per-query latency of the first queries searched one at a time."""
    return {
        "search_seconds": seconds,
        "queries": len(query_ids),
        "ms_per_query_batched": 1000 * seconds / max(len(query_ids), 1),
        "self_matches_removed": removed,
        "latency": dict(zip(query_ids, one_by_one)),
    }


array_of_ids = partial(array, "I")

# The words bm25s' default pattern, r"(?u)\b\w\w+\b", finds: every maximal run of two or more
# word characters (leftmost-first matching cannot start a match inside a run). Without the
# boundary checks the regex, most of tokenising, runs about a quarter faster.
BM25S_WORDS = r"\w\w+"

# Documents are read and tokenised this many at a time: only their token ids are kept, never
# the whole corpus as Python strings.
BM25_BATCH_ROWS = 4096


@contextmanager
def _without_cyclic_gc():
    """Building a BM25 index makes millions of small objects and no reference cycles; the
    cyclic collector would walk every document's token array again and again (a fifth of
    SciFact's indexing time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class BM25Retriever:
    """bm25s over a corpus table, with the variant fully set by ``spec``."""

    def __init__(self, spec: dict):
        from bm25s.tokenization import Tokenizer

        self.spec = spec
        stemmer = None
        if spec["stemmer"]:
            import Stemmer

            stemmer = Stemmer.Stemmer(spec["stemmer"])
        # bm25s.tokenize's splitting, lowercasing, stopwords and stemming, with one vocabulary
        # kept across batches and then used for the queries. allow_empty=False: an empty
        # document has no tokens, as with bm25s.tokenize, rather than an "" token.
        self.tokenizer = Tokenizer(
            splitter=BM25S_WORDS, stopwords=spec["stopwords"], stemmer=stemmer
        )

    def _token_ids(self, texts: list[str], update_vocab: bool) -> list[list[int]]:
        return self.tokenizer.tokenize(
            texts, update_vocab=update_vocab, show_progress=False, allow_empty=False
        )

    @_without_cyclic_gc()
    def index(self, corpus_path: Path):
        import bm25s

        columns = ["title", "text"] if self.spec["fields"] == "title+text" else ["text"]
        token_ids = []
        for batch in contracts.stream_batches(corpus_path, BM25_BATCH_ROWS, columns):
            texts = batch.column("text").to_pylist()
            if self.spec["fields"] == "title+text":
                texts = contracts.document_texts(batch.column("title").to_pylist(), texts)
            # 4 bytes a token in an array, where a list holds a pointer and an int object.
            token_ids += map(array_of_ids, self._token_ids(texts, update_vocab=True))
        # One Arrow array: ids become strings only for the rows a run keeps.
        doc_ids = pq.read_table(corpus_path, columns=["doc_id"]).column("doc_id")
        self.doc_ids = doc_ids.combine_chunks()
        self.model = bm25s.BM25(
            method=self.spec["method"],
            k1=self.spec["k1"],
            b=self.spec["b"],
            delta=self.spec["delta"],
        )
        self.model.index((token_ids, self.tokenizer.get_vocab_dict()), show_progress=False)
        # A term with a posting that scores 0 or less: robertson's idf 0, atire's for a term in
        # every document. Without such terms in a query, and with no score for absent terms
        # (bm25l, bm25+ have one), a document matches exactly when it scores above 0.
        matrix = self.model.scores
        zero_postings = np.flatnonzero(matrix["data"] <= 0)
        their_terms = np.searchsorted(matrix["indptr"], zero_postings, side="right") - 1
        self.zero_scoring_terms = np.bincount(their_terms, minlength=len(matrix["indptr"]) - 1) > 0
        return self

    def index_bytes(self) -> int:
        """Size of the sparse score matrix and vocabulary, as bm25s saves them."""
        arrays = self.model.scores.values()
        tokens = self.model.vocab_dict
        vocabulary = len("".join(tokens).encode()) + 8 * len(tokens)
        return sum(a.nbytes for a in arrays if isinstance(a, np.ndarray)) + vocabulary

    def search(self, query_texts: list[str], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query, (rows, scores) of the documents that share a term with it: the ``depth``
        best by score, and any tied with the last of them; rows index the corpus table."""
        token_ids = self._token_ids(query_texts, update_vocab=False)
        return [self._top_matching(query, depth) for query in token_ids]

    def _top_matching(self, token_ids: list[int], depth: int) -> tuple[np.ndarray, np.ndarray]:
        scores, posting_docs = self._scores(token_ids)
        terms = np.unique(np.asarray(token_ids, dtype=np.int64))
        if self.model.nonoccurrence_array is None and not self.zero_scoring_terms[terms].any():
            rows = np.flatnonzero(scores > 0)
        else:
            matched = np.zeros(len(scores), dtype=bool)
            matched[posting_docs] = True
            rows = np.flatnonzero(matched)
        scores = scores[rows]
        if len(rows) > depth:
            # Ties with the last kept stay: the run is cut in trec_eval's order.
            last_kept = np.partition(scores, len(scores) - depth)[len(scores) - depth]
            rows, scores = rows[scores >= last_kept], scores[scores >= last_kept]
        return rows, scores

    def _scores(self, token_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """bm25s' ``get_scores_from_ids``, bit for bit, and the documents of the postings read
        (bm25s' score matrix, CSC with one column per term, has an entry for each document
        holding the term). bm25s adds each token's postings in turn with ``np.add.at``; one
        ``np.add.at`` over all of them, in token order, adds in the same order in float32
        with one call."""
        matrix = self.model.scores
        tokens = np.asarray(token_ids, dtype=np.int64)
        indptr, indices, data = matrix["indptr"], matrix["indices"], matrix["data"]
        # Each token's postings are one contiguous slice: copying slices beats gathering
        # postings one index at a time.
        spans = [
            slice(start, end)
            for start, end in zip(indptr[tokens].tolist(), indptr[tokens + 1].tolist())
        ]
        posting_docs = np.concatenate([indices[span] for span in spans] or [indices[:0]])
        scores = np.zeros(matrix["num_docs"], dtype=self.model.dtype)
        np.add.at(
            scores, posting_docs, np.concatenate([data[span] for span in spans] or [data[:0]])
        )
        if self.model.nonoccurrence_array is not None:  # bm25l, bm25+: absent terms score too
            scores += self.model.nonoccurrence_array[tokens].sum()
        return scores, posting_docs


def bm25_search(
    corpus_path: Path,
    queries_path: Path,
    spec: dict,
    top_k: int,
    remove_self_matches: bool,
    latency_queries: int = 0,
) -> tuple[pd.DataFrame, dict]:
    started = time.perf_counter()
    retriever = BM25Retriever(spec).index(corpus_path)
    index_seconds = time.perf_counter() - started
    queries = pq.read_table(queries_path)
    query_ids = queries.column("query_id").combine_chunks()
    texts = queries.column("text").to_pylist()
    depth = top_k + remove_self_matches
    started = time.perf_counter()
    hits = retriever.search(texts, depth)
    seconds = time.perf_counter() - started
    one_by_one = time_each(lambda text: retriever.search([text], depth), texts[:latency_queries])
    run, removed = build_run(query_ids, retriever.doc_ids, hits, top_k, remove_self_matches)
    return run, _timing(seconds, query_ids.to_pylist(), removed, one_by_one) | {
        "index_seconds": index_seconds,
        "index_bytes": retriever.index_bytes(),
    }
