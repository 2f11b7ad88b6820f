# aggregate: per-query scores of every (dataset, system) -> one per-query table, the summary
# (quality metrics only; cost stays in results/cost.parquet), and systems x datasets tables
# (the Average over the config's own datasets; derived datasets in tables of their own).


rule aggregate:
    input:
        scores=[f"results/scores/{d}/{s}.parquet" for d, s in plan.pairs],
    output:
        per_query="results/per_query.parquet",
        summary="results/summary.parquet",
        markdown="results/results.md",
        tables=directory("results/tables"),
    log:
        "results/logs/aggregate.log",
    conda:
        "../envs/data.yaml"
    params:
        pairs=plan.pairs,
        report_metrics=config["report_metrics"],
        layout=plan.table_layout,
    script:
        "../scripts/aggregate.py"
