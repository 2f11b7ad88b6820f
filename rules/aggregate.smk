# aggregate: per-query scores of every (dataset, system) -> summary, wide tables and the
# DuckDB database with views over every Parquet output.


rule aggregate:
    input:
        scores=[f"results/scores/{d}/{s}.parquet" for d, s in PAIRS],
        runs=[f"results/runs/{d}/{s}.parquet" for d, s in PAIRS],
        corpus=expand("results/datasets/{dataset}/corpus.parquet", dataset=DATASETS),
        queries=expand("results/datasets/{dataset}/queries.parquet", dataset=DATASETS),
        qrels=expand("results/datasets/{dataset}/qrels.parquet", dataset=DATASETS),
        filter_audit=expand(
            "results/datasets/{dataset}/filtered/audit.parquet", dataset=DATASETS
        ),
        manifests=MANIFESTS,
    output:
        summary="results/summary.parquet",
        markdown="results/results.md",
        tables=directory("results/tables"),
        database="results/irflow.duckdb",
    log:
        "results/logs/aggregate.log",
    conda:
        "../envs/data.yaml"
    params:
        pairs=PAIRS,
        report_metrics=config["report_metrics"],
    script:
        "../scripts/aggregate.py"
