"""dense: a SentenceTransformer's embeddings (rules/embed.smk) searched in a faiss index
(rules/index.smk; irflow.retrieval.index, irflow.retrieval.retrieve.dense_search).

A dual encoder names a ``query_model`` beside its ``model``, as DPR (BEIR,
shared/references/beir.txt line 108: "DPR [31] is a two-tower bi-encoder") encodes questions
and passages with two models. Each model's vectors are cached under its own name
(results/embeddings/<dataset>/<model>/), so a document model's vectors serve every retriever
that names it, and the queries are the query model's vectors (rules/embed.smk,
embed_query_model where it embeds no documents).

A retriever's entry is typed where a method receives it (irflow.core.settings_types.Dense), and
its models' entries where they are loaded (irflow.core.settings_types.ModelModel)."""

from __future__ import annotations

from pathlib import Path

from irflow.core.config import missing_key
from irflow.core.settings_types import Dense as Entry
from irflow.core.settings_types import ModelModel
from irflow.workflow.families.base import CostColumns, RetrieverFamily, SearchJob, SearchMemory


class DenseJob(SearchJob):
    def open_searcher(self, files, settings, threads, *, models=None):
        import faiss

        from irflow.retrieval.retrieve import DenseSearcher

        faiss.omp_set_num_threads(threads)
        retriever = Entry.model_validate(settings["retriever"])
        encode = None
        if models is not None:
            encode = QueryEncoder(models[query_model(retriever)], files.get("onnx"), threads)
        return DenseSearcher(
            files.get("index"),
            settings["index"],
            files["corpus"],
            retriever.query_batch_size,
            passages=files.get("passages"),
            encode=encode,
        )


class DenseMemory(SearchMemory):
    def search_mb(self, inputs, settings: dict, attempt: int = 1) -> int:
        from irflow.workflow import resources

        return resources.dense_search_mb(
            index_file(inputs), inputs.queries, settings["index"], attempt, documents=inputs.corpus
        )


class DenseCost(CostColumns):
    def latency(self, cost, dataset: str, system: str) -> dict[str, float]:
        """The query's encoding, then its search."""
        from irflow.evaluation.cost import in_sequence

        model = query_model(cost.config["retrievers"][system])
        encode = cost.manifest("embed", dataset, model, "queries").latency
        return in_sequence(encode, cost.manifest("retrieve", dataset, system).latency)

    def cost_fields(self, cost, dataset: str, system: str) -> dict:
        from irflow.core.settings_types import Index
        from irflow.data.passages import document_side
        from irflow.evaluation.cost import encode_throughput, recall_fields
        from irflow.retrieval.exact_search import searched_in_shards

        spec = Entry.model_validate(cost.config["retrievers"][system])
        # A flat index searched in shards has no index job: no file, no build.
        if searched_in_shards(Index.model_validate(cost.config["indexes"][spec.index])):
            index_bytes, index_seconds = 0, 0.0
        else:
            index = cost.manifest("index", dataset, spec.model, spec.index)
            index_bytes, index_seconds = index.index_bytes, index.index_seconds
        # Rows per second: documents, or passages for a model that splits documents.
        side = document_side(cost.config["models"][spec.model])
        corpus = cost.manifest("embed", dataset, spec.model, side)
        return {
            "index_bytes": index_bytes,
            "index_build_seconds": index_seconds,
            "encode_docs_per_second": encode_throughput(corpus),
            "device": corpus.device,
            # How its vectors were compared (the model's own unless the config set one); None
            # in a manifest from before irflow recorded it.
            "similarity": corpus.similarity,
        } | recall_fields(cost.manifest("retrieve", dataset, system).recall or {})


class Dense(RetrieverFamily):
    type = "dense"
    schema_def = "dense"
    steps = ("encode", "index", "search")
    encoder = "embeddings"
    search_rule = "retrieve_dense"
    gpu = True
    # The document model, then the query model of a dual encoder.
    model_keys = ("model", "query_model")
    job = DenseJob()
    memory = DenseMemory()
    cost = DenseCost()

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        problems = super().problems(name, spec, config)
        index = Entry.model_validate(spec).index
        if index not in config["indexes"]:
            key = f"retrievers.{name}.index"
            problems.append(missing_key(key, index, "indexes", config["indexes"]))
        return problems

    def search_settings(self, spec: dict, config: dict) -> dict:
        """The index's entry, as the config holds it."""
        return {"index": config["indexes"][Entry.model_validate(spec).index]}

    def search_inputs(self, plan, wildcards) -> dict[str, str]:
        return plan.dense_inputs(wildcards)


class QueryEncoder:
    """Encodes query texts with the retriever's model (its ``models`` entry, the job's params'
    dict, typed here) as its embed job encodes the scored split's queries (its
    ``query_prompt``), the model loaded at the first call."""

    def __init__(self, entry: dict | ModelModel, onnx: Path | None, threads: int):
        self.spec = ModelModel.model_validate(entry)
        self.onnx, self.threads = onnx, threads
        self.encoder = None

    def __call__(self, texts: list[str]):
        if self.encoder is None:
            import torch

            from irflow.encoding.models import Encoder

            torch.set_num_threads(self.threads)
            self.encoder = Encoder.load(self.spec, self.onnx)
        return self.encoder.encode(texts, self.spec.query_prompt)

    @property
    def provenance(self) -> dict | None:
        """The loaded model's provenance (None before it encoded anything)."""
        return self.encoder.provenance if self.encoder else None


def query_model(spec: dict | Entry) -> str:
    """The key of ``models`` that encodes a dense retriever's queries (its entry: the config's
    dict, typed here, or typed): its ``query_model``, or its ``model`` where it names none."""
    entry = Entry.model_validate(spec)
    return entry.query_model or entry.model


def index_file(inputs) -> str | None:
    """A retrieve job's faiss index file; None for a flat index searched in shards."""
    return inputs.index if "index" in inputs.keys() else None


FAMILY = Dense()
