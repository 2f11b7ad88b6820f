# filter: drop empty, out-of-bounds and duplicate documents (judged ones are flagged, not
# dropped, by default) and keep the queries that have judgements in the split.


rule filter:
    input:
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
    output:
        corpus="results/datasets/{dataset}/filtered/corpus.parquet",
        queries="results/datasets/{dataset}/filtered/queries.parquet",
        audit="results/datasets/{dataset}/filtered/audit.parquet",
        manifest="results/manifests/filter/{dataset}.json",
    params:
        rules=config["filter"],
    log:
        "results/logs/filter/{dataset}.log",
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/filter.py"
