# ingest: BEIR files -> corpus, queries and qrels Parquet, plus dataset statistics.


rule ingest:
    input:
        source="results/datasets/{dataset}/source.json",
    output:
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
        stats="results/datasets/{dataset}/stats.json",
        manifest="results/manifests/ingest/{dataset}.json",
    log:
        "results/logs/ingest/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(plan.base_datasets),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=lambda wc, input, attempt: memory.ingest_mb(input.source, attempt),
    params:
        unknown_qrels=lambda wc: config["datasets"][wc.dataset]["unknown_qrels"],
    script:
        "../scripts/ingest.py"
