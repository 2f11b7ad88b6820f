# download: find each dataset in BEIR layout (offline data dir, earlier download, or its
# source) and record where it is and what its files hash to.


from irflow.download import beir_files, is_beir_layout


def local_files(wildcards):
    """The dataset's files when they are on disk, so that editing them reruns its downstream."""
    source = config["datasets"][wildcards.dataset]["source"]
    candidates = [Path(p) / wildcards.dataset for p in (config["data_dir"],) if p]
    candidates += [Path(config["download_dir"]) / wildcards.dataset]
    candidates += [Path(source["path"])] if "path" in source else []
    for folder in candidates:
        if is_beir_layout(folder, config["split"]):
            return [str(p) for p in beir_files(folder, config["split"])]
    return [source["path"]] if "path" in source else []


rule download:
    input:
        local_files,
    output:
        "results/datasets/{dataset}/source.json",
    params:
        source=lambda wc: config["datasets"][wc.dataset]["source"],
    log:
        "results/logs/download/{dataset}.log",
    conda:
        "../envs/data.yaml"
    script:
        "../scripts/download.py"
