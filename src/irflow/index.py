"""index: document embeddings -> a faiss index (exact inner product, or HNSW).

faiss row i is row i of the embeddings Parquet; retrieval maps rows back to doc ids.
"""

from __future__ import annotations

import time
from pathlib import Path

import faiss
import numpy as np

from irflow.embed import read_embeddings


def build_index(vectors: np.ndarray, spec: dict) -> faiss.Index:
    dim = vectors.shape[1]
    if spec["type"] == "flat":
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexHNSWFlat(dim, spec["M"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = spec["ef_construction"]
    index.add(vectors)
    return index


def load_index(path: Path, spec: dict) -> faiss.Index:
    index = faiss.read_index(str(path))
    if spec["type"] == "hnsw":
        index.hnsw.efSearch = spec["ef_search"]
    return index


def index_file(embeddings_path: Path, spec: dict, out_path: Path) -> dict:
    _, vectors = read_embeddings(embeddings_path)
    started = time.perf_counter()
    index = build_index(vectors, spec)
    build_seconds = time.perf_counter() - started
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    faiss.write_index(index, str(tmp))
    tmp.replace(out_path)
    return {
        "index": spec,
        "documents": index.ntotal,
        "dimension": vectors.shape[1],
        "build_seconds": build_seconds,
        "index_bytes": out_path.stat().st_size,
        "faiss_version": faiss.__version__,
    }
