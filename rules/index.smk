# index: document (or passage) embeddings -> faiss index (flat, HNSW, IVF or IVF-PQ), with build
# time and size recorded in the manifest. Only build settings are params: changing nprobe,
# ef_search, refine_factor or mmap reruns retrieval, never the index.

from irflow.retrieval.index import build_settings


rule index:
    input:
        source="results/datasets/{dataset}/source.json",
        embeddings=plan.document_embeddings,
    output:
        index="results/indexes/{dataset}/{model}/{index}.faiss",
        manifest="results/manifests/index/{dataset}/{model}/{index}.json",
    log:
        "results/logs/index/{dataset}/{model}/{index}.log",
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        mem_mb=lambda wc, input, attempt: memory.index_mb(
            input.embeddings, config["indexes"][wc.index], attempt
        ),
    params:
        index=lambda wc: build_settings(config["indexes"][wc.index]),
    script:
        "../scripts/index.py"
