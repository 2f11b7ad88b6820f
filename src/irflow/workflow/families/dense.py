"""dense: a SentenceTransformer's embeddings (rules/embed.smk) searched in a faiss index
(rules/index.smk; irflow.retrieval.index, irflow.retrieval.retrieve.dense_search)."""

from __future__ import annotations

from pathlib import Path

from irflow.core.config import missing_key
from irflow.data.passages import document_side
from irflow.evaluation.cost import CostModel, encode_throughput, in_sequence, recall_fields
from irflow.retrieval.exact_search import searched_in_shards
from irflow.workflow import resources
from irflow.workflow.families.base import RetrieverFamily


class Dense(RetrieverFamily):
    type = "dense"
    schema_def = "dense"
    steps = ("encode", "index", "search")
    encoder = "embeddings"
    search_rule = "retrieve_dense"
    gpu = True

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        problems = super().problems(name, spec, config)
        if spec["index"] not in config["indexes"]:
            key = f"retrievers.{name}.index"
            problems.append(missing_key(key, spec["index"], "indexes", config["indexes"]))
        return problems

    def search_settings(self, spec: dict, config: dict) -> dict:
        return {"index": config["indexes"][spec["index"]]}

    def search_mb(self, inputs, settings: dict, attempt: int = 1) -> int:
        return resources.dense_search_mb(
            index_file(inputs), inputs.queries, settings["index"], attempt, documents=inputs.corpus
        )

    def search(self, inputs, settings: dict, threads: int) -> tuple:
        import faiss

        from irflow.retrieval.retrieve import dense_search

        faiss.omp_set_num_threads(threads)
        index = index_file(inputs)
        return dense_search(
            Path(index) if index else None,
            settings["index"],
            Path(inputs.corpus),
            Path(inputs.queries),
            settings["top_k"],
            settings["remove_self_matches"],
            batch_size=settings["retriever"]["query_batch_size"],
            latency_queries=settings["latency_queries"],
            passages=Path(inputs.passages) if "passages" in inputs.keys() else None,
        )

    def latency(self, cost: CostModel, dataset: str, system: str) -> dict[str, float]:
        """The query's encoding, then its search."""
        model = cost.config["retrievers"][system]["model"]
        encode = cost.manifest("embed", dataset, model, "queries").latency
        return in_sequence(encode, cost.manifest("retrieve", dataset, system).latency)

    def cost_fields(self, cost: CostModel, dataset: str, system: str) -> dict:
        spec = cost.config["retrievers"][system]
        # A flat index searched in shards has no index job: no file, no build.
        if searched_in_shards(cost.config["indexes"][spec["index"]]):
            index_bytes, index_seconds = 0, 0.0
        else:
            index = cost.manifest("index", dataset, spec["model"], spec["index"])
            index_bytes, index_seconds = index.index_bytes, index.index_seconds
        # Rows per second: documents, or passages for a model that splits documents.
        side = document_side(cost.config["models"][spec["model"]])
        corpus = cost.manifest("embed", dataset, spec["model"], side)
        return {
            "index_bytes": index_bytes,
            "index_build_seconds": index_seconds,
            "encode_docs_per_second": encode_throughput(corpus),
            "device": corpus.device,
            # How its vectors were compared (the model's own unless the config set one); None
            # in a manifest from before irflow recorded it.
            "similarity": corpus.similarity,
        } | recall_fields(cost.manifest("retrieve", dataset, system).recall or {})


def index_file(inputs) -> str | None:
    """A retrieve job's faiss index file; None for a flat index searched in shards."""
    return inputs.index if "index" in inputs.keys() else None


FAMILY = Dense()
