# download: find each dataset in BEIR layout (offline data dir, earlier download, or its
# source) and record where it is and what its files hash to. Its params are what the dataset
# is fetched from, as its source type gives them (irflow.data.sources.download_params).

from irflow.data.sources import download_params


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
        source=lambda wc: download_params(config, wc.dataset),
    script:
        "../scripts/download.py"
