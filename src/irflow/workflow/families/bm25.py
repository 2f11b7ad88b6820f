"""bm25: lexical BM25 over the filtered corpus (bm25s; irflow.retrieval.bm25), indexed once per
dataset and retriever by rule index_bm25 (rules/index.smk) and searched memory-mapped."""

from __future__ import annotations

from irflow.evaluation.cost import CostModel
from irflow.workflow import resources
from irflow.workflow.families.base import RetrieverFamily, cpu_index_fields


def index_folder(dataset: str, system: str) -> str:
    """Where a bm25 retriever's index of a dataset lies: bm25s' saved index, a folder."""
    return f"results/indexes/{dataset}/{system}.bm25s"


class Bm25(RetrieverFamily):
    type = "bm25"
    schema_def = "bm25"
    steps = ("index_bm25", "search")
    search_rule = "retrieve_bm25"

    def published_as(self, spec: dict, config: dict) -> dict:
        """BM25 by its scoring and text settings: a published BM25 names those it used."""
        settings = ("method", "k1", "b", "stemmer", "stopwords", "fields")
        return {"family": self.type} | {key: spec[key] for key in settings}

    def search_mb(self, inputs, settings: dict, attempt: int = 1) -> int:
        return resources.bm25_search_mb(inputs.index, inputs.queries, settings["top_k"], attempt)

    def search_inputs(self, plan, wildcards) -> dict[str, str]:
        return plan.bm25_inputs(wildcards)

    def open_searcher(self, files, settings, threads, *, models=None):
        from irflow.retrieval.retrieve import bm25_searcher

        return bm25_searcher(files["index"], settings["retriever"])

    def cost_fields(self, cost: CostModel, dataset: str, system: str) -> dict:
        return cpu_index_fields(cost.manifest("index_bm25", dataset, system))


FAMILY = Bm25()
