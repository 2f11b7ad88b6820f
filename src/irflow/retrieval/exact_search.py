"""exact_search: exact inner-product search over an embeddings file read in row shards, so that
memory holds one shard of vectors, not the corpus.

A flat index with ``shard_rows`` (config ``indexes.<name>.shard_rows``) is searched this way:
each shard is read from the embeddings Parquet into one reused buffer, searched with faiss'
``knn`` (what ``IndexFlatIP.search`` runs), and each query's top k are merged across shards in
faiss' ``ResultHeap``. The run is the single flat index's, byte for byte:

- Scores. faiss computes a block of inner products with BLAS, ``distance_compute_blas_database_bs``
  (1,024) database rows at a time from the first row of the database it is given, and BLAS
  rounds a score by where its row falls in the block; so shards start on a block border of
  the whole file. faiss searches fewer queries than threads "database-parallel" over a
  database of at least ``max(10,000, threads x 1,024)`` rows and sequentially over a smaller
  one, which rounds differently (``should_use_db_parallel`` in faiss/utils/distances.cpp); so
  no shard is smaller than that: a shorter tail joins the last shard. Measured: equal scores
  for 1 to 1,024 queries at 2 and 8 threads, unequal in the last bit without either rule.
- Ties. faiss returns tied rows in no particular order and cuts them at k where it happens
  to. ``irflow.retrieval.retrieve.best_per_document`` never keeps that cut: it searches a
  query deeper while its last row ties the cut, and ``build_run`` orders ties by doc id as
  trec_eval does. So the run depends on the scores alone, not on how faiss or the shards
  ordered equal ones.

The same search, a batch of rows at a time, is the exact reference that an approximate
index's recall is measured against (``irflow.retrieval.recall``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from irflow.core import contracts
from irflow.core.settings_types import Index
from irflow.retrieval.index import READ_BATCH_ROWS, Searcher, load_index, vector_batches

# faiss/utils/distances.cpp, kDbParallelMinVectors: "Database-parallel KNN: parallelizes over
# database segments instead of queries, for the case where nx < nthreads and the database is
# large" -- at least this many rows, and at least threads x distance_compute_blas_database_bs.
FAISS_DB_PARALLEL_MIN_ROWS = 10_000


def smallest_shard_rows() -> int:
    """The fewest rows a shard may hold so that faiss searches it as it would the whole file
    (see the module notes), in whole database blocks."""
    import faiss  # here, as in irflow.retrieval.index: dry runs import this module

    block = faiss.cvar.distance_compute_blas_database_bs
    rows = max(FAISS_DB_PARALLEL_MIN_ROWS, faiss.omp_get_max_threads() * block)
    return -(-rows // block) * block


def shard_bounds(rows: int, shard_rows: int) -> list[tuple[int, int]]:
    """(first, end) row of each shard of a file of ``rows`` rows: ``shard_rows`` rounded up to
    whole faiss database blocks and to at least ``smallest_shard_rows``; a tail shorter than
    that joins the last shard."""
    import faiss

    block = faiss.cvar.distance_compute_blas_database_bs
    smallest = smallest_shard_rows()
    size = max(smallest, -(-shard_rows // block) * block)
    starts = [start for start in range(0, rows, size) if start == 0 or rows - start >= smallest]
    return list(zip(starts, [*starts[1:], rows]))


def vector_shards(path: Path, bounds: list[tuple[int, int]], dim: int) -> Iterator[np.ndarray]:
    """The vectors of each shard in turn, read a batch at a time into one buffer: a shard is
    valid until the next one is read."""
    buffer = np.empty((max(end - first for first, end in bounds), dim), dtype=np.float32)
    batches = vector_batches(path)
    pending = buffer[:0]
    for first, end in bounds:
        filled = 0
        while filled < end - first:
            if not len(pending):
                pending = next(batches)
            taken = min(end - first - filled, len(pending))
            buffer[filled : filled + taken] = pending[:taken]
            pending, filled = pending[taken:], filled + taken
        yield buffer[: end - first]


class ExactSearcher:
    """Exact inner-product search over an embeddings file, ``shard_rows`` rows at a time (see
    ``shard_bounds``), with ``irflow.retrieval.index.Searcher``'s interface. Every search reads
    the file once: fewer, larger query batches read it fewer times."""

    approximate = False

    def __init__(self, embeddings_path: Path, shard_rows: int = READ_BATCH_ROWS):
        self.embeddings_path = embeddings_path
        self.size = contracts.ParquetFile(embeddings_path).metadata.num_rows
        self.dim = contracts.read_schema(embeddings_path).field("vector").type.list_size
        self.bounds = shard_bounds(self.size, shard_rows)

    def can_widen(self, k: int, widen: int = 0) -> bool:
        return False

    def search(self, queries: np.ndarray, k: int, widen: int = 0):
        import faiss

        heap = faiss.ResultHeap(len(queries), k, keep_max=True)
        shards = vector_shards(self.embeddings_path, self.bounds, self.dim)
        for (first, _), vectors in zip(self.bounds, shards):
            scores, rows = faiss.knn(
                queries, vectors, min(k, len(vectors)), faiss.METRIC_INNER_PRODUCT
            )
            heap.add_result(scores, rows + first)
        heap.finalize()
        return heap.D, heap.I

    def settings(self, k: int, widen: int = 0) -> dict:
        return {"shards": len(self.bounds), "shard_rows": max(e - f for f, e in self.bounds)}


def searched_in_shards(spec: Index) -> bool:
    """Whether an index is a flat one searched from its embeddings in shards, which has no
    index file."""
    return spec.type == "flat" and bool(spec.shard_rows)


def open_searcher(
    index_path: Path | None, embeddings_path: Path, spec: Index
) -> Searcher | ExactSearcher:
    """How a dense retriever searches: its faiss index, or for a flat index with
    ``shard_rows`` (no index file) the embeddings, a shard at a time."""
    if searched_in_shards(spec):
        return ExactSearcher(embeddings_path, spec.shard_rows)
    return Searcher(load_index(index_path, spec), spec)
