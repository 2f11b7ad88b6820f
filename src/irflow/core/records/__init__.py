"""records: each stage's manifest as a declared type, as irflow.core.contracts declares the
Parquet files (and MTEB's ``TaskResult`` its results).

A job's manifest (irflow.core.manifest) is written as one of these records: writing checks
every declared field's type, that the required ones are there, and that no field is
misspelt, each failure a ``RecordError`` naming the stage and the field. Every stage has its
type in ``TYPES`` (the retrieval side's in ``records.retrieval``, the dataset side's in
``records.datasets``); a stage without one is refused, its manifest not written. Readers (the
cost table) take the typed record (``read_record``), one name per concept: the seconds an
index took to build are ``index_seconds`` in every stage that builds one.

A stage whose facts are all its own declares them all, and any other field is refused (the
default). A stage that records a model's or a scorer's provenance, whose keys each model or
reranker type gives, is ``open = True``: its declared fields are checked, and an other field is
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
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from irflow.core.errors import DamagedFileError
from irflow.core.records.base import RecordError, StageRecord
from irflow.core.records.datasets import (
    CurateRecord,
    DeriveRecord,
    ExpandRecord,
    FilterRecord,
    GenerateRecord,
    IngestRecord,
    LabelAuditRecord,
    NegativesRecord,
    PassagesRecord,
    PositionalizeRecord,
    QcCandidatesRecord,
    QcVotesRecord,
    QualityControlRecord,
)
from irflow.core.records.retrieval import (
    Bm25IndexRecord,
    EncodeRecord,
    ExternalRunRecord,
    FuseRecord,
    IndexRecord,
    LuceneIndexRecord,
    OnnxExportRecord,
    RerankRecord,
    RetrieveRecord,
    ScoreRecord,
)

__all__ = ["TYPES", "RecordError", "StageRecord", "check", "parse", "read_record", "record_type"]

_COMMON = {f.name for f in fields(StageRecord)}

# Each stage's record type: the stage a script names to scripts/_common.start_job (or
# start_encode_job, and its ``_shard``).
TYPES: dict[str, type[StageRecord]] = {
    # The dataset side.
    "ingest": IngestRecord,
    "filter": FilterRecord,
    "curate": CurateRecord,
    "derive": DeriveRecord,
    "passages": PassagesRecord,
    "generate": GenerateRecord,
    "expand": ExpandRecord,
    "positionalize": PositionalizeRecord,
    "qc_candidates": QcCandidatesRecord,
    "qc_votes": QcVotesRecord,
    "quality_control": QualityControlRecord,
    "label_audit": LabelAuditRecord,
    "negatives": NegativesRecord,
    # The retrieval side.
    "embed": EncodeRecord,
    "embed_shard": EncodeRecord,
    "encode_vectors": EncodeRecord,
    "encode_vectors_shard": EncodeRecord,
    "onnx_export": OnnxExportRecord,
    "index": IndexRecord,
    "index_bm25": Bm25IndexRecord,
    "index_lucene": LuceneIndexRecord,
    "retrieve": RetrieveRecord,
    "external_run": ExternalRunRecord,
    "rerank": RerankRecord,
    "fuse": FuseRecord,
    "score": ScoreRecord,
}


def record_type(stage: str) -> type[StageRecord]:
    """The record type of ``stage``; RecordError for a stage that has none."""
    try:
        return TYPES[stage]
    except KeyError:
        raise RecordError(
            f"stage {stage!r} has no declared record type: declare its fields in "
            "irflow.core.records and add it to records.TYPES"
        ) from None


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
    in ``extra``. A stage without a record type is a RecordError, as when it is written."""
    kind = record_type(facts.get("stage", ""))
    facts = {kind.legacy.get(name, name): value for name, value in facts.items()}
    declared = _declared(kind)
    known = {name: facts.get(name) for name in declared}
    return kind(**known, extra={k: v for k, v in facts.items() if k not in declared})


def read_record(path: Path) -> StageRecord:
    """The typed record of the manifest at ``path``; a DamagedFileError names it when it is
    not JSON (truncated, not UTF-8)."""
    try:
        record = json.loads(path.read_bytes())
    except ValueError as error:
        raise DamagedFileError(path, f"not JSON: {error}") from error
    return parse(record)


def _name(hint) -> str:
    return getattr(hint, "__name__", None) or str(hint)
