"""index: document embeddings -> a faiss index, built from the embeddings file in batches.

faiss row i is row i of the embeddings Parquet; retrieval maps rows back to doc ids.

Types: ``flat`` (exact inner product), ``hnsw`` (graph), ``ivf`` (inverted lists of full
vectors) and ``ivfpq`` (inverted lists of product-quantised codes, for corpora whose vectors do
not fit in memory). The embeddings are read one record batch at a time and added as they come,
so the build never holds a second copy of the matrix: what it holds is the index itself, plus,
for the IVF types, a training sample of evenly spaced rows. With ``mmap`` the IVF types are
searched memory-mapped from the index file, so only the inverted lists a query probes are read.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import faiss
import numpy as np
import pyarrow.parquet as pq

from irflow import contracts
from irflow.errors import InputError

IVF_TYPES = ("ivf", "ivfpq")
# faiss warns below ~39 training points per centroid; its k-means samples at most 256 each.
TRAIN_ROWS_PER_LIST = 64
READ_BATCH_ROWS = 65536


def vector_batches(embeddings_path: Path, step: int = 1) -> Iterator[np.ndarray]:
    """The embeddings as float32 matrices, one record batch at a time; with ``step``, only
    every ``step``-th row of the file."""
    offset = 0
    for batch in contracts.stream_batches(embeddings_path, READ_BATCH_ROWS, ["vector"]):
        matrix = contracts.vector_matrix(batch.column("vector"))
        first = -offset % step
        offset += len(matrix)
        yield np.ascontiguousarray(matrix[first::step], dtype=np.float32)


def list_count(spec: dict, rows: int) -> int:
    """``nlist``, or faiss' rule of thumb of about 4·√rows, at least 1 and at most rows."""
    wanted = spec["nlist"] or 4 * math.isqrt(rows)
    return max(1, min(wanted, rows))


def empty_index(spec: dict, dim: int, rows: int) -> faiss.Index:
    if spec["type"] == "flat":
        return faiss.IndexFlatIP(dim)
    if spec["type"] == "hnsw":
        index = faiss.IndexHNSWFlat(dim, spec["M"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = spec["ef_construction"]
        return index
    quantizer = faiss.IndexFlatIP(dim)
    nlist = list_count(spec, rows)
    if spec["type"] == "ivf":
        return faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    if dim % spec["pq_m"]:
        raise ValueError(f"ivfpq: pq_m {spec['pq_m']} must divide the dimension {dim}")
    return faiss.IndexIVFPQ(
        quantizer, dim, nlist, spec["pq_m"], spec["pq_bits"], faiss.METRIC_INNER_PRODUCT
    )


def train_sample(embeddings_path: Path, spec: dict, rows: int, nlist: int) -> np.ndarray:
    """Evenly spaced rows, ``train_rows`` of them or 64 per list: deterministic and spread
    over the whole file, whatever order the corpus is in."""
    wanted = spec["train_rows"] or TRAIN_ROWS_PER_LIST * nlist
    step = max(1, rows // wanted)
    return np.concatenate(list(vector_batches(embeddings_path, step)))


def build_index(embeddings_path: Path, spec: dict) -> faiss.Index:
    metadata = pq.ParquetFile(embeddings_path).metadata
    rows = metadata.num_rows
    if rows == 0:
        raise InputError(embeddings_path, "no embeddings to index")
    dim = pq.read_schema(embeddings_path).field("vector").type.list_size
    index = empty_index(spec, dim, rows)
    if spec["type"] in IVF_TYPES:
        index.train(train_sample(embeddings_path, spec, rows, index.nlist))
    for matrix in vector_batches(embeddings_path):
        index.add(matrix)
    return index


def load_index(path: Path, spec: dict) -> faiss.Index:
    memory_mapped = spec.get("mmap") and spec["type"] in IVF_TYPES
    index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP if memory_mapped else 0)
    if spec["type"] == "hnsw":
        index.hnsw.efSearch = spec["ef_search"]
    if spec["type"] in IVF_TYPES:
        index.nprobe = spec["nprobe"]
    return index


def index_file(embeddings_path: Path, spec: dict, out_path: Path) -> dict:
    started = time.perf_counter()
    index = build_index(embeddings_path, spec)
    build_seconds = time.perf_counter() - started
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    faiss.write_index(index, str(tmp))
    tmp.replace(out_path)
    return {
        "index": spec,
        "documents": index.ntotal,
        "dimension": index.d,
        "lists": getattr(index, "nlist", None),
        "build_seconds": build_seconds,
        "index_bytes": out_path.stat().st_size,
        "faiss_version": faiss.__version__,
    }
