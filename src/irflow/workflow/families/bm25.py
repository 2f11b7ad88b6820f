"""bm25: lexical BM25 over the filtered corpus (bm25s; irflow.retrieval.bm25), indexed once per
dataset and retriever by rule index_bm25 (rules/index.smk) and searched memory-mapped."""

from __future__ import annotations

from irflow.retrieval.bm25 import INDEX_SETTINGS
from irflow.workflow.families.base import (
    CostColumns,
    RetrieverFamily,
    SearchJob,
    SearchMemory,
    cpu_index_fields,
)

# The settings a published BM25 run names (config/reference/published.yaml): its index's, less
# ``delta``, which only bm25l and bm25+ read and no published run sets.
PUBLISHED_SETTINGS = tuple(key for key in INDEX_SETTINGS if key != "delta")


def index_folder(dataset: str, system: str) -> str:
    """Where a bm25 retriever's index of a dataset lies: bm25s' saved index, a folder."""
    return f"results/indexes/{dataset}/{system}.bm25s"


class Bm25Job(SearchJob):
    def open_searcher(self, files, settings, threads, *, models=None):
        from irflow.retrieval.retrieve import bm25_searcher

        return bm25_searcher(files["index"], settings["retriever"])


class Bm25Memory(SearchMemory):
    def search_mb(self, inputs, settings: dict, attempt: int = 1) -> int:
        from irflow.workflow import resources

        return resources.bm25_search_mb(inputs.index, inputs.queries, settings["top_k"], attempt)


class Bm25Cost(CostColumns):
    def cost_fields(self, cost, dataset: str, system: str) -> dict:
        return cpu_index_fields(cost.manifest("index_bm25", dataset, system))


class Bm25(RetrieverFamily):
    type = "bm25"
    schema_def = "bm25"
    steps = ("index_bm25", "search")
    search_rule = "retrieve_bm25"
    job = Bm25Job()
    memory = Bm25Memory()
    cost = Bm25Cost()

    def published_as(self, spec: dict, config: dict) -> dict:
        """BM25 by its scoring and text settings: a published BM25 names those it used."""
        return {"family": self.type} | {key: spec[key] for key in PUBLISHED_SETTINGS}

    def search_inputs(self, plan, wildcards) -> dict[str, str]:
        return plan.bm25_inputs(wildcards)


FAMILY = Bm25()
