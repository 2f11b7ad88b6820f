# expand: a dataset -> its document-expanded copy (docT5query), an ordinary dataset under
# results/datasets/<name>/ that filter, retrieve and score read like any other.


def expand_inputs(wildcards):
    """The base dataset's tables, and a local model's files, so that editing them rebuilds."""
    spec = config["expand"][wildcards.dataset]
    base = f"results/datasets/{spec['dataset']}"
    return {
        "base_source": f"{base}/source.json",
        "corpus": f"{base}/corpus.parquet",
        "queries": f"{base}/queries.parquet",
        "qrels": f"{base}/qrels.parquet",
        "model": local_folder_files(spec["model"]["id"]),
    }


rule expand:
    input:
        unpack(expand_inputs),
    output:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
        stats="results/datasets/{dataset}/stats.json",
        manifest="results/manifests/expand/{dataset}.json",
    log:
        "results/logs/expand/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(EXPANDED),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=1,
    params:
        spec=lambda wc: config["expand"][wc.dataset],
    script:
        "../scripts/expand.py"
