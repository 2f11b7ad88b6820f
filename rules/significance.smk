# significance: paired t-test and randomization test for every pair of systems per dataset
# and metric, Holm-Bonferroni corrected within each family; against the baseline too.


rule significance:
    input:
        per_query="results/per_query.parquet",
    output:
        table="results/significance.parquet",
    log:
        "results/logs/significance.log",
    conda:
        "../envs/data.yaml"
    params:
        settings=config["significance"],
    script:
        "../scripts/significance.py"
