# positionalize: a dataset -> its position-controlled variants (PosIR), each an ordinary dataset
# under results/datasets/<variant>/ that filter, embed, retrieve and score read like any other.


rule positionalize:
    input:
        unpack(plan.positionalize_inputs),
    output:
        source="results/datasets/{dataset}/source.json",
        corpus="results/datasets/{dataset}/corpus.parquet",
        queries="results/datasets/{dataset}/queries.parquet",
        qrels="results/datasets/{dataset}/qrels.parquet",
        stats="results/datasets/{dataset}/stats.json",
        manifest="results/manifests/positionalize/{dataset}.json",
    log:
        "results/logs/positionalize/{dataset}.log",
    wildcard_constraints:
        dataset=one_of(plan.variants),
    conda:
        plan.positionalize_env
    params:
        variant=lambda wc: plan.variants[wc.dataset],
        tokenizer=plan.variant_tokenizer,
    script:
        "../scripts/positionalize.py"
