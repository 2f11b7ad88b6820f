# embed: filtered corpus and scored queries -> sentence-transformers embeddings per model.
# Resumable: finished chunks survive a killed job in <output>.parts/.


def model_files(wildcards):
    """A model given as a local folder is an input, so editing its files re-embeds."""
    folder = Path(config["models"][wildcards.model]["id"])
    return sorted(str(p) for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


def result_settings(wildcards):
    """The settings that determine the vectors; batch size and device are not among them."""
    from irflow.embed import RESULT_SETTINGS

    spec = config["models"][wildcards.model]
    return {key: spec[key] for key in RESULT_SETTINGS}


rule embed:
    input:
        texts="results/datasets/{dataset}/filtered/{side}.parquet",
        model=model_files,
    output:
        embeddings="results/embeddings/{dataset}/{model}/{side}.parquet",
        manifest="results/manifests/embed/{dataset}/{model}/{side}.json",
    params:
        model=result_settings,
    threads: workflow.cores
    resources:
        gpu=1,
    log:
        "results/logs/embed/{dataset}/{model}/{side}.log",
    conda:
        "../envs/models.yaml"
    script:
        "../scripts/embed.py"
