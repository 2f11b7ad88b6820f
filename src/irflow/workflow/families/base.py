"""base: what the workflow knows of a retriever family, the protocol each family implements.

A family is the ``type`` of a retriever entry (bm25, dense, ...). Its one module under
irflow.workflow.families says everything the rules, the config check, the memory requests and
the cost table need: its schema fragment, its steps and where their outputs go, whether its
encoding wants a GPU, its search job's memory model and its cost fields. The computation itself
stays in irflow.retrieval and irflow.encoding; a family calls it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

from irflow.core import contracts
from irflow.core.config import missing_key, torch_problems
from irflow.evaluation.cost import CostModel, encode_throughput, in_sequence, recall_fields
from irflow.retrieval.runs import QuerySearcher, SearchRequest
from irflow.workflow import resources


def named_paths(inputs) -> dict[str, Path]:
    """A job's named inputs (Snakemake's, or a dict) that are one file or folder each, by name:
    what a family's searcher opens, without Snakemake's input object."""
    return {name: Path(value) for name, value in inputs.items() if isinstance(value, (str, Path))}


def cpu_index_fields(index) -> dict:
    """The cost table's fields for an index built on the CPU from its stage record (BM25's,
    Lucene's): its size and build time."""
    return {
        "index_bytes": index.index_bytes,
        "index_build_seconds": index.index_seconds,
        "device": "cpu",
    }


class RetrieverFamily:
    """One retriever family. Class attributes describe it; methods take the retriever's config
    entry (``spec``) and the validated config."""

    # The ``type`` a retriever entry names.
    type: str
    # Its entry's schema: the name of its fragment in config/config.schema.yaml's $defs, the
    # one source of config validation and of the reference (docs/configuration.md). (A family
    # installed as an entry point has none there: irflow.core.plugins.Registry.with_installed.)
    schema_def: str | None = None
    # Its steps, in order: encode (documents and queries, into results/<encoder>/), index
    # (a faiss index of the encoded documents, rules/index.smk), search, or import (a run made
    # outside irflow).
    steps: tuple[str, ...] = ("search",)
    encoder: str | None = None
    # The rule that makes its runs, and the stage its run manifests are filed under.
    search_rule: str = "retrieve_python"
    run_stage: str = "retrieve"
    # Its encode step wants a GPU (the encode rules ask for ``resources: gpu=1``).
    gpu: bool = False

    # The keys of its entry that name a key of ``models``.
    model_keys: tuple[str, ...] = ("model",)

    def models(self, spec: dict) -> list[str]:
        """The keys of ``models`` it encodes with, in the order of ``model_keys``, each once."""
        return list(dict.fromkeys(spec[key] for key in self.model_keys if key in spec))

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        """What is wrong with retriever ``name`` beyond its schema, each naming its key."""
        return [
            missing_key(f"retrievers.{name}.{key}", spec[key], "models", config["models"])
            for key in self.model_keys
            if key in spec and spec[key] not in config["models"]
        ]

    def published_as(self, spec: dict, config: dict) -> dict:
        """Which published system this retriever is (irflow.evaluation.published): its family
        and, under each of its ``model_keys``, the Hugging Face id of that model (``hub_id``
        where ``id`` is a local folder)."""
        identity = {"family": self.type}
        for key in self.model_keys:
            if key in spec:
                entry = config["models"][spec[key]]
                identity[key] = entry.get("hub_id") or entry["id"]
        return identity

    def search_settings(self, spec: dict, config: dict) -> dict:
        """Settings beyond the entry that determine its run (the retrieve job's params)."""
        return {}

    def search_mb(self, inputs, settings: dict, attempt: int = 1) -> int:
        """The memory its search job asks for (irflow.workflow.resources). By default BM25's
        model, per MB of corpus text: a retriever run in Python holds the corpus table, its
        texts as Python strings and its own index of them, as BM25 does."""
        return resources.bm25_mb(inputs.corpus, attempt)

    def search_inputs(self, plan, wildcards) -> dict[str, str]:
        """Its retrieve job's inputs (``plan``: irflow.workflow.run_inputs.Plan): the files its
        searcher opens and the ``queries`` it searches. By default the filtered corpus and
        queries, which a retriever of query texts reads."""
        base = f"results/datasets/{wildcards.dataset}"
        return {
            "source": f"{base}/source.json",
            "corpus": f"{base}/filtered/corpus.parquet",
            "queries": f"{base}/filtered/queries.parquet",
        }

    def split_search_inputs(self, plan, dataset: str, system: str) -> dict[str, str]:
        """What its searcher reads to search the query texts of a split the retrieve jobs do
        not run (a negatives or qc_candidates job): its retrieve job's files, less the
        queries."""
        wildcards = SimpleNamespace(dataset=dataset, system=system)
        inputs = self.search_inputs(plan, wildcards)
        return {name: path for name, path in inputs.items() if name not in ("source", "queries")}

    def open_searcher(
        self, files: dict[str, Path], settings: dict, threads: int, *, models: dict | None = None
    ) -> QuerySearcher | None:
        """Its searcher (irflow.retrieval.runs.QuerySearcher), from ``files`` (its retrieve
        job's inputs, or ``split_search_inputs``) and ``settings`` (the retrieve job's, or a
        split's ``retrieval``); ``models``, the config's, give a model that encodes query
        texts. None for a family that searches nothing here (its runs are imported)."""
        return None

    def search(self, inputs, settings: dict, threads: int) -> tuple:
        """The run and timing of one retrieve job (scripts/retrieve.py), from its named inputs
        (Snakemake's, or a dict), of which its search reads the paths (``named_paths``)."""
        return self.search_files(named_paths(inputs), settings, threads)

    def search_files(self, files: dict[str, Path], settings: dict, threads: int) -> tuple:
        """The run and timing of a search of ``files``' ``queries``: its searcher's."""
        searcher = self.open_searcher(files, settings, threads)
        if searcher is None:
            raise NotImplementedError(f"{self.type} runs are not made by scripts/retrieve.py")
        queries = contracts.read_table(files["queries"])
        return searcher.search(queries, SearchRequest.of(settings))

    @property
    def searches(self) -> bool:
        """Whether it opens a searcher, which searches any split's query texts."""
        return type(self).open_searcher is not RetrieverFamily.open_searcher

    def latency(self, cost: CostModel, dataset: str, system: str) -> dict[str, float]:
        """Per-query seconds of its first stage, as its search job measured them."""
        return cost.manifest(self.run_stage, dataset, system).latency

    def cost_fields(self, cost: CostModel, dataset: str, system: str) -> dict:
        """Its index and encoding columns of the cost table (irflow.evaluation.cost)."""
        retrieve = cost.manifest(self.run_stage, dataset, system)
        return {"index_build_seconds": retrieve.index_seconds, "device": "cpu"}


class EncodedVectors(RetrieverFamily):
    """A family whose model encodes documents and queries into vectors under
    results/<encoder>/ (rules/vectors.smk) and whose search job reads them whole: learned
    sparse and late interaction. The search job builds its index from the encoded file."""

    steps = ("encode", "search")
    search_rule: str
    gpu = True

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        """Its encoder runs on torch: a model with an ONNX backend is refused."""
        key = f"retrievers.{name}.model"
        return super().problems(name, spec, config) + torch_problems(config, key, spec["model"])

    def load_encoder(self, spec: dict):
        """The model of the encode jobs (scripts/vectors_encode.py), from its config entry."""
        raise NotImplementedError

    def encode_facts(self, encoder, texts, side: str, shard: tuple[int, int]) -> dict:
        """What an encode job's manifest records beyond irflow.encoding.encode_parts' facts."""
        return {}

    def search_inputs(self, plan, wildcards) -> dict[str, str]:
        return plan.vector_search_inputs(wildcards)

    def open_searcher(self, files, settings, threads, *, models=None):
        """A searcher of query texts: its model encodes them as its encode job encodes the
        scored split's queries, and its ``search`` reads them as it reads those."""
        return EncodedQueries(
            self, files, settings, threads, models[settings["retriever"]["model"]]
        )

    def search_mb(self, inputs, settings: dict, attempt: int = 1) -> int:
        index = settings["retriever"].get("index")
        return resources.vector_search_mb(inputs.corpus, attempt, index)

    def latency(self, cost: CostModel, dataset: str, system: str) -> dict[str, float]:
        """The query's encoding, then its search."""
        model = cost.config["retrievers"][system]["model"]
        encode = cost.manifest(self.encoder, dataset, model, "queries").latency
        return in_sequence(encode, cost.manifest("retrieve", dataset, system).latency)

    def cost_fields(self, cost: CostModel, dataset: str, system: str) -> dict:
        # The index is the documents' vectors as searched: a CSR matrix (sparse) or every
        # token vector (late interaction), built by the retrieve job from the encoded file.
        retrieve = cost.manifest("retrieve", dataset, system)
        model = cost.config["retrievers"][system]["model"]
        corpus = cost.manifest(self.encoder, dataset, model, "corpus")
        return {
            "index_bytes": retrieve.index_bytes,
            "index_build_seconds": retrieve.index_seconds,
            "encode_docs_per_second": encode_throughput(corpus),
            "nnz_per_document": retrieve.nnz_per_document,
            "tokens_per_document": retrieve.tokens_per_document,
            "device": corpus.device,
        } | recall_fields(retrieve.recall or {})


class EncodedQueries:
    """The searcher of an ``EncodedVectors`` family, whose search reads encoded query files:
    the family's model (``model``, its ``models`` entry) encodes a query table's texts into such
    a file, which ``family.search`` searches with its ``files`` (the documents' vectors)."""

    def __init__(self, family: EncodedVectors, files: dict, settings: dict, threads: int, model):
        self.family, self.files, self.settings, self.threads = family, files, settings, threads
        self.model_spec, self.encoder = model, None

    def search(self, queries, request: SearchRequest) -> tuple:
        if self.encoder is None:
            import torch

            torch.set_num_threads(self.threads)
            self.encoder = self.family.load_encoder(self.model_spec)
        texts = queries.column("text").to_pylist()
        ids = queries.column("query_id").to_pylist()
        table = self.encoder.table(ids, self.encoder.encode(texts, "queries"))
        settings = self.settings | {
            "top_k": request.top_k,
            "remove_self_matches": request.remove_self_matches,
            "latency_queries": request.latency_queries,
        }
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "queries.parquet"
            contracts.write_file(table, path)
            return self.family.search_files(self.files | {"queries": path}, settings, self.threads)
