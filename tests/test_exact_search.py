"""exact_search: a flat index searched from the embeddings file in row shards gives the single
flat index's run, byte for byte, with a peak set by the shard, not the corpus."""

from __future__ import annotations

import tracemalloc

import faiss
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import index_spec

from irflow.core import contracts
from irflow.core.settings_types import Index
from irflow.retrieval import exact_search
from irflow.retrieval.exact_search import ExactSearcher, shard_bounds
from irflow.retrieval.index import index_file
from irflow.retrieval.retrieve import dense_search

DIM = 16


def write_embeddings(path, vectors: np.ndarray, prefix: str = "d"):
    ids = pa.array([f"{prefix}{i:05d}" for i in range(len(vectors))])
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    table = pa.table(
        {"id": ids, "vector": contracts.vector_array(vectors)},
        schema=contracts.embeddings_schema(vectors.shape[1]),
    )
    contracts.write_table(table, path)
    return path


def tied_corpus(rows: int, border: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random unit vectors with, per query, 40 copies of one document on every third row
    around ``border`` (a shard border): top_k 30 cuts inside each query's ties."""
    rng = np.random.default_rng(seed)
    docs = rng.normal(size=(rows, DIM)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries = rng.normal(size=(3, DIM)).astype(np.float32)
    for query in range(len(queries)):
        docs[border - 60 + query : border + 60 : 3] = 3 * queries[query]
    return docs, queries


def run_of(tmp_path, spec: dict, *, top_k: int = 30, batch_size: int = 5):
    """The run of ``spec``'s search, building its index first unless it is searched in shards
    (which has no index file, as in the workflow)."""
    index = None
    if not exact_search.searched_in_shards(Index.model_validate(spec)):
        index = tmp_path / "flat.faiss"
        index_file(tmp_path / "docs.parquet", spec, index)
    return dense_search(
        index,
        spec,
        tmp_path / "docs.parquet",
        tmp_path / "queries.parquet",
        top_k,
        False,
        batch_size=batch_size,
        latency_queries=0,
    )


def test_shards_follow_faiss_database_blocks_and_fold_a_short_tail():
    block = faiss.cvar.distance_compute_blas_database_bs
    smallest = exact_search.smallest_shard_rows()
    assert smallest % block == 0 and smallest >= exact_search.FAISS_DB_PARALLEL_MIN_ROWS
    # Asked for fewer rows than faiss searches one way: raised to that many.
    assert shard_bounds(3 * smallest, 1) == [(i * smallest, (i + 1) * smallest) for i in range(3)]
    # Rounded up to whole blocks; a tail shorter than the smallest shard joins the last one.
    rows = 2 * smallest + block + smallest // 2
    size = smallest + 1
    expected = -(-size // block) * block
    assert shard_bounds(rows, size) == [(0, expected), (expected, rows)]
    assert shard_bounds(100, smallest) == [(0, 100)]  # a small corpus is one shard


def test_sharded_run_equals_the_flat_index_run_byte_for_byte(tmp_path):
    # Two shards (the smallest faiss searches like the whole), ties across their border.
    border = exact_search.smallest_shard_rows()
    docs, queries = tied_corpus(border + exact_search.smallest_shard_rows() + 900, border)
    write_embeddings(tmp_path / "docs.parquet", docs)
    write_embeddings(tmp_path / "queries.parquet", queries, prefix="q")
    flat = index_spec(type="flat")
    flat_run, flat_timing = run_of(tmp_path, flat)
    sharded_run, sharded_timing = run_of(tmp_path, flat | {"shard_rows": 1})
    assert sharded_timing["search"]["settings"]["shards"] == 2
    pd.testing.assert_frame_equal(sharded_run, flat_run, check_exact=True)
    # The cut fell inside every query's ties and took the documents trec_eval ranks first.
    assert flat_timing["search"]["queries_searched_deeper"] == len(queries)
    assert (flat_run.groupby("query_id")["score"].nunique() == 1).all()


def test_sharded_search_holds_one_shard_not_the_corpus(tmp_path):
    rows = 4 * exact_search.smallest_shard_rows()
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(rows, 64)).astype(np.float32)
    write_embeddings(tmp_path / "docs.parquet", vectors)
    queries = rng.normal(size=(8, 64)).astype(np.float32)
    whole = faiss.IndexFlatIP(64)
    whole.add(vectors)
    expected = whole.search(queries, 50)
    searcher = ExactSearcher(tmp_path / "docs.parquet", shard_rows=1)
    tracemalloc.start()
    scores, rows_found = searcher.search(queries, 50)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < vectors.nbytes / 2  # a shard (a quarter) and a read batch, not every row
    np.testing.assert_array_equal(scores, expected[0])
    np.testing.assert_array_equal(np.sort(rows_found), np.sort(expected[1]))


def test_shard_rows_is_for_flat_indexes_only():
    with pytest.raises(Exception, match="shard_rows"):
        index_spec(type="hnsw", shard_rows=100_000)
