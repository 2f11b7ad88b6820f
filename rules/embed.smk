# embed: filtered corpus and scored queries -> sentence-transformers embeddings per model.
# Resumable: finished chunks survive a killed job in <output>.parts/.


rule embed:
    input:
        source="results/datasets/{dataset}/source.json",
        texts="results/datasets/{dataset}/filtered/{side}.parquet",
        model=model_files,
    output:
        embeddings="results/embeddings/{dataset}/{model}/{side}.parquet",
        manifest="results/manifests/embed/{dataset}/{model}/{side}.json",
    log:
        "results/logs/embed/{dataset}/{model}/{side}.log",
    conda:
        "../envs/models.yaml"
    threads: workflow.cores
    resources:
        gpu=1,
    params:
        model=embedding_settings,
    script:
        "../scripts/embed.py"
