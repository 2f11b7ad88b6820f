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
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from irflow.core import contracts
from irflow.core.timing import time_each
from irflow.encoding.embed import read_embeddings
from irflow.retrieval.exact_search import ExactSearcher, open_searcher
from irflow.retrieval.index import Searcher
from irflow.retrieval.recall import measure_recall, recall_sample
from irflow.retrieval.runs import (
    build_run,
    short_queries,
    term_matching_reason,
    top_with_ties,
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
    row_docs = pq.read_table(rows_source, columns=[column]).column(column)
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
    for start in range(0, len(queries), batch_size):
        batch = queries[start : start + batch_size]
        hits += best_per_document(searcher, batch, row_codes, depth, first_depth, searches)
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


# The words bm25s' default pattern, r"(?u)\b\w\w+\b", finds: every maximal run of two or more
# word characters (leftmost-first matching cannot start a match inside a run). Without the
# boundary checks the regex, most of tokenising, runs about a quarter faster.
BM25S_WORDS = r"\w\w+"

# Documents are read and tokenised this many at a time: only their token ids are kept, never
# the whole corpus as Python strings.
BM25_BATCH_ROWS = 4096


def _document_postings(token_ids: list[list[int]], vocabulary: int) -> tuple:
    """Each document's distinct terms (int32, ascending) and their counts (float32), document
    after document; and per document its length in tokens and its number of distinct terms."""
    lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
    tokens = np.fromiter(chain.from_iterable(token_ids), dtype=np.int64, count=lengths.sum())
    documents = np.repeat(np.arange(len(token_ids)), lengths)
    vocabulary = max(vocabulary, 1)
    pairs, counts = np.unique(documents * vocabulary + tokens, return_counts=True)
    distinct = np.bincount(pairs // vocabulary, minlength=len(token_ids))
    terms = (pairs % vocabulary).astype(np.int32)
    return terms, counts.astype(np.float32), lengths, distinct


@contextmanager
def _without_cyclic_gc():
    """Building a BM25 index makes millions of small objects (each batch's token lists) and no
    reference cycles, so the cyclic collector's passes over them find nothing. (It took a fifth
    of SciFact's indexing time when every document's token array was kept.)"""
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
        """bm25s' index of the corpus, bit for bit, built in two streamed passes so that memory
        holds the score matrix and one batch, never every document's tokens.

        Pass one tokenises the corpus batch by batch and writes each document's postings (its
        distinct terms and their counts) to two temporary files (``tempfile``'s folder:
        ``TMPDIR``, 8 bytes a posting). Pass two reads them back in document order, scores
        each batch with bm25s' own idf and term-frequency functions, and places the scores
        into bm25s' sparse matrix (CSC: a column per term, documents ascending in it) by a
        counting sort over the document frequencies, so the matrix is the only full-size array.
        """
        import bm25s

        self.model = bm25s.BM25(
            method=self.spec["method"],
            k1=self.spec["k1"],
            b=self.spec["b"],
            delta=self.spec["delta"],
        )
        with tempfile.TemporaryFile() as terms, tempfile.TemporaryFile() as counts:
            lengths, distinct, frequencies = self._write_postings(corpus_path, terms, counts)
            terms.seek(0)
            counts.seek(0)
            self._score_postings(terms, counts, lengths, distinct, frequencies)
        self.model.vocab_dict = self.tokenizer.get_vocab_dict()
        # One Arrow array: ids become strings only for the rows a run keeps.
        doc_ids = pq.read_table(corpus_path, columns=["doc_id"]).column("doc_id")
        self.doc_ids = doc_ids.combine_chunks()
        return self

    def _write_postings(self, corpus_path: Path, terms, counts) -> tuple:
        """Pass one: each document's postings, in corpus order, to the files ``terms`` (int32
        term ids) and ``counts`` (float32, bm25s' type for term frequencies). Returns each
        document's length in tokens and number of distinct terms, and each term's document
        frequency."""
        columns = ["title", "text"] if self.spec["fields"] == "title+text" else ["text"]
        lengths, distinct, frequencies = [], [], np.zeros(0, dtype=np.int64)
        for batch in contracts.stream_batches(corpus_path, BM25_BATCH_ROWS, columns):
            texts = batch.column("text").to_pylist()
            if self.spec["fields"] == "title+text":
                texts = contracts.document_texts(batch.column("title").to_pylist(), texts)
            token_ids = self._token_ids(texts, update_vocab=True)
            vocabulary = len(self.tokenizer.get_vocab_dict())
            batch_terms, batch_counts, batch_lengths, batch_distinct = _document_postings(
                token_ids, vocabulary
            )
            batch_terms.tofile(terms)
            batch_counts.tofile(counts)
            lengths.append(batch_lengths)
            distinct.append(batch_distinct)
            grown = np.bincount(batch_terms, minlength=vocabulary)
            grown[: len(frequencies)] += frequencies
            frequencies = grown
        vocabulary = len(self.tokenizer.get_vocab_dict())
        frequencies = np.pad(frequencies, (0, vocabulary - len(frequencies)))
        empty = np.zeros(0, dtype=np.int64)
        return np.concatenate([empty, *lengths]), np.concatenate([empty, *distinct]), frequencies

    def _score_postings(self, terms, counts, lengths, distinct, frequencies) -> None:
        """Pass two: bm25s' ``build_index_from_ids`` from the postings files, into
        ``self.model``'s score matrix (and ``nonoccurrence_array`` for bm25l, bm25+)."""
        from bm25s import scoring

        model = self.model
        documents = len(lengths)
        average_length = lengths.mean()  # as bm25s: the mean of an int64 array of lengths
        by_term = dict(enumerate(frequencies.tolist()))
        idf_of = scoring._select_idf_scorer(model.idf_method)
        term_frequency_part = scoring._select_tfc_scorer(model.method)
        idf = scoring._build_idf_array(by_term, documents, idf_of, dtype=model.dtype)
        model.nonoccurrence_array = None
        if model.method in model.methods_requiring_nonoccurrence:
            model.nonoccurrence_array = scoring._build_nonoccurrence_array(
                by_term, documents, idf_of, term_frequency_part, average_length,
                average_length, model.k1, model.b, model.delta, dtype=model.dtype,
            )  # fmt: skip
        indptr = np.zeros(len(frequencies) + 1, dtype=np.int64)
        np.cumsum(frequencies, out=indptr[1:])
        data = np.empty(indptr[-1], dtype=model.dtype)
        indices = np.empty(indptr[-1], dtype=model.int_dtype)
        next_free = indptr[:-1].copy()
        # A term with a posting that scores 0 or less: robertson's idf 0, atire's for a term in
        # every document. Without such terms in a query, and with no score for absent terms
        # (bm25l, bm25+ have one), a document matches exactly when it scores above 0.
        self.zero_scoring_terms = np.zeros(len(frequencies), dtype=bool)
        for first in range(0, documents, BM25_BATCH_ROWS):
            rows = slice(first, first + BM25_BATCH_ROWS)
            size = int(distinct[rows].sum())
            batch_terms = np.fromfile(terms, dtype=np.int32, count=size)
            tf = np.fromfile(counts, dtype=np.float32, count=size)
            # bm25s scores a document's postings with its length as a Python int and the
            # average as a NumPy float64: the same float64 operations as on these arrays.
            scores = idf[batch_terms] * term_frequency_part(
                tf_array=tf,
                l_d=np.repeat(lengths[rows], distinct[rows]),
                l_avg=average_length,
                k1=model.k1,
                b=model.b,
                delta=model.delta,
            )
            if model.nonoccurrence_array is not None:
                scores -= model.nonoccurrence_array[batch_terms]
            scores = scores.astype(model.dtype)
            self.zero_scoring_terms[batch_terms[scores <= 0]] = True
            # Counting sort: each posting goes to its term's next free place; a stable sort by
            # term keeps this batch's documents ascending within each term.
            order = np.argsort(batch_terms, kind="stable")
            in_batch, first_place, postings = np.unique(
                batch_terms[order], return_index=True, return_counts=True
            )
            places = np.repeat(next_free[in_batch] - first_place, postings) + np.arange(size)
            next_free[in_batch] += postings
            data[places] = scores[order]
            batch_documents = np.arange(first, first + len(lengths[rows]), dtype=indices.dtype)
            indices[places] = np.repeat(batch_documents, distinct[rows])[order]
        model.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": documents}

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
        return top_with_ties(rows, scores[rows], depth)

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
    run, timing = search_texts(
        retriever, retriever.doc_ids, queries_path, top_k, remove_self_matches, latency_queries
    )
    return run, timing | {
        "index_seconds": index_seconds,
        "index_bytes": retriever.index_bytes(),
    } | term_matching_reason("BM25", timing["short_queries"])


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
    queries = pq.read_table(queries_path)
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
    dense retriever, the ``index`` spec. ``files`` holds, for BM25, the filtered ``corpus``;
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
            pq.write_table(judged, path)
            run, _ = bm25_search(files["corpus"], path, retriever, top_k, remove_self)
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
            pq.write_table(table, path)
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
