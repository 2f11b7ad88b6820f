# derive: a derived dataset that its kind makes from its base's tables with its `make`
# (irflow.workflow.kinds, a kind whose `derive` is true), an ordinary dataset under
# results/datasets/<name>/ that filter, embed, retrieve and score read like any other: the rule
# of every kind that needs none of its own.

DERIVED = {name: kind for name, kind in plan.derived.items() if kind.derive}


rule derive:
    input:
        unpack(lambda wc: DERIVED[wc.dataset].inputs(wc)),
    output:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
        stats="results/datasets/{dataset}/stats.json",
        manifest="results/manifests/derive/{dataset}.json",
    log:
        "results/logs/derive/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(DERIVED),
    conda:
        "../envs/data.yaml"
    params:
        kind=lambda wc: DERIVED[wc.dataset].name,
        spec=lambda wc: DERIVED[wc.dataset].spec(wc),
    script:
        "../scripts/derive.py"
