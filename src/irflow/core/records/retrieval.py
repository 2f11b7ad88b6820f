"""The records of the stages that make and score runs: encoding (and a model's ONNX export),
indexes, first-stage search, an imported run, reranking, fusion and scoring."""

from __future__ import annotations

from typing import ClassVar

from irflow.core.records.base import StageRecord


class EncodeRecord(StageRecord, kw_only=True, forbid_unknown_fields=False):
    """One side encoded by a model (stages embed and encode_vectors, and their shards), with
    the model's provenance (open: its keys are the model type's)."""

    settings: dict | None = None
    device: str
    rows: int
    rows_encoded: int
    rows_resumed: int
    rows_reused: int = 0
    encode_seconds: float
    similarity: str | None = None
    shards: str | int | None = None
    latency: dict | None = None
    # Where the vectors came from (irflow.encoding.vector_store): null without a store.
    vector_store: dict | None = None


class OnnxExportRecord(StageRecord, kw_only=True, forbid_unknown_fields=False):
    """A model's ONNX graph (scripts/onnx_export.py; irflow.encoding.onnx_export.export),
    with the model's provenance (open: its keys are the model's, as an encode record's)."""

    settings: dict
    export_key: str
    export_settings: dict
    inputs: list
    onnx_bytes: int
    torch: str
    onnx: str
    fused_operators: dict | None = None


class IndexRecord(StageRecord, kw_only=True):
    """A faiss index built by rule index (irflow.retrieval.index.index_file)."""

    index: dict
    device: str
    dimension: int
    documents: int
    lists: int | None = None
    lists_wanted: int | None = None
    train_rows: int | None = None
    index_seconds: float
    index_bytes: int
    faiss_version: str

    legacy: ClassVar[dict[str, str]] = {"build_seconds": "index_seconds"}


class Bm25IndexRecord(StageRecord, kw_only=True):
    """A BM25 index built by rule index_bm25 (irflow.retrieval.bm25.build_index)."""

    settings: dict
    device: str
    index_seconds: float
    index_bytes: int
    documents: int
    terms: int
    postings: int


class LuceneIndexRecord(StageRecord, kw_only=True):
    """A Lucene index built by rule index_lucene (irflow.retrieval.lucene.build_index): its
    layout (``fields``, the job's wildcard) and the Anserini jar that built it."""

    fields: str
    device: str
    index_seconds: float
    index_bytes: int
    documents: int
    anserini: str


class RetrieveRecord(StageRecord, kw_only=True):
    """A first-stage run's search (scripts/retrieve.py): its timing, every family's; the
    index facts of a family whose search job builds its index (sparse, late interaction, a
    user's class) and an approximate index's recall and search settings."""

    settings: dict
    device: str
    rows: int
    queries: int
    search_seconds: float
    ms_per_query_batched: float
    self_matches_removed: int
    short_queries: int
    short_query_examples: dict
    short_queries_reason: str | None = None
    latency: dict
    search: dict | None = None
    recall: dict | None = None
    index_seconds: float | None = None
    index_bytes: int | None = None
    documents: int | None = None
    nnz_per_document: float | None = None
    nnz_per_query: float | None = None
    tokens_per_document: float | None = None
    dim: int | None = None
    token_vectors_bytes: int | None = None
    voyager: dict | None = None


class ExternalRunRecord(StageRecord, kw_only=True):
    """A run made outside irflow, checked and imported (scripts/external_run.py): its file and
    what irflow.retrieval.external_run.import_run read, accepted and dropped of it (``rows``,
    ``self_matches_removed`` and ``short_queries`` as a retrieve record counts them)."""

    settings: dict
    file: str
    file_md5: str
    format: str
    rows_read: int
    # What a TREC file (bom, crlf_lines, blank_lines) or a Parquet one (ids_cast_to_string)
    # was accepted with.
    bom: bool | None = None
    crlf_lines: int | None = None
    blank_lines: int | None = None
    ids_cast_to_string: list | None = None
    unjudged: dict
    unknown: dict
    rows: int
    self_matches_removed: int
    rows_beyond_top_k: int
    queries_in_run: int
    queries_without_results: int
    short_queries: int


class RerankRecord(StageRecord, kw_only=True, forbid_unknown_fields=False):
    """A reranked run (scripts/rerank.py), with its scorer's provenance (open: its keys are
    the reranker type's)."""

    settings: dict
    first_stage: str
    k: int
    latency: dict
    rows: int
    device: str


class FuseRecord(StageRecord, kw_only=True):
    """A fused run (scripts/fuse.py)."""

    settings: dict
    rows: int


class ScoreRecord(StageRecord, kw_only=True):
    """A run scored (scripts/score.py)."""

    measures: list
    queries: int
    lineage: dict
