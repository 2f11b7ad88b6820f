"""bm25: lexical BM25 over the filtered corpus (bm25s; irflow.retrieval.retrieve.BM25Retriever)."""

from __future__ import annotations

from pathlib import Path

from irflow.evaluation.cost import CostModel
from irflow.workflow.families.base import RetrieverFamily


class Bm25(RetrieverFamily):
    type = "bm25"
    schema_def = "bm25"
    search_rule = "retrieve_bm25"

    def search(self, inputs, settings: dict, threads: int) -> tuple:
        from irflow.retrieval.retrieve import bm25_search

        return bm25_search(
            Path(inputs.corpus),
            Path(inputs.queries),
            settings["retriever"],
            settings["top_k"],
            settings["remove_self_matches"],
            settings["latency_queries"],
        )

    def cost_fields(self, cost: CostModel, dataset: str, system: str) -> dict:
        retrieve = cost.manifest("retrieve", dataset, system)
        return {
            "index_bytes": retrieve["index_bytes"],
            "index_build_seconds": retrieve["index_seconds"],
            "device": "cpu",
        }


FAMILY = Bm25()
