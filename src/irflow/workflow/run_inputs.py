"""The input and params functions of the rules that make and read runs: retrieve, rerank,
import, negatives and the database. ``Plan`` holds every input function of the workflow;
rules/common.smk builds one from the validated config."""

from types import SimpleNamespace

from irflow.core.config import scored_split
from irflow.derived.negatives import SEARCHER_FILES
from irflow.retrieval.exact_search import searched_in_shards
from irflow.retrieval.external_run import is_url, run_location
from irflow.retrieval.rerankers import reranker_settings, reranker_type
from irflow.workflow.families import family
from irflow.workflow.families.bm25 import index_folder as bm25_index_folder
from irflow.workflow.families.dense import query_model
from irflow.workflow.inputs import DatasetInputs
from irflow.workflow.local_files import local_folder_files
from irflow.workflow.qc_inputs import LabelAuditInputs

# The tables of results/ each dataset has one of, by the database view that shows them.
DATASET_TABLES = {
    "corpus": "corpus",
    "queries": "queries",
    "qrels": "qrels",
    "filter_audit": "filtered/audit",
    "clusters": "filtered/clusters",
}
# The tables the workflow writes once after the runs, by their view (results/<view>.parquet).
SUMMARY_VIEWS = [
    "summary",
    "published",
    "cost",
    "significance",
    "correlations",
    "bootstrap",
    "corpus_similarity",
]


class Plan(LabelAuditInputs, DatasetInputs):
    """Every name and input function of the workflow (irflow.workflow.plan,
    irflow.workflow.inputs, irflow.workflow.qc_inputs), and those of its runs; the derived
    datasets' are their kinds' (``plan.kinds``, irflow.workflow.kinds)."""

    def __init__(self, config, basedir):
        super().__init__(config, basedir)
        # The database views of the analyses' tables, by view: each analysis's rules
        # (rules/analyses/<name>.smk) add theirs.
        self.analysis_views = {}

    def dense_inputs(self, wildcards):
        """The index (none for a flat index searched in shards) and query embeddings; the rows
        the index holds, and for passages the documents they belong to."""
        retriever = self.retrievers[wildcards.system]
        model, index = retriever["model"], retriever["index"]
        folder = f"results/embeddings/{wildcards.dataset}/{model}"
        side = self.document_side(model)
        inputs = {"source": f"results/datasets/{wildcards.dataset}/source.json"}
        if not searched_in_shards(self.indexes[index]):
            inputs["index"] = f"results/indexes/{wildcards.dataset}/{model}/{index}.faiss"
        # A dual encoder's queries are its query model's vectors.
        queries = f"results/embeddings/{wildcards.dataset}/{query_model(retriever)}"
        inputs |= {"corpus": f"{folder}/{side}.parquet", "queries": f"{queries}/queries.parquet"}
        if side == "passages":
            inputs["passages"] = f"results/datasets/{wildcards.dataset}/passages/{model}.parquet"
        return inputs

    def bm25_inputs(self, wildcards):
        """The retriever's BM25 index of the dataset and the queries."""
        base = f"results/datasets/{wildcards.dataset}"
        return {
            "source": f"{base}/source.json",
            "index": bm25_index_folder(wildcards.dataset, wildcards.system),
            "queries": f"{base}/filtered/queries.parquet",
        }

    def vector_search_inputs(self, wildcards):
        retriever = self.retrievers[wildcards.system]
        encoder = family(retriever["type"]).encoder
        folder = f"results/{encoder}/{wildcards.dataset}/{retriever['model']}"
        return {
            "source": f"results/datasets/{wildcards.dataset}/source.json",
            "corpus": f"{folder}/corpus.parquet",
            "queries": f"{folder}/queries.parquet",
        }

    def retrieval_settings(self, wildcards):
        """Everything that determines a run, so a change to any of it reruns only that
        run."""
        retriever = self.retrievers[wildcards.system]
        settings = {
            "retriever": retriever,
            "top_k": self.config["top_k"],
            "remove_self_matches": self.dataset_specs[wildcards.dataset]["remove_self_matches"],
            "latency_queries": self.config["cost"]["latency_queries"],
        }
        return settings | family(retriever["type"]).search_settings(retriever, self.config)

    def search_mb(self, wildcards, input, attempt):
        """The memory a retrieve job asks for: its family's model."""
        spec = self.retrievers[wildcards.system]
        settings = self.retrieval_settings(wildcards)
        return family(spec["type"]).memory.search_mb(input, settings, attempt)

    def split_retrieval(self, dataset, system, top_k):
        """How a job retrieves a split the retrieve jobs do not run, with ``system`` as the
        workflow runs it on ``dataset`` (irflow.retrieval.retrieve.retrieve_judged)."""
        retriever = self.retrievers[system]
        retrieval = {
            "retriever": retriever,
            "top_k": top_k,
            "remove_self_matches": self.dataset_specs[dataset]["remove_self_matches"],
        }
        return retrieval | family(retriever["type"]).search_settings(retriever, self.config)

    def split_retrieval_files(self, dataset, system):
        """What split_retrieval's job reads: the files of the family's searcher
        (``split_search_inputs``) and the model that encodes the split's query texts, if any."""
        spec = self.retrievers[system]
        files = family(spec["type"]).split_search_inputs(self, dataset, system)
        # The last model encodes the queries (a dual encoder's query model).
        for model in family(spec["type"]).models(spec):
            files |= {
                "model": local_folder_files(self.config["models"][model]["id"]),
                "onnx": self.onnx_graph(SimpleNamespace(model=model)),
            }
        return files

    def search_inputs(self, wildcards):
        """A retrieve job's inputs: its family's (``search_inputs``)."""
        spec = self.retrievers[wildcards.system]
        return family(spec["type"]).search_inputs(self, wildcards)

    def reranker_embeddings(self, dataset, reranker):
        """A bi-encoder's document and query vectors, when the workflow computes them anyway
        for a dense retriever, and the queries' manifest (their encoding latency and
        model)."""
        spec = self.config["rerankers"][reranker]
        model = reranker_type(spec["type"]).embeddings_model(spec)
        if model in self.corpus_models:
            folder = f"{dataset}/{model}"
            return {
                "embeddings": f"results/embeddings/{folder}/corpus.parquet",
                "query_embeddings": f"results/embeddings/{folder}/queries.parquet",
                "query_manifest": f"results/manifests/embed/{folder}/queries.json",
            }
        return {}

    def rerank_inputs(self, wildcards):
        """The first-stage run and texts; for a bi-encoder, its model's vectors
        (reranker_embeddings)."""
        first_stage, reranker, _ = self.reranked[wildcards.system]
        base = f"results/datasets/{wildcards.dataset}"
        return {
            "source": f"{base}/source.json",
            "run": f"results/runs/{wildcards.dataset}/{first_stage}.parquet",
            "corpus": f"{base}/filtered/corpus.parquet",
            "queries": f"{base}/filtered/queries.parquet",
        } | self.reranker_embeddings(wildcards.dataset, reranker)

    def rerank_settings(self, wildcards):
        first_stage, reranker, k = self.reranked[wildcards.system]
        return reranker_settings(self.config, reranker, first_stage, k)

    def external_run_settings(self, wildcards):
        """Everything that determines the imported run, so a change to any of it reruns
        it."""
        spec = self.retrievers[wildcards.system]
        dataset = wildcards.dataset
        return {
            "retriever": spec,
            "location": run_location(spec["path"], dataset),
            "md5": spec["md5"].get(dataset),
            "top_k": self.config["top_k"],
            "remove_self_matches": self.dataset_specs[dataset]["remove_self_matches"],
        }

    def external_run_inputs(self, wildcards):
        """The dataset's filtered tables, its whole queries table (a run's queries without
        judgements are dropped, not unknown) and, for a local run file, the file itself, so
        that replacing it reruns the import."""
        base = f"results/datasets/{wildcards.dataset}"
        inputs = {
            "source": f"{base}/source.json",
            "corpus": f"{base}/filtered/corpus.parquet",
            "queries": f"{base}/filtered/queries.parquet",
            "all_queries": f"{base}/queries.parquet",
        }
        location = self.external_run_settings(wildcards)["location"]
        return inputs | ({} if is_url(location) else {"run_file": location})

    def negatives_inputs(self, wildcards):
        """The scored split's run and judgements (and a dense system's vectors); for another
        split, every query and the system's searcher's files, named ``search_<name>`` (the
        job reads the split's qrels and retrieves them itself)."""
        spec = self.config["negatives"][wildcards.export]
        base = f"results/datasets/{spec['dataset']}"
        inputs = {
            "source": f"{base}/source.json",
            "corpus": f"{base}/filtered/corpus.parquet",
        }
        if spec["consistency"]:  # the word vectors of the consistency filter, the user's file
            inputs["consistency_vectors"] = spec["consistency"]["vectors"]
        if spec["split"] != scored_split(self.config, spec["dataset"]):
            # The job searches the split's queries with the system's searcher, from its files.
            files = self.split_retrieval_files(spec["dataset"], spec["system"])
            searched = {f"{SEARCHER_FILES}{name}": path for name, path in files.items()}
            return inputs | searched | {"queries": f"{base}/queries.parquet"}
        if spec["system"] in self.bm25_systems:
            # It scores the positives the run did not retrieve.
            inputs["bm25_index"] = bm25_index_folder(spec["dataset"], spec["system"])
        inputs |= {
            "run": f"results/runs/{spec['dataset']}/{spec['system']}.parquet",
            "qrels": f"{base}/qrels.parquet",
            "queries": f"{base}/filtered/queries.parquet",
        }
        if spec["system"] in self.dense_systems:
            # The stored vectors score the positives the run did not retrieve.
            dense = self.dense_inputs(
                SimpleNamespace(dataset=spec["dataset"], system=spec["system"])
            )
            inputs |= {
                "vectors_queries": dense["queries"],
                "vectors_documents": dense["corpus"],
            }
            if "passages" in dense:
                inputs["vectors_passages"] = dense["passages"]
        return inputs

    def negatives_env(self, wildcards):
        """A searcher that encodes another split's queries with its model (a dense
        retriever's) needs torch; reading a run, or BM25, does not."""
        spec = self.config["negatives"][wildcards.export]
        retriever = self.retrievers.get(spec["system"])
        other_split = spec["split"] != scored_split(self.config, spec["dataset"])
        encodes = retriever is not None and family(retriever["type"]).models(retriever)
        return f"../envs/{'models' if other_split and encodes else 'data'}.yaml"

    def negatives_retrieval(self, wildcards):
        """What the negatives job retrieves another split with (None for the scored
        split)."""
        spec = self.config["negatives"][wildcards.export]
        if spec["split"] == scored_split(self.config, spec["dataset"]):
            return None
        return self.split_retrieval(spec["dataset"], spec["system"], spec["top_k"])

    def database_inputs(self, wildcards):
        """Every Parquet output (and the manifests), by the view that shows it."""
        per_dataset = {
            view: [f"results/datasets/{d}/{table}.parquet" for d in self.datasets]
            for view, table in DATASET_TABLES.items()
        }
        # In the order the database creates its views.
        views = per_dataset | {
            "filter_summary": ["results/filter_summary.parquet"],
            "runs": [f"results/runs/{d}/{s}.parquet" for d, s in self.pairs],
            "per_query": [f"results/scores/{d}/{s}.parquet" for d, s in self.pairs],
        }
        views |= {view: [f"results/{view}.parquet"] for view in SUMMARY_VIEWS}
        views["manifests"] = self.manifests
        return views | self.optional_views()

    def optional_views(self):
        """The views of the stages a config may leave out (read_parquet of no file is an
        error)."""
        views = {}
        if self.passage_models:
            views["passages"] = [
                f"results/datasets/{d}/passages/{m}.parquet"
                for d in self.datasets
                for m in self.passage_models
            ]
        if self.config["negatives"]:
            views["negatives"] = [
                f"results/negatives/{n}.parquet" for n in self.config["negatives"]
            ]
        for kind in self.kinds.values():
            views |= kind.views()
        if self.audited:
            views["label_audit"] = [f"results/audit/{d}/candidates.parquet" for d in self.audited]
            views["label_audit_hole"] = [f"results/audit/{d}/hole.parquet" for d in self.audited]
            views["label_audit_summary"] = ["results/label_audit.parquet"]
        return views | self.analysis_views
