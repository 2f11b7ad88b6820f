"""What every stage's record holds, and the error of one that does not fit its type.

A record type is a msgspec ``Struct``: frozen, its fields keyword-only, and closed
(``forbid_unknown_fields``: a field the stage does not declare is refused). A stage that records
a model's or a scorer's provenance, whose keys each model or reranker type gives, is open:
``forbid_unknown_fields=False`` among its class arguments. ``irflow.core.records.check`` has
msgspec check a record's facts against its type, strictly (a bool is not an int, nor is a numpy
integer; an int passes for a float; None only where the type allows it)."""

from __future__ import annotations

from typing import ClassVar

import msgspec


class RecordError(ValueError):
    """A stage's record that does not fit its declared type."""


class StageRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
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
    # A record's facts beyond its declared fields, as read back (records.parse).
    extra: dict = msgspec.field(default_factory=dict)

    # Names older manifests used for a field: read as the field's.
    legacy: ClassVar[dict[str, str]] = {}
