# retrieve: first-stage runs, top_k per query, as Parquet and TREC run files.
# Hits whose doc id equals the query id are removed where the dataset asks for it.


def dense_inputs(wildcards):
    retriever = RETRIEVERS[wildcards.system]
    base = f"results/embeddings/{wildcards.dataset}/{retriever['model']}"
    return {
        "index": f"results/indexes/{wildcards.dataset}/{retriever['model']}/{retriever['index']}.faiss",
        "corpus": f"{base}/corpus.parquet",
        "queries": f"{base}/queries.parquet",
    }


def retrieval_settings(wildcards):
    """Everything that determines a run, so a change to any of it reruns only that run."""
    retriever = RETRIEVERS[wildcards.system]
    settings = {
        "retriever": retriever,
        "top_k": config["top_k"],
        "remove_self_matches": config["datasets"][wildcards.dataset]["remove_self_matches"],
    }
    if retriever["type"] == "dense":
        settings["index"] = config["indexes"][retriever["index"]]
    return settings


rule retrieve_bm25:
    input:
        corpus="results/datasets/{dataset}/filtered/corpus.parquet",
        queries="results/datasets/{dataset}/filtered/queries.parquet",
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/retrieve/{dataset}/{system}.json",
    wildcard_constraints:
        system=one_of(BM25_SYSTEMS),
    params:
        settings=retrieval_settings,
    threads: workflow.cores
    log:
        "results/logs/retrieve/{dataset}/{system}.log",
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/retrieve.py"


rule retrieve_dense:
    input:
        unpack(dense_inputs),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/retrieve/{dataset}/{system}.json",
    wildcard_constraints:
        system=one_of(DENSE_SYSTEMS),
    params:
        settings=retrieval_settings,
    threads: workflow.cores
    log:
        "results/logs/retrieve/{dataset}/{system}.log",
    conda:
        "../envs/models.yaml"
    script:
        "../scripts/retrieve.py"
