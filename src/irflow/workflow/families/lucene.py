"""lucene: BM25 in Lucene, as Anserini runs it for Pyserini's BEIR regressions and BEIR ran it
(irflow.retrieval.lucene): a flat or multifield index, built once per dataset and layout by rule
index_lucene (rules/index.smk) and shared by every lucene retriever with that layout; k1, b and
RM3 or Rocchio feedback are search-time settings of rule retrieve_lucene. Java is looked for by
the jobs, not the config check: with --use-conda the jobs' env (envs/lucene.yaml) brings its own."""

from __future__ import annotations

from irflow.workflow.families.base import (
    CostColumns,
    RetrieverFamily,
    SearchJob,
    SearchMemory,
    cpu_index_fields,
)

# The settings that make a published Lucene BM25 run (config/reference/published.yaml).
PUBLISHED_SETTINGS = ("fields", "k1", "b", "feedback")
# What a search or index job asks for: Anserini's JVM and irflow's run of its hits.
LUCENE_SEARCH_MIB = 4096


def index_folder(dataset: str, fields: str) -> str:
    """Where the Lucene index of a dataset in layout ``fields`` (flat, multifield) lies."""
    return f"results/indexes/{dataset}/lucene.{fields}"


def layouts(config: dict) -> list[str]:
    """The layouts the config's lucene retrievers search, each indexed once per dataset."""
    return sorted(
        {spec["fields"] for spec in config["retrievers"].values() if spec["type"] == "lucene"}
    )


class LuceneJob(SearchJob):
    def open_searcher(self, files, settings, threads, *, models=None):
        from irflow.retrieval.lucene import LuceneRetriever
        from irflow.retrieval.retrieve import TextSearcher

        retriever = LuceneRetriever(files["index"], settings["retriever"], threads)
        return TextSearcher(retriever, retriever.doc_ids, reason="Lucene BM25")


class LuceneMemory(SearchMemory):
    def search_mb(self, inputs, settings: dict, attempt: int = 1) -> int:
        from irflow.workflow import resources

        # Anserini's JVM (its default heap: a quarter of the memory it is given) holds the
        # queries and their hits; the index is read through the page cache.
        return resources.request_mb(LUCENE_SEARCH_MIB, attempt)


class LuceneCost(CostColumns):
    def cost_fields(self, cost, dataset: str, system: str) -> dict:
        fields = cost.config["retrievers"][system]["fields"]
        return cpu_index_fields(cost.manifest("index_lucene", dataset, fields))


class Lucene(RetrieverFamily):
    type = "lucene"
    schema_def = "lucene"
    steps = ("index_lucene", "search")
    search_rule = "retrieve_lucene"
    job = LuceneJob()
    memory = LuceneMemory()
    cost = LuceneCost()

    def published_as(self, spec: dict, config: dict) -> dict:
        """Lucene's BM25 by its layout, k1, b and feedback."""
        return {"family": self.type} | {key: spec[key] for key in PUBLISHED_SETTINGS}

    def search_inputs(self, plan, wildcards) -> dict[str, str]:
        base = f"results/datasets/{wildcards.dataset}"
        fields = plan.retrievers[wildcards.system]["fields"]
        return {
            "source": f"{base}/source.json",
            "index": index_folder(wildcards.dataset, fields),
            "queries": f"{base}/filtered/queries.parquet",
        }


FAMILY = Lucene()
