# aggregate: per-query scores of every (dataset, system) -> summary, wide tables and the
# DuckDB database with views over every Parquet output.

PAIRS = [(d, s) for d in DATASETS for s in sorted(RETRIEVERS)]
DENSE_MODELS = sorted({RETRIEVERS[s]["model"] for s in DENSE_SYSTEMS})
DENSE_INDEXES = sorted({(RETRIEVERS[s]["model"], RETRIEVERS[s]["index"]) for s in DENSE_SYSTEMS})
MANIFESTS = (
    [f"results/manifests/{stage}/{d}.json" for stage in ("ingest", "filter") for d in DATASETS]
    + [
        f"results/manifests/embed/{d}/{m}/{side}.json"
        for d in DATASETS
        for m in DENSE_MODELS
        for side in ("corpus", "queries")
    ]
    + [f"results/manifests/index/{d}/{m}/{i}.json" for d in DATASETS for m, i in DENSE_INDEXES]
    + [f"results/manifests/{stage}/{d}/{s}.json" for stage in ("retrieve", "score") for d, s in PAIRS]
)


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
    params:
        pairs=PAIRS,
        report_metrics=config["report_metrics"],
    log:
        "results/logs/aggregate.log",
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/aggregate.py"
