# expand: a dataset -> its document-expanded copy (docT5query, doc2query--), an ordinary
# dataset under results/datasets/<name>/ that filter, retrieve and score read like any other.
# Its datasets and inputs are its kind's (irflow.workflow.kinds.expand).

EXPAND = plan.kinds["expand"]


rule expand:
    input:
        unpack(EXPAND.inputs),
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
        dataset=one_of(EXPAND.datasets),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=1,
    params:
        settings=EXPAND.settings,
    script:
        "../scripts/expand.py"


# expand_estimate: a dry run of an llm expansion (one request per document) that says what it
# would ask of the model (requests and tokens, what the answer cache holds) and asks nothing;
# not part of `all`, and it reads the cache, which is no input: force it (-f) to estimate again.
rule expand_estimate:
    input:
        corpus=lambda wc: f"results/datasets/{EXPAND.base(wc.dataset)}/corpus.parquet",
    output:
        "results/llm_estimate/{dataset}.json",
    log:
        "results/logs/expand_estimate/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(EXPAND.estimated()),
    conda:
        "../envs/models.yaml"
    params:
        spec=lambda wc: config["expand"][wc.dataset]["llm"],
    script:
        "../scripts/expand_estimate.py"
