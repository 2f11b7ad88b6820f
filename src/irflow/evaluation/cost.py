"""cost: what each system costs, BEIR's table 3 measured: index size and build time, encoding
throughput, a dense model's similarity (cosine or dot, as its embed manifest records),
per-query latency (median and p95) on the device that ran it, and for an approximate index
(HNSW, IVF, IVF-PQ, Voyager) its recall@top_k against exact search on the
sample of queries its retrieve job measured it on.

Encoding throughput is the corpus rows over the encoding seconds of all of them: a resumed
embedding job counts the seconds its finished parts recorded, not only its own.

Latency is measured per query, one query at a time, on the first ``latency_queries`` scored
queries; stages that run one after another (query encoding, search, reranking, each input of a
fusion) add up query by query.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import pandas as pd

from irflow.core.records import StageRecord
from irflow.core.settings_types import Fusion


def in_sequence(*latencies: dict[str, float]) -> dict[str, float]:
    """Per-query latency of stages run one after another: the sum, over queries all measured."""
    common = set.intersection(*(set(latency) for latency in latencies))
    return {query: sum(latency[query] for latency in latencies) for query in sorted(common)}


def throughput(rows: int, seconds: float) -> float:
    """Rows per second; NaN when no encoding time was recorded (a manifest from an irflow
    that counted only the time of the rows it encoded itself, after resuming all of them)."""
    return rows / seconds if seconds > 0 else float("nan")


def encode_throughput(corpus: StageRecord) -> float:
    """Documents (or passages) encoded per second by a corpus's encode job: its rows less those
    whose vectors it reused from an earlier result (dense only), over the encoding seconds."""
    return throughput(corpus.rows - (corpus.rows_reused or 0), corpus.encode_seconds)


class Manifests(Protocol):
    """The typed record (irflow.core.records) of a job's manifest, by its stage and the names
    of its path under results/manifests/<stage>/."""

    def __call__(self, stage: str, *names: str) -> StageRecord: ...


class FirstStageCost(Protocol):
    """What the cost table asks of a retriever family's cost part (its ``cost``,
    irflow.workflow.families.base.CostColumns)."""

    def latency(self, cost: CostModel, dataset: str, system: str) -> dict[str, float]: ...

    def cost_fields(self, cost: CostModel, dataset: str, system: str) -> dict: ...


class FirstStage(Protocol):
    """What the cost table asks of a retriever family (irflow.workflow.families.base): its
    cost part."""

    cost: FirstStageCost


class CostModel:
    """Cost rows for the systems of one config, from the manifests their jobs wrote; a
    retriever's part from its family's cost part (``family``: a retriever type -> its
    family)."""

    def __init__(
        self,
        config: dict,
        kinds: dict[str, str],
        manifest: Manifests,
        family: Callable[[str], FirstStage],
    ):
        self.config, self.kinds, self.manifest, self.family = config, kinds, manifest, family

    def latency(self, dataset: str, system: str) -> dict[str, float]:
        kind = self.kinds[system]
        if kind == "fusion":
            runs = Fusion.model_validate(self.config["fusion"][system]).runs
            return in_sequence(*(self.latency(dataset, run) for run in runs))
        if kind == "rerank":
            rerank = self.manifest("rerank", dataset, system)
            return in_sequence(self.latency(dataset, rerank.first_stage), rerank.latency)
        return self.family(kind).cost.latency(self, dataset, system)

    def row(self, dataset: str, system: str) -> dict:
        latency_ms = 1000 * np.array(list(self.latency(dataset, system).values()))
        measured = len(latency_ms) > 0
        row = {
            "dataset": dataset,
            "system": system,
            "kind": self.kinds[system],
            "latency_median_ms": float(np.median(latency_ms)) if measured else float("nan"),
            "latency_p95_ms": float(np.percentile(latency_ms, 95)) if measured else float("nan"),
            "latency_queries": len(latency_ms),
        }
        return row | self._index(dataset, system)

    def _index(self, dataset: str, system: str) -> dict:
        kind = self.kinds[system]
        if kind == "rerank":
            return {"device": self.manifest("rerank", dataset, system).device}
        if kind == "fusion":
            return {}
        return self.family(kind).cost.cost_fields(self, dataset, system)

    def table(self, datasets: list[str]) -> pd.DataFrame:
        rows = [self.row(d, s) for d in datasets for s in sorted(self.kinds)]
        columns = [
            "dataset",
            "system",
            "kind",
            "device",
            "index_bytes",
            "index_build_seconds",
            "encode_docs_per_second",
            "similarity",
            "nnz_per_document",
            "tokens_per_document",
            "recall_against_exact",
            "recall_queries",
            "latency_median_ms",
            "latency_p95_ms",
            "latency_queries",
        ]
        return pd.DataFrame(rows).reindex(columns=columns)


def recall_fields(recall: dict) -> dict:
    """An approximate index's recall@top_k against exact search on a sample of queries, as
    its retrieve manifest's ``recall`` block records it (faiss indexes and late interaction's
    Voyager, ``irflow.retrieval.recall``); empty for an exact search."""
    if recall.get("recall") is None:
        return {}
    return {"recall_against_exact": recall["recall"], "recall_queries": recall["queries"]}
