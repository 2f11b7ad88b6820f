"""resources: the memory each rule's job asks for, from what its inputs hold.

Every rule whose memory grows with the data declares ``resources: mem_mb=`` one of the functions
below, so the local and the SLURM profile ask for the same amount. Each is a model of the job's
peak resident memory, ``base + cost x units``, where the units come from the inputs' Parquet
metadata (rows, the vectors' dimension from the schema, the uncompressed size of the text
columns), never from the input files' size on disk. The constants are fitted to the peaks
that the jobs' manifests recorded (``peak_rss_bytes``) on three corpora of this machine:
SciFact (5,183 documents), a generated 200,000-document corpus and the generated 1 M-document
corpus of README "Measured at 1 M documents" (95 words a document on average). Where the peak
does not grow with the data (streamed jobs), the model is that measured peak.

A job asks for its model times ``HEADROOM``, at least ``MIN_MB``; each retry (a job killed for
memory) asks ``GROWTH`` times more, and no request exceeds ``$IRFLOW_MAX_MEM_MB`` when that is
set (profiles/slurm sets it to the least memory of a node the jobs can go to). Values are MiB,
which is what SLURM's ``--mem`` counts.

While an input does not exist yet, the functions raise FileNotFoundError naming it: Snakemake
then leaves the value to be determined and evaluates it again when the job is ready.
"""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

import pyarrow.parquet as pq

MIB = 2**20
HEADROOM = 1.25
MIN_MB = 1024
GROWTH = 2
CAP_VARIABLE = "IRFLOW_MAX_MEM_MB"

# Peak MiB = base MiB + cost x unit. Fitted on the 200 k and 1 M corpora (SciFact's smaller peaks
# confirm each base is an upper bound at BEIR sizes).
# ingest streams the JSONL in batches; what grows is its id and length dicts, per document.
# Measured 369 MiB at 200 k documents (61 MB gzipped corpus), 543 MiB at 1 M (about 307 MB).
# It is modelled per byte of the corpus file as stored, since no row count exists before it
# runs: an uncompressed JSONL (about 3 times the gzipped size) is over-asked, never under.
INGEST_BASE_MIB, INGEST_MIB_PER_FILE_MB = 325, 0.71
# filter reads the corpus table and hashes its texts: 431 MiB at 122 MB of text (200 k),
# 819 MiB at about 609 MB (1 M).
FILTER_BASE_MIB, FILTER_MIB_PER_TEXT_MB = 334, 0.8
# BM25 streams the corpus twice (its postings go to temporary files between the passes) and
# holds bm25s' score matrix, 8 bytes a posting, plus about 200 bytes a document: 968 MiB at 1 M
# documents (about 609 MB of text), 1,575 MiB at 2 M (benchmarks/README.md, "BM25 memory").
BM25_BASE_MIB, BM25_MIB_PER_TEXT_MB = 361, 1.0
# A flat (or HNSW, or IVF of full vectors) index holds every vector, float32, and faiss grows
# its storage by doubling: 784 MiB at 200 k x 256 (195 MiB of vectors), 1,648 MiB at 1 M x 256.
FLAT_INDEX_BASE_MIB, FLAT_INDEX_PER_VECTOR_MIB = 570, 1.1
# HNSW adds 2 x M links of 4 bytes a row on its base level.
HNSW_LINK_BYTES = 8
# IVF-PQ trains on a sample and then streams the vectors into codes: 976 MiB at 200 k x 256,
# 1,208 MiB at 1 M x 256 (32-byte codes).
IVFPQ_INDEX_BASE_MIB, IVFPQ_INDEX_PER_VECTOR_MIB = 920, 0.3
# Dense search loads the index (its file's size, unless memory-mapped) and the queries' vectors:
# flat 440 MiB at 200 k x 256, 1,300 MiB at 1 M x 256; memory-mapped IVF-PQ 446 MiB at 200 k,
# 400 MiB at 1 M, so its base is the larger.
SEARCH_BASE_MIB, SEARCH_PER_INDEX_MIB = 450, 1.1
# score holds the run and the qrels: 246 MiB for a 266 k-row run, 440 MiB for a 1 M-row one.
SCORE_BASE_MIB, SCORE_MIB_PER_RUN_ROW = 176, 277 / MIB
# embed and embed_shard stream the texts in chunks, so their peak is the model and one chunk,
# not the corpus: 1.48 GiB measured for a static model with 65,536-row chunks. A transformer's
# weights add to it; a model much larger than MiniLM is met by the retries.
EMBED_MIB = 2048
# embed_gather streams the shards into one file: bounded, 1.13 GiB measured at 1 M rows.
GATHER_MIB = 1200
# Sparse and late-interaction search hold the documents' vectors about three times over (the
# Arrow table as read, the CSR matrix or token array built from it, and for sparse its
# transpose), plus one query batch's scores (at most 128 MiB): counted from the arrays held,
# not yet fitted to measured peaks. A Voyager index adds a copy of the token vectors and each
# token's level-0 links: 2·M four-byte ids and a count (upper levels hold about 1/M as many).
VECTOR_SEARCH_BASE_MIB, VECTOR_SEARCH_MIB_PER_MB = 600, 3.0


def request_mb(peak_mib: float, attempt: int = 1) -> int:
    """The MiB a job with this modelled peak asks for on its ``attempt`` (1, 2, ...)."""
    asked = max(MIN_MB, math.ceil(peak_mib * HEADROOM)) * GROWTH ** (attempt - 1)
    cap = os.environ.get(CAP_VARIABLE, "").strip()
    return min(asked, int(cap)) if cap else asked


def _existing(path) -> Path:
    """``path``, or FileNotFoundError naming it as Snakemake's input names it."""
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "not made yet", path)
    return Path(path)


def text_mb(path) -> float:
    """Uncompressed size of a table's columns, from its Parquet metadata, in MB."""
    metadata = pq.read_metadata(_existing(path))
    return sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)) / 1e6


def vector_shape(path) -> tuple[int, int]:
    """(rows, dimension) of an embeddings file, from its Parquet metadata and schema."""
    file = pq.ParquetFile(_existing(path))
    return file.metadata.num_rows, file.schema_arrow.field("vector").type.list_size


def ingest_mb(source, attempt: int = 1) -> int:
    """``source``: the dataset's source.json, which names its corpus file."""
    corpus = Path(json.loads(_existing(source).read_text())["corpus"])
    file_mb = corpus.stat().st_size / 1e6
    return request_mb(INGEST_BASE_MIB + INGEST_MIB_PER_FILE_MB * file_mb, attempt)


def filter_mb(corpus, attempt: int = 1) -> int:
    return request_mb(FILTER_BASE_MIB + FILTER_MIB_PER_TEXT_MB * text_mb(corpus), attempt)


def bm25_mb(corpus, attempt: int = 1) -> int:
    return request_mb(BM25_BASE_MIB + BM25_MIB_PER_TEXT_MB * text_mb(corpus), attempt)


def index_mb(embeddings, spec: dict, attempt: int = 1) -> int:
    """``spec``: the index's config block (its ``type``, and ``M`` for HNSW)."""
    rows, dim = vector_shape(embeddings)
    vectors_mib = rows * dim * 4 / MIB
    if spec["type"] == "ivfpq" and not spec["refine"]:
        peak = IVFPQ_INDEX_BASE_MIB + IVFPQ_INDEX_PER_VECTOR_MIB * vectors_mib
    elif spec["type"] == "ivfpq":  # refine keeps every full vector beside the codes
        peak = (
            IVFPQ_INDEX_BASE_MIB
            + (IVFPQ_INDEX_PER_VECTOR_MIB + FLAT_INDEX_PER_VECTOR_MIB) * vectors_mib
        )
    else:
        peak = FLAT_INDEX_BASE_MIB + FLAT_INDEX_PER_VECTOR_MIB * vectors_mib
        if spec["type"] == "hnsw":
            peak += rows * spec["M"] * HNSW_LINK_BYTES / MIB
    return request_mb(peak, attempt)


def dense_search_mb(index, queries, spec: dict, attempt: int = 1) -> int:
    """``index``: the faiss file, read whole into memory unless ``spec['mmap']``; ``queries``:
    the queries' embeddings."""
    rows, dim = vector_shape(queries)
    index_mib = 0 if spec.get("mmap") else _existing(index).stat().st_size / MIB
    peak = SEARCH_BASE_MIB + SEARCH_PER_INDEX_MIB * index_mib + rows * dim * 4 / MIB
    return request_mb(peak, attempt)


def score_mb(run, attempt: int = 1) -> int:
    rows = pq.read_metadata(_existing(run)).num_rows
    return request_mb(SCORE_BASE_MIB + SCORE_MIB_PER_RUN_ROW * rows, attempt)


def vector_search_mb(documents, attempt: int = 1, index: dict | None = None) -> int:
    """``documents``: the documents' sparse vectors or token vectors (irflow.encode_parts);
    ``index``: a late-interaction retriever's index."""
    vectors_mb = text_mb(documents)
    peak = VECTOR_SEARCH_BASE_MIB + VECTOR_SEARCH_MIB_PER_MB * vectors_mb
    if index and index["type"] == "voyager":
        dim = pq.read_schema(documents).field("vectors").type.value_type.list_size
        peak += vectors_mb * (1 + (2 * index["M"] + 1) / dim)
    return request_mb(peak, attempt)


def embed_mb(attempt: int = 1) -> int:
    return request_mb(EMBED_MIB, attempt)


def gather_mb(attempt: int = 1) -> int:
    return request_mb(GATHER_MIB, attempt)
