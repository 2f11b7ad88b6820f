"""base: what the workflow knows of a retriever family, in parts, each read by one reader.

A family is the ``type`` of a retriever entry (bm25, dense, ...). Its one module under
irflow.workflow.families defines it as four small objects, so that a job loads what it runs
and not what the plan or the cost table read:

- ``RetrieverFamily``, the plan's and the config check's: its schema fragment, its steps and
  where their outputs go, its models, whether its encoding wants a GPU, its jobs' inputs and
  settings; and its three other parts:
- ``job`` (``SearchJob``), what its jobs run: its searcher (scripts/retrieve.py, and the
  negatives and qc_candidates jobs), and for a family that encodes vectors its encoder
  (``VectorsJob``, scripts/vectors_encode.py); the family names the methods the scripts call,
  which are its job's;
- ``memory`` (``SearchMemory``), the memory its search job asks Snakemake for
  (irflow.workflow.resources);
- ``cost`` (``CostColumns``), its columns of the cost table (irflow.evaluation.cost).

The computation itself stays in irflow.retrieval and irflow.encoding: each part imports the
modules it calls where it calls them (a job's libraries, the memory model, the cost table), so
that a job that looks its family up in the registry loads none of another part's.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

from irflow.core import contracts
from irflow.core.config import missing_key, torch_problems
from irflow.retrieval.runs import QuerySearcher, SearchRequest

if TYPE_CHECKING:
    import pyarrow as pa

    from irflow.evaluation.cost import CostModel


def named_paths(inputs) -> dict[str, Path]:
    """A job's named inputs (Snakemake's, or a dict) that are one file or folder each, by name:
    what a family's searcher opens, without Snakemake's input object."""
    return {name: Path(value) for name, value in inputs.items() if isinstance(value, (str, Path))}


class SearchJob:
    """What a family's jobs run: its searcher. None by default, for a family that searches
    nothing here (its runs are imported)."""

    def open_searcher(
        self, files: dict[str, Path], settings: dict, threads: int, *, models: dict | None = None
    ) -> QuerySearcher | None:
        """Its searcher (irflow.retrieval.runs.QuerySearcher), from ``files`` (its retrieve
        job's inputs, or ``split_search_inputs``) and ``settings`` (the retrieve job's, or a
        split's ``retrieval``); ``models``, the config's, give a model that encodes query
        texts. Its ``search(queries, request)`` takes any query table."""
        return None

    def search(self, files: dict[str, Path], settings: dict, threads: int) -> tuple:
        """The run and timing of one retrieve job (scripts/retrieve.py): its searcher's search
        of ``files``' ``queries``."""
        searcher = self.open_searcher(files, settings, threads)
        if searcher is None:
            raise NotImplementedError(f"{type(self).__name__} makes no runs in scripts/retrieve.py")
        return searcher.search(contracts.read_table(files["queries"]), SearchRequest.of(settings))


class SearchMemory:
    """The memory a family's search job asks for (irflow.workflow.resources). By default BM25's
    model, per MB of corpus text: a retriever run in Python holds the corpus table, its texts as
    Python strings and its own index of them, as BM25 does."""

    def search_mb(self, inputs, settings: dict, attempt: int = 1) -> int:
        from irflow.workflow import resources

        return resources.bm25_mb(inputs.corpus, attempt)


class CostColumns:
    """A family's columns of the cost table (irflow.evaluation.cost.FirstStage), from its jobs'
    manifests. By default those of a retriever run in Python: the latency its retrieve job
    measured, and the build time of the index it built in the job, on the CPU."""

    def latency(self, cost: CostModel, dataset: str, system: str) -> dict[str, float]:
        """Per-query seconds of its first stage, as its search job measured them."""
        return cost.manifest("retrieve", dataset, system).latency

    def cost_fields(self, cost: CostModel, dataset: str, system: str) -> dict:
        """Its index and encoding columns of the cost table."""
        retrieve = cost.manifest("retrieve", dataset, system)
        return {"index_build_seconds": retrieve.index_seconds, "device": "cpu"}


def cpu_index_fields(index) -> dict:
    """The cost table's fields for an index built on the CPU from its stage record (BM25's,
    Lucene's): its size and build time."""
    return {
        "index_bytes": index.index_bytes,
        "index_build_seconds": index.index_seconds,
        "device": "cpu",
    }


class RetrieverFamily:
    """One retriever family, as the plan and the config check read it. Class attributes
    describe it; methods take the retriever's config entry (``spec``) and the validated
    config."""

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
    # Its other parts: what its jobs run, what its search job asks for, its cost columns.
    job: SearchJob = SearchJob()
    memory: SearchMemory = SearchMemory()
    cost: CostColumns = CostColumns()

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

    @property
    def searches(self) -> bool:
        """Whether its job opens a searcher, which searches any split's query texts."""
        return type(self.job).open_searcher is not SearchJob.open_searcher

    # What the workflow's scripts call (scripts/retrieve.py; negatives.py and qc_candidates.py):
    # its job's, named on the family so that the scripts stay as they were. Snakemake reruns
    # every job of a script that is newer than the job's outputs.

    def search(self, inputs, settings: dict, threads: int) -> tuple:
        """Its job's ``search`` of a retrieve job's named inputs (Snakemake's, or a dict)."""
        return self.job.search(named_paths(inputs), settings, threads)

    def open_searcher(
        self, files: dict[str, Path], settings: dict, threads: int, *, models: dict | None = None
    ) -> QuerySearcher | None:
        """Its job's searcher (``SearchJob.open_searcher``)."""
        return self.job.open_searcher(files, settings, threads, models=models)


class VectorsJob(SearchJob):
    """The jobs of a family whose model encodes documents and queries into vectors under
    results/<encoder>/ (rules/vectors.smk) and whose search reads them whole: learned sparse
    and late interaction. Its search builds its index from the documents' encoded file."""

    def load_encoder(self, spec: dict):
        """The model of the encode jobs (scripts/vectors_encode.py), from its config entry."""
        raise NotImplementedError

    def encode_facts(self, encoder, texts, side: str, shard: tuple[int, int]) -> dict:
        """What an encode job's manifest records beyond irflow.encoding.encode_parts' facts."""
        return {}

    def search_vectors(
        self, files: dict[str, Path], queries: Path | pa.Table, settings: dict, threads: int
    ) -> tuple:
        """The run and timing of a search of the query vectors ``queries`` (an encoded file,
        or such a table in memory) over ``files``' ``corpus`` vectors."""
        raise NotImplementedError

    def search(self, files: dict[str, Path], settings: dict, threads: int) -> tuple:
        """The retrieve job's search: of the query vectors its encode job wrote."""
        return self.search_vectors(files, files["queries"], settings, threads)

    def open_searcher(self, files, settings, threads, *, models=None):
        """A searcher of query texts: its model encodes them as its encode job encodes the
        scored split's queries, and ``search_vectors`` searches them as it searches those."""
        return EncodedQueries(
            self, files, settings, threads, models[settings["retriever"]["model"]]
        )


class VectorsMemory(SearchMemory):
    """The memory of a search of encoded vectors, held whole (or a Voyager index of them)."""

    def search_mb(self, inputs, settings: dict, attempt: int = 1) -> int:
        from irflow.workflow import resources

        index = settings["retriever"].get("index")
        return resources.vector_search_mb(inputs.corpus, attempt, index)


class VectorsCost(CostColumns):
    """The cost columns of a family that encodes vectors into results/<encoder>/."""

    def __init__(self, encoder: str):
        self.encoder = encoder

    def latency(self, cost: CostModel, dataset: str, system: str) -> dict[str, float]:
        """The query's encoding, then its search."""
        from irflow.evaluation.cost import in_sequence

        model = cost.config["retrievers"][system]["model"]
        encode = cost.manifest(self.encoder, dataset, model, "queries").latency
        return in_sequence(encode, cost.manifest("retrieve", dataset, system).latency)

    def cost_fields(self, cost: CostModel, dataset: str, system: str) -> dict:
        from irflow.evaluation.cost import encode_throughput, recall_fields

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


class EncodedVectors(RetrieverFamily):
    """A family whose model encodes documents and queries into vectors under
    results/<encoder>/ and whose search reads them whole (its ``job``, a ``VectorsJob``)."""

    steps = ("encode", "search")
    search_rule: str
    gpu = True
    job: VectorsJob
    memory = VectorsMemory()

    def __init__(self):
        self.cost = VectorsCost(self.encoder)

    # What scripts/vectors_encode.py calls, as ``search`` above: its job's.

    def load_encoder(self, spec: dict):
        """Its job's encoder (``VectorsJob.load_encoder``)."""
        return self.job.load_encoder(spec)

    def encode_facts(self, encoder, texts, side: str, shard: tuple[int, int]) -> dict:
        """Its job's facts of an encode job (``VectorsJob.encode_facts``)."""
        return self.job.encode_facts(encoder, texts, side, shard)

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        """Its encoder runs on torch: a model with an ONNX backend is refused."""
        key = f"retrievers.{name}.model"
        return super().problems(name, spec, config) + torch_problems(config, key, spec["model"])

    def search_inputs(self, plan, wildcards) -> dict[str, str]:
        return plan.vector_search_inputs(wildcards)


class EncodedQueries:
    """The searcher of a ``VectorsJob``: the family's model (``model``, its ``models`` entry)
    encodes a query table's texts into vectors, which ``job.search_vectors`` searches in
    memory over ``files`` (the documents' vectors)."""

    def __init__(self, job: VectorsJob, files: dict, settings: dict, threads: int, model):
        self.job, self.files, self.settings, self.threads = job, files, settings, threads
        self.model_spec, self.encoder = model, None

    def search(self, queries: pa.Table, request: SearchRequest) -> tuple:
        if self.encoder is None:
            import torch

            torch.set_num_threads(self.threads)
            self.encoder = self.job.load_encoder(self.model_spec)
        texts = queries.column("text").to_pylist()
        ids = queries.column("query_id").to_pylist()
        vectors = self.encoder.table(ids, self.encoder.encode(texts, "queries"))
        settings = self.settings | {
            "top_k": request.top_k,
            "remove_self_matches": request.remove_self_matches,
            "latency_queries": request.latency_queries,
        }
        return self.job.search_vectors(self.files, vectors, settings, self.threads)
