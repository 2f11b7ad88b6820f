# Names, file lists and input functions shared by the rules.
# Every wildcard value comes from the validated config.

from irflow.config import reranked_name, system_kinds
from irflow.download import beir_files, is_beir_layout
from irflow.embed import RESULT_SETTINGS

DATASETS = sorted(config["datasets"])
RETRIEVERS = config["retrievers"]
SYSTEM_KINDS = system_kinds(config)
SYSTEMS = sorted(SYSTEM_KINDS)
BM25_SYSTEMS = [s for s in SYSTEMS if SYSTEM_KINDS[s] == "bm25"]
DENSE_SYSTEMS = [s for s in SYSTEMS if SYSTEM_KINDS[s] == "dense"]
FUSION_SYSTEMS = sorted(config["fusion"])
RERANKED = {
    reranked_name(item["first_stage"], item["reranker"], k): (
        item["first_stage"],
        item["reranker"],
        k,
    )
    for item in config["reranking"]
    for k in item["k"]
}
DENSE_MODELS = sorted({RETRIEVERS[s]["model"] for s in DENSE_SYSTEMS})
DENSE_INDEXES = sorted(
    {(RETRIEVERS[s]["model"], RETRIEVERS[s]["index"]) for s in DENSE_SYSTEMS}
)
PAIRS = [(d, s) for d in DATASETS for s in SYSTEMS]
RUN_STAGE = {
    "bm25": "retrieve",
    "dense": "retrieve",
    "fusion": "fuse",
    "rerank": "rerank",
}
MANIFESTS = (
    [
        f"results/manifests/{stage}/{d}.json"
        for stage in ("ingest", "filter")
        for d in DATASETS
    ]
    + [
        f"results/manifests/embed/{d}/{m}/{side}.json"
        for d in DATASETS
        for m in DENSE_MODELS
        for side in ("corpus", "queries")
    ]
    + [
        f"results/manifests/index/{d}/{m}/{i}.json"
        for d in DATASETS
        for m, i in DENSE_INDEXES
    ]
    + [f"results/manifests/{RUN_STAGE[SYSTEM_KINDS[s]]}/{d}/{s}.json" for d, s in PAIRS]
    + [f"results/manifests/score/{d}/{s}.json" for d, s in PAIRS]
)


def one_of(names):
    """A wildcard constraint matching exactly these names (and nothing when empty)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def local_files(wildcards):
    """The dataset's files when they are on disk, so that editing them reruns its downstream."""
    source = config["datasets"][wildcards.dataset]["source"]
    candidates = (
        [Path(config["data_dir"]) / wildcards.dataset] if config["data_dir"] else []
    )
    candidates.append(Path(config["download_dir"]) / wildcards.dataset)
    candidates += [Path(source["path"])] if "path" in source else []
    for folder in candidates:
        if is_beir_layout(folder, config["split"]):
            return [str(p) for p in beir_files(folder, config["split"])]
    return [source["path"]] if "path" in source else []


def model_files(wildcards):
    """A model given as a local folder is an input, so editing its files re-embeds."""
    folder = Path(config["models"][wildcards.model]["id"])
    return (
        sorted(str(p) for p in folder.rglob("*") if p.is_file())
        if folder.is_dir()
        else []
    )


def model_result_settings(model):
    """The settings that determine a model's vectors; batch size and device are not among them."""
    spec = config["models"][model]
    return {key: spec[key] for key in RESULT_SETTINGS}


def dense_inputs(wildcards):
    retriever = RETRIEVERS[wildcards.system]
    model, index = retriever["model"], retriever["index"]
    return {
        "source": f"results/datasets/{wildcards.dataset}/source.json",
        "index": f"results/indexes/{wildcards.dataset}/{model}/{index}.faiss",
        "corpus": f"results/embeddings/{wildcards.dataset}/{model}/corpus.parquet",
        "queries": f"results/embeddings/{wildcards.dataset}/{model}/queries.parquet",
    }


def retrieval_settings(wildcards):
    """Everything that determines a run, so a change to any of it reruns only that run."""
    retriever = RETRIEVERS[wildcards.system]
    settings = {
        "retriever": retriever,
        "top_k": config["top_k"],
        "remove_self_matches": config["datasets"][wildcards.dataset][
            "remove_self_matches"
        ],
        "latency_queries": config["cost"]["latency_queries"],
    }
    if retriever["type"] == "dense":
        settings["index"] = config["indexes"][retriever["index"]]
    return settings


def rerank_inputs(wildcards):
    """The first-stage run and texts; for a bi-encoder, its model's document embeddings when
    the workflow computes them anyway for a dense retriever."""
    first_stage, reranker, _ = RERANKED[wildcards.system]
    base = f"results/datasets/{wildcards.dataset}"
    inputs = {
        "source": f"{base}/source.json",
        "run": f"results/runs/{wildcards.dataset}/{first_stage}.parquet",
        "corpus": f"{base}/filtered/corpus.parquet",
        "queries": f"{base}/filtered/queries.parquet",
    }
    spec = config["rerankers"][reranker]
    if spec["type"] == "bi-encoder" and spec["model"] in DENSE_MODELS:
        model = spec["model"]
        inputs["embeddings"] = (
            f"results/embeddings/{wildcards.dataset}/{model}/corpus.parquet"
        )
    return inputs


def rerank_settings(wildcards):
    first_stage, reranker, k = RERANKED[wildcards.system]
    spec = config["rerankers"][reranker]
    settings = {
        "first_stage": first_stage,
        "reranker_name": reranker,
        "k": k,
        "reranker": spec,
    }
    if spec["type"] == "bi-encoder":
        settings["model"] = model_result_settings(spec["model"])
    return settings


def database_inputs(wildcards):
    """Every Parquet output (and the manifests), by the view that shows it."""
    per_dataset = lambda name: [
        f"results/datasets/{d}/{name}.parquet" for d in DATASETS
    ]
    return {
        "corpus": per_dataset("corpus"),
        "queries": per_dataset("queries"),
        "qrels": per_dataset("qrels"),
        "filter_audit": per_dataset("filtered/audit"),
        "runs": [f"results/runs/{d}/{s}.parquet" for d, s in PAIRS],
        "per_query": [f"results/scores/{d}/{s}.parquet" for d, s in PAIRS],
        "summary": ["results/summary.parquet"],
        "cost": ["results/cost.parquet"],
        "significance": ["results/significance.parquet"],
        "correlations": ["results/correlations.parquet"],
        "bootstrap": ["results/bootstrap.parquet"],
        "corpus_similarity": ["results/corpus_similarity.parquet"],
        "manifests": MANIFESTS,
    }
