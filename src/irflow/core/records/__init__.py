"""records: each stage's manifest as a declared type, as irflow.core.contracts declares the
Parquet files (and MTEB's ``TaskResult`` its results).

A job's manifest (irflow.core.manifest) is written as one of these records, msgspec ``Struct``
types (records.base): writing has msgspec check every declared field's type, strictly, and
that the required ones are there, and checks that no field is misspelt, each failure a
``RecordError`` naming the stage and the field. Every stage has its
type in ``TYPES`` (the retrieval side's in ``records.retrieval``, the dataset side's in
``records.datasets``); a stage without one is refused, its manifest not written. Readers (the
cost table) take the typed record (``read_record``), one name per concept: the seconds an
index took to build are ``index_seconds`` in every stage that builds one.

A stage whose facts are all its own declares them all, and any other field is refused (the
default). A stage that records a model's or a scorer's provenance, whose keys each model or
reranker type gives, is open (``forbid_unknown_fields=False``): its declared fields are
checked, and an other field is refused only where it is a near-miss of a declared name
(``encode_second`` for ``encode_seconds``). The JSON written is what it was: the
``manifests`` view of the database shows the same records.
"""

from __future__ import annotations

import difflib
import functools
import json
from pathlib import Path

import msgspec

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


@functools.cache
def _declared(kind: type[StageRecord]) -> dict[str, msgspec.structs.FieldInfo]:
    """Each field the stage's record declares (``extra`` is for reading back only); once per
    type, as ``check`` and ``_misspelt`` ask for every record and every undeclared name."""
    return {f.name: f for f in msgspec.structs.fields(kind) if f.name != "extra"}


def _misspelt(name: str, kind: type[StageRecord]) -> str | None:
    """The field of the record's own that ``name`` is a near-miss of (``encode_second`` for
    ``encode_seconds``); not a longer name that starts with it (``similarity_from``)."""
    own = [field for field in _declared(kind) if field not in StageRecord.__struct_fields__]
    for near in difflib.get_close_matches(name, own, n=3, cutoff=0.9):
        if not (name.startswith(near + "_") or near.startswith(name + "_")):
            return near
    return None


def check(facts: dict) -> type[StageRecord]:
    """Raise RecordError unless ``facts`` fit the record type of its ``stage``; that type.

    irflow checks the names (a field not declared, a near-miss of a declared one in an open
    record), then each declared field in its order: a required one missing, or a value msgspec
    does not take for the field's type (``msgspec.convert``, strict), the first failure told."""
    stage = facts.get("stage")
    if not isinstance(stage, str):
        raise RecordError(f"a manifest record needs its stage (a string), not {stage!r}")
    kind = record_type(stage)
    declared = _declared(kind)
    for name in sorted(set(facts) - set(declared)):
        near = _misspelt(name, kind)
        if kind.__struct_config__.forbid_unknown_fields or near:
            hint = f" (did you mean {near!r}?)" if near else ""
            raise RecordError(f"the {stage} record has no field {name!r}{hint}")
    for name, field in declared.items():
        if name not in facts:
            if field.required:
                raise RecordError(f"the {stage} record lacks its field {name!r}")
            continue
        try:
            msgspec.convert(facts[name], field.type, strict=True)
        except msgspec.ValidationError:
            raise RecordError(
                f"the {stage} record's field {name!r} is {facts[name]!r} "
                f"({type(facts[name]).__name__}), not {_name(field.type)}"
            ) from None
    return kind


def parse(facts: dict) -> StageRecord:
    """The typed record of a manifest's facts, as read back: a name an older irflow used reads
    as today's, a field it did not record reads None, and a field no longer declared is kept
    in ``extra``. Not checked (an older manifest may lack a field declared since). A stage
    without a record type is a RecordError, as when it is written."""
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
