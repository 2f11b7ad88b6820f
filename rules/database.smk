# database: the DuckDB database with views over every Parquet output
# (irflow.evaluation.aggregate.build_database), beside the record of the config files the
# results are of (irflow.workflow.experiment).


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
