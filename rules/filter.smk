# filter: drop empty, out-of-bounds and duplicate documents (judged ones are flagged, not
# dropped, by default) and keep the queries that have judgements in the split.


rule filter:
    input:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
    output:
        corpus="results/datasets/{dataset}/filtered/corpus.parquet",
        queries="results/datasets/{dataset}/filtered/queries.parquet",
        audit="results/datasets/{dataset}/filtered/audit.parquet",
        manifest="results/manifests/filter/{dataset}.json",
    log:
        "results/logs/filter/{dataset}.log",
    conda:
        "../envs/data.yaml"
    params:
        rules=config["filter"],
    script:
        "../scripts/filter.py"
