"""sparse: learned sparse retrieval (SPLADE and its kin) through sentence-transformers'
``SparseEncoder``.

Documents and queries are encoded into vocabulary-sized vectors that are mostly zeros; each is
stored as its non-zero term ids and weights (``contracts.SPARSE``: one row per document, lists of
int32 ids and float32 weights), so a corpus costs its non-zeros, never rows x vocabulary.

Encoding is resumable and sharded exactly as dense embedding is (``irflow.encoding.encode_parts``).

Retrieval is exact: the document vectors form a CSR matrix (documents x vocabulary) and a batch
of queries is scored by one sparse matrix product with its transpose; a document scores only
when it shares a non-zero term with the query, so, as with BM25, the hits of a query are the
documents that share a term with it. Query batches are bounded so that a batch's score matrix
holds at most ``MAX_SCORE_ENTRIES`` entries, whatever the corpus size. Weights are stored as
float32 and summed in float64. Ties at the cut are kept
and ``build_run`` cuts them by doc id, as trec_eval orders them.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import scipy.sparse as sp

from irflow.core import contracts
from irflow.encoding.encode_parts import SideEncoder
from irflow.retrieval.retrieve import exact_run
from irflow.retrieval.runs import term_matching_reason, top_with_ties

log = logging.getLogger(__name__)

# Entries of one query batch's score matrix (queries x documents) at most: 16 M float64 scores
# and their int32 columns, about 192 MiB, whatever the corpus size.
MAX_SCORE_ENTRIES = 1 << 24


class SparseModel(SideEncoder):
    """A loaded ``SparseEncoder`` with its ``models`` entry and provenance."""

    FACTORY = "SparseEncoder"

    def encode(self, texts: list[str], side: str) -> sp.csr_matrix:
        """float32 CSR matrix (texts x vocabulary). Queries go through ``encode_query`` and
        documents through ``encode_document``: an inference-free SPLADE model routes them to
        different modules."""
        tensor = self.encode_side(texts, side, convert_to_sparse_tensor=True).coalesce()
        rows, columns = tensor.indices().cpu().numpy()
        values = tensor.values().float().cpu().numpy()
        matrix = sp.csr_matrix((values, (rows, columns)), shape=tuple(tensor.shape))
        matrix.eliminate_zeros()
        matrix.sort_indices()
        return matrix

    def table(self, ids: list[str], matrix: sp.csr_matrix) -> pa.Table:
        return sparse_table(ids, matrix)


def sparse_table(ids: list[str], matrix: sp.csr_matrix) -> pa.Table:
    """Rows of ``matrix`` in the ``contracts.SPARSE`` layout."""
    offsets = pa.array(matrix.indptr, pa.int32())
    indices = pa.ListArray.from_arrays(offsets, pa.array(matrix.indices, pa.int32()))
    values = pa.ListArray.from_arrays(offsets, pa.array(matrix.data, pa.float32()))
    return pa.Table.from_arrays(
        [pa.array(ids, pa.string()), indices, values], schema=contracts.SPARSE
    )


def read_sparse(
    source: Path | pa.Table, vocabulary: int | None = None
) -> tuple[pa.Array, sp.csr_matrix]:
    """(ids, float32 CSR matrix) of a ``contracts.SPARSE`` file, or such a table in memory;
    ``vocabulary`` columns (default: the largest term id + 1)."""
    table = contracts.table_of(source)
    indices = table.column("indices").combine_chunks()
    values = table.column("values").combine_chunks()
    offsets = indices.offsets.to_numpy().astype(np.int64)
    offsets -= offsets[0]
    columns = indices.flatten().to_numpy().astype(np.int32)
    weights = values.flatten().to_numpy().astype(np.float32)
    width = vocabulary if vocabulary is not None else int(columns.max(initial=-1)) + 1
    matrix = sp.csr_matrix((weights, columns, offsets), shape=(len(offsets) - 1, width))
    return table.column("id").combine_chunks(), matrix


class SparseIndex:
    """The documents' vectors as a term x document CSR matrix: a query batch's scores are one
    sparse product with it."""

    def __init__(self, documents: sp.csr_matrix):
        # float64, so that a score is the exact dot product up to float64 rounding: summed in
        # float32, the products of a long query differed in the sixth digit (a tiny random
        # SPLADE, 25,000 terms a query), enough to reorder close documents. It costs 12 bytes a
        # posting instead of 8.
        self.by_term = documents.T.tocsr().astype(np.float64)
        self.documents = documents.shape[0]

    def index_bytes(self) -> int:
        return self.by_term.data.nbytes + self.by_term.indices.nbytes + self.by_term.indptr.nbytes

    def search(self, queries: sp.csr_matrix, depth: int, batch_size: int) -> list:
        """Per query, (document rows, scores) of the documents sharing a term with it: the
        ``depth`` best, and any tied with the last of them."""
        step = max(1, min(batch_size, MAX_SCORE_ENTRIES // max(self.documents, 1)))
        hits = []
        for start in range(0, queries.shape[0], step):
            scores = (queries[start : start + step].astype(np.float64) @ self.by_term).tocsr()
            for row in range(scores.shape[0]):
                span = slice(scores.indptr[row], scores.indptr[row + 1])
                hits.append(_top(scores.indices[span], scores.data[span], depth))
        return hits


def _top(rows: np.ndarray, scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    rows, scores = top_with_ties(rows, scores, depth)
    return rows.astype(np.int64), scores.astype(np.float64)


def sparse_search(
    doc_vectors: Path,
    query_vectors: Path | pa.Table,
    top_k: int,
    remove_self_matches: bool,
    batch_size: int,
    latency_queries: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """Exact top-k run of the queries' vectors (a file, or a searcher's table in memory)
    against the documents'; the timing and index facts the retrieve manifest and the cost table
    take."""
    started = time.perf_counter()
    doc_ids, documents = read_sparse(doc_vectors)
    query_ids, queries = read_sparse(query_vectors)
    width = max(documents.shape[1], queries.shape[1])
    documents.resize(documents.shape[0], width)
    queries.resize(queries.shape[0], width)
    index = SparseIndex(documents)
    index_seconds = time.perf_counter() - started
    run, timing = exact_run(
        lambda row, depth, size: index.search(
            queries if row is None else queries[row : row + 1], depth, size
        ),
        query_ids,
        doc_ids,
        top_k,
        remove_self_matches,
        batch_size,
        latency_queries=latency_queries,
    )
    return run, timing | {
        "index_seconds": index_seconds,
        "index_bytes": index.index_bytes(),
        "documents": documents.shape[0],
        "nnz_per_document": documents.nnz / max(documents.shape[0], 1),
        "nnz_per_query": queries.nnz / max(queries.shape[0], 1),
    } | term_matching_reason("the sparse model", timing["short_queries"])
