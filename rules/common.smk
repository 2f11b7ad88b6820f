# Names, file lists and input functions shared by the rules.
# Every wildcard value comes from the validated config.

from irflow.download import beir_files, is_beir_layout
from irflow.embed import RESULT_SETTINGS

DATASETS = sorted(config["datasets"])
RETRIEVERS = config["retrievers"]
BM25_SYSTEMS = sorted(n for n, r in RETRIEVERS.items() if r["type"] == "bm25")
DENSE_SYSTEMS = sorted(n for n, r in RETRIEVERS.items() if r["type"] == "dense")
DENSE_MODELS = sorted({RETRIEVERS[s]["model"] for s in DENSE_SYSTEMS})
DENSE_INDEXES = sorted(
    {(RETRIEVERS[s]["model"], RETRIEVERS[s]["index"]) for s in DENSE_SYSTEMS}
)
PAIRS = [(d, s) for d in DATASETS for s in sorted(RETRIEVERS)]
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
    + [
        f"results/manifests/{stage}/{d}/{s}.json"
        for stage in ("retrieve", "score")
        for d, s in PAIRS
    ]
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


def embedding_settings(wildcards):
    """The settings that determine the vectors; batch size and device are not among them."""
    spec = config["models"][wildcards.model]
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
    }
    if retriever["type"] == "dense":
        settings["index"] = config["indexes"][retriever["index"]]
    return settings
