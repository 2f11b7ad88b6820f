# aggregate: per-query scores of every (dataset, system) -> one per-query table, the summary
# (quality metrics only; cost stays in results/cost.parquet), and systems x datasets tables
# (the Average over the config's own datasets; derived datasets in tables of their own); and
# each number beside the published values irflow knows for it (config/reference/published.yaml),
# and each system against the significance baseline (results/significance.parquet).


rule aggregate:
    input:
        scores=[f"results/scores/{d}/{s}.parquet" for d, s in plan.pairs],
        published=workflow.source_path("../config/reference/published.yaml"),
        significance="results/significance.parquet",
    output:
        per_query="results/per_query.parquet",
        summary="results/summary.parquet",
        markdown="results/results.md",
        tables=directory("results/tables"),
        published="results/published.parquet",
    log:
        "results/logs/aggregate.log",
    conda:
        "../envs/data.yaml"
    params:
        pairs=plan.pairs,
        report_metrics=config["report_metrics"],
        layout=plan.table_layout,
        identities=plan.published_identities,
        depth=config["top_k"],
        significance=config["significance"],
    script:
        "../scripts/aggregate.py"
