# cost: index size and build time, encoding throughput and per-query latency of every system,
# gathered from the manifests of the jobs that built and ran it.


rule cost:
    input:
        plan.manifests,
    output:
        table="results/cost.parquet",
    log:
        "results/logs/cost.log",
    conda:
        "../envs/data.yaml"
    params:
        datasets=plan.datasets,
        kinds=plan.system_kinds,
    script:
        "../scripts/cost.py"
