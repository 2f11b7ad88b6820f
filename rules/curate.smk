# curate: a curated dataset starts from its base dataset's tables, copied
# (irflow.data.filter.copy_tables), and is filtered with its own filter block (rules/filter.smk).


# Its datasets are its kind's (irflow.workflow.kinds.curate).
CURATE = plan.kinds["curate"]


rule curate:
    input:
        source=lambda wc: f"results/datasets/{CURATE.base(wc.dataset)}/source.json",
        corpus=lambda wc: f"results/datasets/{CURATE.base(wc.dataset)}/corpus.parquet",
        queries=lambda wc: f"results/datasets/{CURATE.base(wc.dataset)}/queries.parquet",
        qrels=lambda wc: f"results/datasets/{CURATE.base(wc.dataset)}/qrels.parquet",
    output:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
        manifest="results/manifests/curate/{dataset}.json",
    log:
        "results/logs/curate/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(CURATE.datasets),
    conda:
        "../envs/data.yaml"
    params:
        base=lambda wc: CURATE.base(wc.dataset),
    script:
        "../scripts/curate.py"
