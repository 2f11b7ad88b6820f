# significance: paired t-test and randomization test for every pair of systems per dataset
# and metric, Holm-Bonferroni corrected within each family; against the baseline too. It reads
# the scores themselves, not the aggregate's per-query table, so that results.md (the
# aggregate's) can show the tests against the baseline.


rule significance:
    input:
        scores=[f"results/scores/{d}/{s}.parquet" for d, s in plan.pairs],
    output:
        table="results/significance.parquet",
    log:
        "results/logs/significance.log",
    conda:
        "../envs/data.yaml"
    params:
        pairs=plan.pairs,
        settings=config["significance"],
    script:
        "../scripts/significance.py"
