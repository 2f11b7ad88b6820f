# download: find each dataset in BEIR layout (offline data dir, earlier download, or its
# source) and record where it is and what its files hash to.


rule download:
    input:
        plan.local_files,
    output:
        "results/datasets/{dataset}/source.json",
    log:
        "results/logs/download/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(plan.base_datasets),
    conda:
        "../envs/data.yaml"
    params:
        source=lambda wc: config["datasets"][wc.dataset]["source"],
    script:
        "../scripts/download.py"
