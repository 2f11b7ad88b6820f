"""records: each stage's manifest as a declared type, as irflow.core.contracts declares the
Parquet files (and MTEB's ``TaskResult`` its results).

A job's manifest (irflow.core.manifest) is written as one of these records: writing checks
every declared field's type, that the required ones are there, and that no field is
misspelt, each failure a ``RecordError`` naming the stage and the field. Readers (the cost
table) take the typed record (``read_record``), one name per concept: the seconds an index
took to build are ``index_seconds`` in every stage that builds one.

A stage whose facts are all its own declares them all (``open = False``), and any other field
is refused. A stage that records a model's or a scorer's provenance, whose keys each model or
reranker type gives, is ``open``: its declared fields are checked, and an other field is
refused only where it is a near-miss of a declared name (``encode_second`` for
``encode_seconds``). The JSON written is what it was: the ``manifests`` view of the database
shows the same records.
"""

from __future__ import annotations

import difflib
import json
import numbers
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar


class RecordError(ValueError):
    """A stage's record that does not fit its declared type."""


@dataclass(frozen=True, kw_only=True)
class StageRecord:
    """What every manifest holds: the job's stage and wildcards, the dataset's checksum and
    the md5 of its settings stamp (where it has them), and its timing and environment."""

    stage: str
    started_at: str | None = None
    wall_seconds: float | None = None
    peak_rss_bytes: int | None = None
    host: str | None = None
    python: str | None = None
    packages: dict | None = None
    dataset_checksum: str | None = None
    settings_md5: str | None = None
    # The rules' wildcards (a job's manifest records those of its rule).
    dataset: str | None = None
    system: str | None = None
    model: str | None = None
    index: str | dict | None = None
    side: str | None = None
    shard: str | None = None
    shards: str | None = None
    family: str | None = None
    backend: str | None = None
    reranker: str | None = None
    split: str | None = None
    export: str | None = None
    # An open record's facts beyond its declared fields.
    extra: dict = field(default_factory=dict)

    open: ClassVar[bool] = True
    # Names older manifests used for a field: read as the field's.
    legacy: ClassVar[dict[str, str]] = {}


@dataclass(frozen=True, kw_only=True)
class IndexRecord(StageRecord):
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

    open: ClassVar[bool] = False
    legacy: ClassVar[dict[str, str]] = {"build_seconds": "index_seconds"}


@dataclass(frozen=True, kw_only=True)
class Bm25IndexRecord(StageRecord):
    """A BM25 index built by rule index_bm25 (irflow.retrieval.bm25.build_index)."""

    settings: dict
    device: str
    index_seconds: float
    index_bytes: int
    documents: int
    terms: int
    postings: int

    open: ClassVar[bool] = False


@dataclass(frozen=True, kw_only=True)
class RetrieveRecord(StageRecord):
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

    open: ClassVar[bool] = False


@dataclass(frozen=True, kw_only=True)
class EncodeRecord(StageRecord):
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


@dataclass(frozen=True, kw_only=True)
class RerankRecord(StageRecord):
    """A reranked run (scripts/rerank.py), with its scorer's provenance (open: its keys are
    the reranker type's)."""

    settings: dict
    first_stage: str
    k: int
    latency: dict
    rows: int
    device: str


@dataclass(frozen=True, kw_only=True)
class ScoreRecord(StageRecord):
    """A run scored (scripts/score.py)."""

    measures: list
    queries: int
    lineage: dict

    open: ClassVar[bool] = False


@dataclass(frozen=True, kw_only=True)
class FuseRecord(StageRecord):
    """A fused run (scripts/fuse.py)."""

    settings: dict
    rows: int

    open: ClassVar[bool] = False


_COMMON = {f.name for f in fields(StageRecord)}

# Each stage's record type. A stage not named here (yet) writes an open record, unchecked but
# for its stage, and is read as a StageRecord with its own facts in ``extra``.
TYPES: dict[str, type[StageRecord]] = {
    "index": IndexRecord,
    "index_bm25": Bm25IndexRecord,
    "retrieve": RetrieveRecord,
    "embed": EncodeRecord,
    "embed_shard": EncodeRecord,
    "encode_vectors": EncodeRecord,
    "encode_vectors_shard": EncodeRecord,
    "rerank": RerankRecord,
    "score": ScoreRecord,
    "fuse": FuseRecord,
}


def record_type(stage: str) -> type[StageRecord]:
    """The record type of ``stage``: StageRecord for a stage not yet typed."""
    return TYPES.get(stage, StageRecord)


def _declared(kind: type[StageRecord]) -> dict[str, tuple[Any, bool]]:
    """Each declared field: its type and whether it is required."""
    hints = typing.get_type_hints(kind)
    return {
        f.name: (hints[f.name], f.default is MISSING and f.default_factory is MISSING)
        for f in fields(kind)
        if f.name != "extra"
    }


def _misspelt(name: str, kind: type[StageRecord]) -> str | None:
    """The field of the record's own that ``name`` is a near-miss of (``encode_second`` for
    ``encode_seconds``); not a longer name that starts with it (``similarity_from``)."""
    own = [f.name for f in fields(kind) if f.name not in _COMMON]
    for near in difflib.get_close_matches(name, own, n=3, cutoff=0.9):
        if not (name.startswith(near + "_") or near.startswith(name + "_")):
            return near
    return None


def _fits(value, hint) -> bool:
    """Whether a JSON value (or the Python value about to be written as one) is of ``hint``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_fits(value, part) for part in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if isinstance(value, bool):
        return hint is bool
    if hint is int:
        return isinstance(value, numbers.Integral)
    if hint is float:
        return isinstance(value, numbers.Real)
    return isinstance(value, typing.get_origin(hint) or hint)


def check(facts: dict) -> type[StageRecord]:
    """Raise RecordError unless ``facts`` fit the record type of its ``stage``; that type."""
    stage = facts.get("stage")
    if not isinstance(stage, str):
        raise RecordError(f"a manifest record needs its stage (a string), not {stage!r}")
    kind = record_type(stage)
    if kind is StageRecord:
        return kind
    declared = _declared(kind)
    for name in sorted(set(facts) - set(declared)):
        near = _misspelt(name, kind)
        if not kind.open or near:
            hint = f" (did you mean {near!r}?)" if near else ""
            raise RecordError(f"the {stage} record has no field {name!r}{hint}")
    for name, (hint, required) in declared.items():
        if name not in facts:
            if required:
                raise RecordError(f"the {stage} record lacks its field {name!r}")
        elif not _fits(facts[name], hint):
            raise RecordError(
                f"the {stage} record's field {name!r} is {facts[name]!r} "
                f"({type(facts[name]).__name__}), not {_name(hint)}"
            )
    return kind


def parse(facts: dict) -> StageRecord:
    """The typed record of a manifest's facts, as read back: a name an older irflow used reads
    as today's, a field it did not record reads None, and a field no longer declared is kept
    in ``extra``."""
    kind = record_type(facts.get("stage", ""))
    facts = {kind.legacy.get(name, name): value for name, value in facts.items()}
    declared = _declared(kind)
    known = {name: facts.get(name) for name in declared}
    return kind(**known, extra={k: v for k, v in facts.items() if k not in declared})


def read_record(path: Path) -> StageRecord:
    """The typed record of the manifest at ``path``."""
    return parse(json.loads(path.read_text()))


def _name(hint) -> str:
    return getattr(hint, "__name__", None) or str(hint)
