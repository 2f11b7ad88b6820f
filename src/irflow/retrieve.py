"""retrieve: first-stage top-k runs, dense (faiss) or lexical (bm25s).

Dense search goes over query batches against the faiss index and keeps only the top-k per
query, so no query x corpus score matrix is ever held. BM25 is bm25s with every part of its
variant (scoring method, k1, b, stemmer, stopwords, fields) taken from config. A BM25 hit is a
document that shares at least one term with the query, whatever its score: ``robertson`` gives a
term found in more than half the documents idf 0 (bm25s clamps it there), and ``bm25l``/``bm25+``
give every document a positive score, so the score alone cannot say which documents matched.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
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
    row_docs = np.array(
        pq.read_table(rows_source, columns=[column]).column(column).to_pylist(), dtype=object
    )
    query_ids, queries = read_embeddings(query_embeddings)
    documents = len(pd.unique(row_docs)) if passages is not None else index.ntotal
    depth = min(top_k + remove_self_matches, documents)
    # Passages per document, on average: the first search is that much deeper.
    first_depth = min(index.ntotal, -(-depth * index.ntotal // max(documents, 1)))
    hits_ids, hits_scores = [], []
    started = time.perf_counter()
    for start in range(0, len(queries), batch_size):
        for doc_ids, scores in best_per_document(
            index, queries[start : start + batch_size], row_docs, depth, first_depth
        ):
            hits_ids.append(doc_ids)
            hits_scores.append(scores)
    seconds = time.perf_counter() - started
    one_by_one = time_each(
        lambda vector: best_per_document(index, vector[None], row_docs, depth, first_depth),
        queries[:latency_queries],
    )
    run, removed = build_run(query_ids, hits_ids, hits_scores, top_k, remove_self_matches)
    return run, _timing(seconds, query_ids, removed, one_by_one)


def best_per_document(
    index, queries: np.ndarray, row_docs: np.ndarray, depth: int, first_depth: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query, the ``depth`` documents whose best row scores highest, with that score.

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


class BM25Retriever:
    """bm25s over a corpus table, with the variant fully set by ``spec``."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.stemmer = None
        if spec["stemmer"]:
            import Stemmer

            self.stemmer = Stemmer.Stemmer(spec["stemmer"])

    def tokenize(self, texts: list[str], return_ids: bool = True):
        import bm25s

        return bm25s.tokenize(
            texts,
            stopwords=self.spec["stopwords"],
            stemmer=self.stemmer,
            return_ids=return_ids,
            show_progress=False,
        )

    def index(self, corpus_path: Path):
        import bm25s

        corpus = pq.read_table(corpus_path)
        self.doc_ids = corpus.column("doc_id").to_pylist()
        texts = corpus.column("text").to_pylist()
        if self.spec["fields"] == "title+text":
            titles = corpus.column("title").to_pylist()
            texts = contracts.document_texts(titles, texts)
        self.model = bm25s.BM25(
            method=self.spec["method"],
            k1=self.spec["k1"],
            b=self.spec["b"],
            delta=self.spec["delta"],
        )
        self.model.index(self.tokenize(texts), show_progress=False)
        return self

    def index_bytes(self) -> int:
        """Size of the sparse score matrix and vocabulary, as bm25s saves them."""
        arrays = self.model.scores.values()
        vocabulary = sum(len(token.encode()) + 8 for token in self.model.vocab_dict)
        return sum(a.nbytes for a in arrays if isinstance(a, np.ndarray)) + vocabulary

    def search(self, query_texts: list[str], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query, (rows, scores) of the documents that share a term with it: the ``depth``
        best by score, and any tied with the last of them; rows index the corpus table."""
        tokens = self.tokenize(query_texts, return_ids=False)
        return [self._top_matching(self.model.get_tokens_ids(query), depth) for query in tokens]

    def _top_matching(self, token_ids: list[int], depth: int) -> tuple[np.ndarray, np.ndarray]:
        # bm25s' score matrix (CSC, one column per term) holds an entry for each document that
        # contains the term, so the rows under the query's terms are the documents it matches.
        matrix = self.model.scores
        terms = np.unique(np.asarray(token_ids, dtype=np.int64))
        postings = zip(matrix["indptr"][terms], matrix["indptr"][terms + 1])
        matched = np.zeros(matrix["num_docs"], dtype=bool)
        for start, end in postings:
            matched[matrix["indices"][start:end]] = True
        rows = np.flatnonzero(matched)
        scores = self.model.get_scores_from_ids(token_ids)[rows]
        if len(rows) > depth:
            # Ties with the last kept stay: build_run cuts them in trec_eval's order.
            last_kept = np.partition(scores, len(scores) - depth)[len(scores) - depth]
            rows, scores = rows[scores >= last_kept], scores[scores >= last_kept]
        return rows, scores


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
    query_ids = queries.column("query_id").to_pylist()
    texts = queries.column("text").to_pylist()
    depth = top_k + remove_self_matches
    started = time.perf_counter()
    hits = retriever.search(texts, depth)
    seconds = time.perf_counter() - started
    one_by_one = time_each(lambda text: retriever.search([text], depth), texts[:latency_queries])
    doc_ids = np.array(retriever.doc_ids, dtype=object)
    run, removed = build_run(
        query_ids,
        [doc_ids[rows] for rows, _ in hits],
        [scores for _, scores in hits],
        top_k,
        remove_self_matches,
    )
    return run, _timing(seconds, query_ids, removed, one_by_one) | {
        "index_seconds": index_seconds,
        "index_bytes": retriever.index_bytes(),
    }
