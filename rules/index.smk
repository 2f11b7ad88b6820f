# index: document embeddings -> faiss index (flat inner product, or HNSW), with build time
# and size recorded in the manifest.


rule index:
    input:
        "results/embeddings/{dataset}/{model}/corpus.parquet",
    output:
        index="results/indexes/{dataset}/{model}/{index}.faiss",
        manifest="results/manifests/index/{dataset}/{model}/{index}.json",
    params:
        index=lambda wc: config["indexes"][wc.index],
    threads: workflow.cores
    log:
        "results/logs/index/{dataset}/{model}/{index}.log",
    conda:
        "../envs/models.yaml"
    script:
        "../scripts/index.py"
