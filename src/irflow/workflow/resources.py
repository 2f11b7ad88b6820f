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

from irflow.core import contracts
from irflow.core.errors import ConfigError
from irflow.core.settings_types import Index
from irflow.encoding.embed import EMBEDDING_BATCH_ROWS
from irflow.retrieval.bm25 import index_footprint
from irflow.retrieval.exact_search import searched_in_shards, shard_bounds
from irflow.retrieval.index import READ_BATCH_ROWS, list_count, train_sample_rows

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
# The tmp disk (TMPDIR) BM25's postings files take: 8 bytes a posting, as the score matrix in
# memory, so the same MB per MB of text (SciFact: 4.0 MB of postings for 7.9 MB of text).
# A TMPDIR on tmpfs holds them in memory besides.
BM25_TMP_MB_PER_TEXT_MB = BM25_MIB_PER_TEXT_MB
# A BM25 search maps the saved index (irflow.retrieval.bm25) rather than reading it: the score
# matrix's pages enter the page cache as queries read them, which a cgroup (SLURM's) charges to
# the job, so the model counts all of it, as for a memory-mapped faiss index (page cache can be
# reclaimed: a job asking less is slowed by re-reads rather than killed). Besides: the
# vocabulary as a Python dict (its JSON file several times over), per document its id and one
# query's scores, and per run row (judged queries x top_k at most) the run as it is built, at
# the score job's cost. benchmarks/scale/bm25_memory.py: 258 MiB on SciFact (5,183 documents,
# 300 queries), 904 MiB at 1 M documents (426 MiB of matrix, 1,000 queries x 1,000), where
# this models 944.
BM25_SEARCH_BASE_MIB, BM25_SEARCH_PER_VOCABULARY_MIB, BM25_SEARCH_ID_BYTES = 260, 6.0, 64
BM25_SEARCH_MIB_PER_RUN_ROW = 200 / MIB
# An index build reads the embeddings a record batch (irflow.retrieval.index.READ_BATCH_ROWS rows)
# at a time, holding several copies of it (Arrow, NumPy, faiss' input), and adds them into storage
# reserved once (irflow.retrieval.index.reserve_storage), so a flat index peaks at its vectors plus
# that base (benchmarks/index_memory.py, straddling 2^20 rows of 512 bytes where faiss' doubling
# jumped from 858 to 1,363 MiB before the reservation): 128-d 863 / 858 MiB at 1,000,000 /
# 1,100,000 rows (488 / 537 MiB of vectors); 384-d 1,105 / 1,706 MiB at 300,000 / 700,000
# rows (439 / 1,025 MiB). Base = 222 MiB + 4.8 x a batch's MiB (32 MiB at 128-d, 96 at 384-d).
INDEX_BASE_MIB, INDEX_MIB_PER_BATCH_MIB, FLAT_INDEX_PER_VECTOR_MIB = 222, 4.8, 1.0
# HNSW reserves 2·M + 2 links of 4 bytes a row (irflow.retrieval.index.reserve_storage), and a level
# (4 bytes) and an offset (8) per row: 120,000 / 140,000 x 128, M 32: 408 / 427 MiB measured,
# 466 / 481 modelled.
HNSW_RESERVED_LINKS, HNSW_ROW_BYTES = 2, 12
# IVF lists of full vectors grow one std::vector a list, each between half full and full,
# besides the training sample (64 rows a list by default): 572 / 705 MiB at 200,000 / 400,000
# x 128 (98 / 195 MiB of vectors, 56 / 79 MiB of sample), 578 / 748 modelled.
IVF_INDEX_PER_VECTOR_MIB = 1.5
# IVF-PQ trains on a sample and then streams the vectors into codes: 976 MiB at 200 k x 256,
# 1,208 MiB at 1 M x 256 (32-byte codes).
IVFPQ_INDEX_BASE_MIB, IVFPQ_INDEX_PER_VECTOR_MIB = 920, 0.3
# Dense search loads the index (its file's size) and the queries' vectors: flat 440 MiB at
# 200 k x 256, 1,300 MiB at 1 M x 256; memory-mapped IVF-PQ 446 MiB at 200 k, 400 MiB at 1 M,
# so its base is the larger. Memory-mapped, the file is not copied but its pages enter the page
# cache as they are read, which a cgroup (SLURM's) charges to the job: every page, since an
# exhaustive search reads every vector and an IVF search's queries together probe every list
# once queries x nprobe exceeds the lists (125 queries at 4,000 lists and nprobe 32). Page
# cache can be reclaimed, so a job asking less is slowed by re-reads rather than killed.
SEARCH_BASE_MIB, SEARCH_PER_INDEX_MIB, SEARCH_PER_MAPPED_INDEX_MIB = 450, 1.1, 1.0
# A flat index searched in shards (irflow.retrieval.exact_search) holds one shard's buffer and a
# read batch's copies (as an index build does), and per document its id (Arrow strings, their
# dictionary codes and trec_eval byte-order ranks, counted at 64 bytes, an MS MARCO id's 7
# characters several times over). Measured 1,135 / 1,132 MiB at 1 M / 2 M x 384 in 262,144-row
# shards, 1,000 queries (benchmarks/exact_search_memory.py); 1,357 / 1,418 modelled. The flat
# search of the same held 1,886 MiB at 1 M.
SHARD_COPIES, SEARCH_ID_BYTES_PER_ROW = 1.0, 64
# score holds the run and the qrels: 246 MiB for a 266 k-row run, 440 MiB for a 1 M-row one.
SCORE_BASE_MIB, SCORE_MIB_PER_RUN_ROW = 176, 277 / MIB
# embed and embed_shard stream the texts in chunks, so their peak is the model and one chunk,
# not the corpus: 1.48 GiB measured for a static model with 65,536-row chunks. A transformer's
# weights add to it; a model much larger than MiniLM is met by the retries.
EMBED_MIB = 2048
# encode_vectors_gather streams its shards into one file: the bound the dense gather had (1.13
# GiB measured at 1 M rows).
GATHER_MIB = 1200
# embed_gather streams the shards a batch of irflow.encoding.embed.EMBEDDING_BATCH_ROWS vectors at a
# time: Python (0.12 GiB) and DuckDB's duplicate check (its 512 MB limit) and several copies
# of a batch, flat in the rows beyond one batch (benchmarks/README.md, "Gather and reuse");
# issue 30 measured 1,617 MiB at 1024-d (256 MiB batches), 4,931 MiB at 4096-d (1,024 MiB):
# 4.31 batches more for 768 MiB more batch.
DENSE_GATHER_BASE_MIB, DENSE_GATHER_BATCHES = 640, 4.4
# Sparse and late-interaction search hold the documents' vectors about three times over (the
# Arrow table as read, the CSR matrix or token array built from it, and for sparse its
# transpose), plus one query batch's scores (at most 128 MiB): counted from the arrays held,
# not yet fitted to measured peaks. A Voyager index adds a copy of the token vectors and each
# token's level-0 links: 2·M four-byte ids and a count (upper levels hold about 1/M as many).
VECTOR_SEARCH_BASE_MIB, VECTOR_SEARCH_MIB_PER_MB = 600, 3.0

# external_run streams the run file and keeps each query's top_k rows as it reads
# (irflow.retrieval.external_run._TopK), so its peak follows top_k x the judged queries, not the
# file: a block of lines, the kept rows (Arrow columns, then the run as pandas rows) and the
# dataset's ids. benchmarks/external_run_memory.py, 2 M-line runs: 328 MiB keeping 100,000 rows,
# 661 MiB keeping 2,000,000 (read whole: 819 and 820 MiB): 184 bytes a kept row. The corpus's
# ids (Arrow strings and the hash set each batch is looked up in) are counted at 40 bytes a
# document, from the arrays held, not fitted.
EXTERNAL_RUN_BASE_MIB, EXTERNAL_RUN_MIB_PER_KEPT_ROW = 310, 184 / MIB
EXTERNAL_RUN_MIB_PER_DOCUMENT = 40 / MIB


# Reranking holds the model and one chunk of its work (EMBED_MIB, as an encoding job), the
# candidates' texts (the Arrow rows read, a dict of Python strings and the joined title and
# text: about three copies), and a late-interaction model one batch of the candidates' token
# vectors (irflow.retrieval.late_interaction.MAX_HELD_TOKEN_BYTES; one query's k candidates are more
# only beyond about 2,000 candidates of 1,024 tokens). Counted from what is held, not yet fitted.
RERANK_MIB_PER_TEXT_MB = 3.0


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
    metadata = contracts.read_metadata(_existing(path))
    return sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)) / 1e6


def vector_shape(path) -> tuple[int, int]:
    """(rows, dimension) of an embeddings file, from its Parquet metadata and schema."""
    file = contracts.ParquetFile(_existing(path))
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


def bm25_search_mb(index, queries, top_k: int, attempt: int = 1) -> int:
    """``index``: the folder irflow.retrieval.bm25 saved (bm25s' files); ``queries``: the
    queries table searched, each giving at most ``top_k`` run rows."""
    footprint = index_footprint(_existing(index))
    run_rows = contracts.read_metadata(_existing(queries)).num_rows * top_k
    peak = (
        BM25_SEARCH_BASE_MIB
        + footprint["matrix_bytes"] / MIB
        + BM25_SEARCH_PER_VOCABULARY_MIB * footprint["vocabulary_bytes"] / MIB
        + BM25_SEARCH_ID_BYTES * footprint["documents"] / MIB
        + BM25_SEARCH_MIB_PER_RUN_ROW * run_rows
    )
    return request_mb(peak, attempt)


def bm25_tmp_mb(corpus) -> int:
    """The TMPDIR disk (Snakemake's ``disk_mb``) of BM25's postings files, with headroom."""
    return math.ceil(HEADROOM * BM25_TMP_MB_PER_TEXT_MB * text_mb(corpus))


def index_mb(embeddings, block: dict, attempt: int = 1) -> int:
    """``block``: the index's config block (its ``type``, and ``M`` for HNSW)."""
    spec = Index.model_validate(block)
    rows, dim = vector_shape(embeddings)
    peak = index_peak_mib(rows, dim, spec)
    refuse_unfit_flat(rows, dim, spec, peak, "build")
    return request_mb(peak, attempt)


def refuse_unfit_flat(rows: int, dim: int, spec: Index, peak_mib: float, job: str) -> None:
    """ConfigError, with the arithmetic, when a flat index held whole is modelled to need more
    than ``$IRFLOW_MAX_MEM_MB``: the job could only be killed for memory, after its wait."""
    cap = os.environ.get(CAP_VARIABLE, "").strip()
    if spec.type != "flat" or searched_in_shards(spec) or not cap or peak_mib <= int(cap):
        return
    vectors_mib = rows * dim * 4 / MIB
    # A shard and its copies in half of what the cap leaves besides the vectors.
    spare_rows = (int(cap) - (peak_mib - vectors_mib)) / 2 / SHARD_COPIES * MIB / (dim * 4)
    suggested = 1 << max(10, math.floor(math.log2(max(spare_rows, 1))))
    raise ConfigError(
        f"a flat index of {rows:,} vectors of {dim} float32 holds {rows:,} x {dim} x 4 bytes = "
        f"{vectors_mib:,.0f} MiB; its {job} job's modelled peak is {peak_mib:,.0f} MiB, more "
        f"than the {int(cap):,} MiB a job may ask for ({CAP_VARIABLE}). Search it in shards: "
        f"config key 'indexes.<name>.shard_rows', e.g. {suggested:,} "
        f"({suggested * dim * 4 / MIB:,.0f} MiB a shard); the run is the same"
    )


def index_peak_mib(rows: int, dim: int, spec: Index) -> float:
    """The modelled peak of building an index of ``rows`` vectors of ``dim`` float32."""
    vectors_mib = rows * dim * 4 / MIB
    if spec.type == "ivfpq":
        peak = IVFPQ_INDEX_BASE_MIB + IVFPQ_INDEX_PER_VECTOR_MIB * vectors_mib
        if spec.refine:  # every full vector beside the codes, reserved as a flat index's
            peak += FLAT_INDEX_PER_VECTOR_MIB * vectors_mib
        if spec.train_rows:  # the default sample is in the fit; a user's is added
            peak += train_sample_rows(spec, rows, list_count(spec, rows)) * dim * 4 / MIB
        return peak
    batch_mib = min(rows, READ_BATCH_ROWS) * dim * 4 / MIB
    peak = INDEX_BASE_MIB + INDEX_MIB_PER_BATCH_MIB * batch_mib
    if spec.type == "ivf":
        sample_rows = train_sample_rows(spec, rows, list_count(spec, rows))
        return peak + IVF_INDEX_PER_VECTOR_MIB * vectors_mib + sample_rows * dim * 4 / MIB
    peak += FLAT_INDEX_PER_VECTOR_MIB * vectors_mib
    if spec.type == "hnsw":
        links = 2 * spec.M + HNSW_RESERVED_LINKS
        peak += rows * (4 * links + HNSW_ROW_BYTES) / MIB
    return peak


def dense_search_mb(index, queries, block: dict, attempt: int = 1, *, documents) -> int:
    """``index``: the faiss file, read whole into memory unless the index's config block
    ``block`` sets ``mmap`` (None for a flat index searched in shards); ``queries``: the
    queries' embeddings; ``documents``: the embeddings the index holds. An approximate index's
    recall sample is searched exactly over the embeddings read a batch at a time, with a
    build's copies of a batch; a sharded flat index, all of its search."""
    spec = Index.model_validate(block)
    rows, dim = vector_shape(queries)
    if searched_in_shards(spec):
        return request_mb(sharded_search_peak_mib(vector_shape(documents), rows, spec), attempt)
    index_mib = _existing(index).stat().st_size / MIB
    per_index_mib = SEARCH_PER_MAPPED_INDEX_MIB if spec.mmap else SEARCH_PER_INDEX_MIB
    peak = SEARCH_BASE_MIB + per_index_mib * index_mib + rows * dim * 4 / MIB
    if spec.type != "flat" and spec.recall_queries:
        peak += INDEX_MIB_PER_BATCH_MIB * READ_BATCH_ROWS * dim * 4 / MIB
    refuse_unfit_flat(*vector_shape(documents), spec, peak, "search")
    return request_mb(peak, attempt)


def sharded_search_peak_mib(shape: tuple[int, int], queries: int, spec: Index) -> float:
    """A sharded flat search of ``shape`` (rows, dim) embeddings for ``queries`` queries."""
    rows, dim = shape
    shard_rows = max(end - first for first, end in shard_bounds(rows, spec.shard_rows))
    batch_mib = min(rows, READ_BATCH_ROWS) * dim * 4 / MIB
    return (
        SEARCH_BASE_MIB
        + SHARD_COPIES * shard_rows * dim * 4 / MIB
        + INDEX_MIB_PER_BATCH_MIB * batch_mib
        + SEARCH_ID_BYTES_PER_ROW * rows / MIB
        + queries * dim * 4 / MIB
    )


def score_mb(run, attempt: int = 1) -> int:
    rows = contracts.read_metadata(_existing(run)).num_rows
    return request_mb(SCORE_BASE_MIB + SCORE_MIB_PER_RUN_ROW * rows, attempt)


def external_run_peak_mib(corpus, queries, top_k: int) -> float:
    """The modelled peak of importing a run of ``top_k`` rows a query for the judged
    ``queries`` over ``corpus``, whatever the run file's size."""
    documents = contracts.read_metadata(_existing(corpus)).num_rows
    kept = top_k * contracts.read_metadata(_existing(queries)).num_rows
    return (
        EXTERNAL_RUN_BASE_MIB
        + EXTERNAL_RUN_MIB_PER_KEPT_ROW * kept
        + EXTERNAL_RUN_MIB_PER_DOCUMENT * documents
    )


def external_run_mb(corpus, queries, top_k: int, attempt: int = 1) -> int:
    return request_mb(external_run_peak_mib(corpus, queries, top_k), attempt)


def vector_search_mb(documents, attempt: int = 1, index: dict | None = None) -> int:
    """``documents``: the documents' sparse vectors or token vectors (irflow.encoding.encode_parts);
    ``index``: a late-interaction retriever's index."""
    vectors_mb = text_mb(documents)
    peak = VECTOR_SEARCH_BASE_MIB + VECTOR_SEARCH_MIB_PER_MB * vectors_mb
    if index and index["type"] == "voyager":
        dim = contracts.read_schema(documents).field("vectors").type.value_type.list_size
        peak += vectors_mb * (1 + (2 * index["M"] + 1) / dim)
    return request_mb(peak, attempt)


def embed_mb(attempt: int = 1) -> int:
    return request_mb(EMBED_MIB, attempt)


def gather_mb(attempt: int = 1) -> int:
    return request_mb(GATHER_MIB, attempt)


def dense_gather_mb(shards, attempt: int = 1) -> int:
    """``shards``: the embeddings shards to join, whose rows and dimension set the batch."""
    shapes = [vector_shape(shard) for shard in shards]
    rows, dim = sum(rows for rows, _ in shapes), shapes[0][1]
    batch_mib = min(rows, EMBEDDING_BATCH_ROWS) * dim * 4 / MIB
    return request_mb(DENSE_GATHER_BASE_MIB + DENSE_GATHER_BATCHES * batch_mib, attempt)


def rerank_mb(corpus, queries, settings: dict, attempt: int = 1) -> int:
    """``settings``: the rerank rule's (its ``reranker`` spec and ``k``). The candidates are
    at most k per query and at most every document; their text is counted at the corpus's
    mean per document."""
    from irflow.retrieval.rerankers import reranker_type

    documents = contracts.read_metadata(_existing(corpus)).num_rows
    candidates = contracts.read_metadata(_existing(queries)).num_rows * settings["k"]
    share = min(1.0, candidates / max(documents, 1))
    peak = EMBED_MIB + RERANK_MIB_PER_TEXT_MB * text_mb(corpus) * share
    spec = settings["reranker"]
    peak += reranker_type(spec["type"]).held_bytes(spec) / MIB
    return request_mb(peak, attempt)
