"""late_interaction: ColBERT-style models, a vector per token, scored by MaxSim.

Models load through sentence-transformers' ``MultiVectorEncoder``, which reads PyLate and
Stanford ColBERT checkpoints (query and document prefixes, query expansion, punctuation
skiplist, projection, normalisation) without PyLate itself: PyLate 1.6 pins
sentence-transformers 5.3 and torch 2.11, which this project's pins exclude. For the same
reason there is no PLAID or Voyager index: first-stage retrieval is exhaustive, exact MaxSim
over every document's token vectors, which is what those indexes approximate.

Token vectors are cached as dense ones are (``irflow.encode_parts``: resumable parts, shards),
one row per text: its ``vectors``, a list of the model's dimension-sized float32 vectors.

The MaxSim of a query q and a document d is sum over q's tokens of the largest dot product with
any of d's tokens (``sentence_transformers.util.similarity.maxsim``, in float32).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from irflow.encode_parts import SideEncoder
from irflow.retrieve import exact_run

# Scores of one query batch against the corpus (queries x documents) at most; and elements
# (padded token vectors and token similarities) one MaxSim call holds at most.
MAX_SCORE_ENTRIES = 1 << 24
MAXSIM_CHUNK_ELEMENTS = 1 << 25


def tokens_schema(dim: int) -> pa.Schema:
    return pa.schema([("id", pa.string()), ("vectors", pa.list_(pa.list_(pa.float32(), dim)))])


class TokenEncoder(SideEncoder):
    """A loaded ``MultiVectorEncoder`` with its ``models`` entry and provenance."""

    FACTORY = "MultiVectorEncoder"

    def encode(self, texts: list[str], side: str) -> list[np.ndarray]:
        """One (tokens x dim) float32 array per text. Queries go through ``encode_query``
        (its prefix and expansion), documents through ``encode_document``; a configured
        prompt replaces the model's own prefix."""
        arrays = self.encode_side(texts, side, convert_to_numpy=True)
        return [np.asarray(array, dtype=np.float32) for array in arrays]

    def table(self, ids: list[str], arrays: list[np.ndarray]) -> pa.Table:
        return tokens_table(ids, arrays)


def tokens_table(ids: list[str], arrays: list[np.ndarray]) -> pa.Table:
    dim = arrays[0].shape[1]
    offsets = np.zeros(len(arrays) + 1, np.int32)
    np.cumsum([len(array) for array in arrays], out=offsets[1:])
    flat = np.concatenate(arrays).reshape(-1)
    tokens = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), dim)
    vectors = pa.ListArray.from_arrays(pa.array(offsets), tokens)
    return pa.Table.from_arrays([pa.array(ids, pa.string()), vectors], schema=tokens_schema(dim))


@dataclass
class TokenVectors:
    """Every row's token vectors as one (tokens x dim) float32 array and row offsets into it."""

    ids: pa.Array
    flat: np.ndarray
    offsets: np.ndarray

    @classmethod
    def read(cls, path: Path) -> TokenVectors:
        table = pq.read_table(path)
        vectors = table.column("vectors").combine_chunks()
        offsets = vectors.offsets.to_numpy().astype(np.int64)
        dim = vectors.type.value_type.list_size
        # A writable copy: torch shares memory only with writable arrays.
        flat = np.array(vectors.flatten().flatten().to_numpy().reshape(-1, dim))
        return cls(table.column("id").combine_chunks(), flat, offsets - offsets[0])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def rows(self, start: int, end: int) -> list:
        """Rows [start, end) as torch tensors that share this array's memory."""
        import torch

        flat = torch.from_numpy(self.flat)
        return [flat[self.offsets[i] : self.offsets[i + 1]] for i in range(start, end)]

    @property
    def nbytes(self) -> int:
        return self.flat.nbytes + self.offsets.nbytes


def maxsim_scores(queries: list, documents: list) -> np.ndarray:
    """(queries x documents) MaxSim, float32, by sentence-transformers' chunked ``maxsim``."""
    from sentence_transformers.util.similarity import maxsim

    return maxsim(queries, documents, chunk_elements=MAXSIM_CHUNK_ELEMENTS).numpy()


def _top(scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the ``depth`` best scores and any tied with the last of them."""
    rows = np.arange(len(scores))
    if len(scores) > depth:
        last_kept = np.partition(scores, len(scores) - depth)[len(scores) - depth]
        rows = rows[scores >= last_kept]
    return rows, scores[rows].astype(np.float64)


def exhaustive_search(
    documents: TokenVectors, queries: TokenVectors, depth: int, batch_size: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query, (document rows, scores) of the ``depth`` best documents by exact MaxSim and
    any tied with the last; query batches hold at most ``MAX_SCORE_ENTRIES`` scores."""
    step = max(1, min(batch_size, MAX_SCORE_ENTRIES // max(len(documents), 1)))
    all_documents = documents.rows(0, len(documents))
    hits = []
    for start in range(0, len(queries), step):
        batch = queries.rows(start, min(start + step, len(queries)))
        hits += [_top(row, depth) for row in maxsim_scores(batch, all_documents)]
    return hits


def late_interaction_search(
    doc_vectors: Path,
    query_vectors: Path,
    top_k: int,
    remove_self_matches: bool,
    batch_size: int,
    latency_queries: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """Exact MaxSim top-k run of the queries' token vectors against the documents'; timing,
    and the token vectors' size in memory (the "index") for the cost table."""
    started = time.perf_counter()
    documents, queries = TokenVectors.read(doc_vectors), TokenVectors.read(query_vectors)
    load_seconds = time.perf_counter() - started
    run, timing = exact_run(
        lambda row, depth, size: exhaustive_search(
            documents, queries if row is None else queries_slice(queries, row), depth, size
        ),
        queries.ids,
        documents.ids,
        top_k,
        remove_self_matches,
        batch_size,
        latency_queries,
    )
    return run, timing | {
        "index_seconds": load_seconds,
        "index_bytes": documents.nbytes,
        "documents": len(documents),
        "tokens_per_document": len(documents.flat) / max(len(documents), 1),
        "dim": documents.flat.shape[1],
    }


def queries_slice(queries: TokenVectors, row: int) -> TokenVectors:
    start, end = queries.offsets[row], queries.offsets[row + 1]
    return TokenVectors(
        queries.ids[row : row + 1], queries.flat[start:end], np.array([0, end - start])
    )


@dataclass
class MaxSimScorer:
    """A reranker (``irflow.rerank.Scorer``): exact MaxSim of the query's token vectors with
    each candidate's. ``prepare`` encodes each distinct document text once."""

    encoder: TokenEncoder
    vectors: dict = field(init=False, repr=False, default_factory=dict)
    counts: dict = field(init=False, repr=False)

    def __post_init__(self):
        self.counts = {"documents_encoded": 0, "documents_encode_seconds": 0.0}

    @property
    def provenance(self) -> dict:
        return self.encoder.provenance | self.counts

    def prepare(self, documents: list[str]) -> None:
        import torch

        new = [text for text in dict.fromkeys(documents) if text not in self.vectors]
        chunk_size = self.encoder.spec["chunk_size"]
        started = time.perf_counter()
        for start in range(0, len(new), chunk_size):
            texts = new[start : start + chunk_size]
            arrays = self.encoder.encode(texts, "corpus")
            self.vectors |= {text: torch.from_numpy(a) for text, a in zip(texts, arrays)}
        self.counts["documents_encode_seconds"] += time.perf_counter() - started
        self.counts["documents_encoded"] += len(new)

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        return self.score_queries([query], [documents])[0]

    def score_queries(self, queries: list[str], candidates: list[list[str]]) -> list[np.ndarray]:
        import torch

        self.prepare([text for documents in candidates for text in documents])
        return [
            maxsim_scores(
                [torch.from_numpy(query_vectors)], [self.vectors[text] for text in documents]
            )[0].astype(np.float64)
            for query_vectors, documents in zip(self.encoder.encode(queries, "queries"), candidates)
        ]
