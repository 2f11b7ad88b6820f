# report: the figures and tables of `snakemake --report`, also kept under results/plots/ as PNG
# and SVG; and the DuckDB database with views over every Parquet output, beside the record of
# the config files the results are of (irflow.workflow.experiment).


rule plots:
    input:
        per_query="results/per_query.parquet",
        summary="results/summary.parquet",
        cost="results/cost.parquet",
        significance="results/significance.parquet",
        correlations="results/correlations.parquet",
        bootstrap="results/bootstrap.parquet",
        similarity="results/corpus_similarity.parquet",
        published="results/published.parquet",
        reference=workflow.source_path("../config/reference/published.yaml"),
    output:
        quality=report(
            "results/plots/quality.png",
            caption="../report/quality.rst",
            category="Quality",
        ),
        significance=report(
            "results/plots/significance.png",
            caption="../report/significance.rst",
            category="Significance",
        ),
        correlation_datasets=report(
            "results/plots/correlation_datasets.png",
            caption="../report/correlation.rst",
            category="Correlation",
        ),
        correlation_metrics=report(
            "results/plots/correlation_metrics.png",
            caption="../report/correlation.rst",
            category="Correlation",
        ),
        bootstrap=report(
            "results/plots/bootstrap.png",
            caption="../report/bootstrap.rst",
            category="Correlation",
        ),
        similarity=report(
            "results/plots/corpus_similarity.png",
            caption="../report/similarity.rst",
            category="Correlation",
        ),
        latency=report(
            "results/plots/latency_quality.png",
            caption="../report/latency_quality.rst",
            category="Cost",
        ),
        results_table=report(
            "results/report/results_table.html",
            caption="../report/results_table.rst",
            category="Tables",
        ),
        significance_table=report(
            "results/report/significance_table.html",
            caption="../report/significance_table.rst",
            category="Tables",
        ),
        cost_table=report(
            "results/report/cost_table.html",
            caption="../report/cost_table.rst",
            category="Tables",
        ),
    log:
        "results/logs/plots.log",
    conda:
        "../envs/data.yaml"
    params:
        metric=config["correlation"]["metric"],
        report_metrics=config["report_metrics"],
        layout=plan.table_layout,
        identities=plan.published_identities,
        depth=config["top_k"],
        significance=config["significance"],
    script:
        "../scripts/plots.py"


rule database:
    input:
        unpack(plan.database_inputs),
    output:
        database="results/irflow.duckdb",
        experiment=str(EXPERIMENT_RECORD),
    log:
        "results/logs/database.log",
    conda:
        "../envs/data.yaml"
    params:
        # Changes with the config, so the record always names the one the results are of.
        experiment=EXPERIMENT,
    script:
        "../scripts/database.py"
