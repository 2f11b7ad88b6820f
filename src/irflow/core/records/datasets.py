"""The records of the stages that make datasets and what is derived from them: ingest,
filter, a curated copy, passages; the derived datasets (generated, quality-controlled,
document-expanded, positional variants), QC's candidates and votes, the label audit and the
hard-negative exports.

A stage that makes a dataset records its ``statistics`` (those of its stats.json) and, for a
dataset made from another, the base's checksum; a stage that asked an LLM records the client's
``llm`` summary (irflow.derived.llm.client.LLMClient.summary)."""

from __future__ import annotations

from irflow.core.records.base import StageRecord


class IngestRecord(StageRecord, kw_only=True):
    """A dataset's files read into the contracts' tables (scripts/ingest.py)."""

    files: dict
    statistics: dict


class FilterRecord(StageRecord, kw_only=True):
    """A corpus filtered (irflow.data.filter.run_filter), or a document-expanded copy filtered
    as its base was (``run_filter_as_base``: ``documents_as`` names the base's corpus, and the
    rules are the base's)."""

    documents_in: int
    documents_out: int
    dropped: int
    flagged: int
    by_filter: dict | None = None
    near_duplicate_clusters: int | None = None
    queries_scored: int
    rules: dict | None = None
    documents_as: str | None = None


class CurateRecord(StageRecord, kw_only=True):
    """A curated dataset's tables, copied from its ``base`` dataset (scripts/curate.py)."""

    base: str


class DeriveRecord(StageRecord, kw_only=True):
    """A dataset its kind made from its base's tables (scripts/derive.py,
    irflow.workflow.kinds): the kind, and the statistics it gave."""

    kind: str
    base_checksum: str
    statistics: dict


class PassagesRecord(StageRecord, kw_only=True):
    """A corpus split into passages for a model (irflow.data.passages.split_corpus); the
    window and the passages longer than it where the model's window is known."""

    settings: dict
    tokenizer: dict
    documents: int
    passages: int
    passages_per_document: float
    window: int | None = None
    passages_over_window: int | None = None


class GenerateRecord(StageRecord, kw_only=True):
    """A dataset an LLM generated (scripts/generate.py): its prompts and the tokenizer that
    counted its chunks (None when words did)."""

    llm: dict
    base_checksum: str
    prompts: dict
    tokenizer: dict | None
    statistics: dict


class ExpandRecord(StageRecord, kw_only=True, forbid_unknown_fields=False):
    """A document-expanded corpus (scripts/expand.py): the seq2seq model's provenance (open:
    its keys are the model's) or the LLM's summary, and the cross-encoder that filtered the
    queries, where one did."""

    llm: dict | None = None
    filter_model: dict | None = None
    base_checksum: str
    statistics: dict


class PositionalizeRecord(StageRecord, kw_only=True):
    """A positional variant (scripts/positionalize.py): the tokenizer that counted its
    lengths, the reranker that screened its fillers (its provenance) and the BM25 settings
    that ranked its near-miss fillers, where it has them."""

    base_checksum: str
    tokenizer: dict
    statistics: dict
    screen: dict | None = None
    near_miss_bm25: dict | None = None


class QcCandidatesRecord(StageRecord, kw_only=True):
    """The QC retriever's run of a split the retrieve jobs do not cover
    (scripts/qc_candidates.py): the judged queries, those it found candidates for, and the
    provenance of the model that encoded the queries (``model``, where one did)."""

    model: dict | None = None
    split: str
    retrieval: dict
    queries: int
    queries_with_candidates: int
    rows: int


class QcVotesRecord(StageRecord, kw_only=True, forbid_unknown_fields=False):
    """One reranker's ranking of the pooled candidates (scripts/qc_votes.py, rules qc_votes
    and audit_votes), with its scorer's provenance (open: its keys are the reranker type's)."""

    settings: dict
    depth: int
    runs: list
    queries: int
    pooled: int


class QualityControlRecord(StageRecord, kw_only=True):
    """A generated dataset checked by the rerankers' votes and the LLM judge
    (scripts/quality_control.py)."""

    llm: dict
    base_checksum: str
    prompts: dict
    statistics: dict


class LabelAuditRecord(StageRecord, kw_only=True):
    """A dataset's judgements audited (scripts/label_audit.py): the LLM's summary and the
    judge's failures by reason where the judge ran."""

    llm: dict | None = None
    judge_failures: dict | None = None
    settings: dict
    systems: list
    statistics: dict


class NegativesRecord(StageRecord, kw_only=True):
    """A hard-negative export (irflow.derived.negatives.run_negatives): what it mined and what
    it dropped and why, counted, and the warnings it logged."""

    split: str
    settings: dict
    warnings: list
    queries: int
    queries_without_positive: int
    triples: int
    negatives: int
    candidates_positive: int
    candidates_above_cap: int
    candidates_not_in_corpus: int
    candidates_near_duplicate: int
    positives_not_retrieved: int
    positives_scored_directly: int
    positives_not_scored: int
    positives_not_in_corpus: int
    triples_without_negatives: int
    triples_short: int
    triples_inconsistent: int
    jsonl_rows: int
    jsonl_left_out: int
