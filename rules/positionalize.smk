# positionalize: a dataset -> its position-controlled variants (PosIR), each an ordinary dataset
# under results/datasets/<variant>/ that filter, embed, retrieve and score read like any other.
# Its datasets and inputs are its kind's (irflow.workflow.kinds.positionalize).

POSITIONALIZE = plan.kinds["positionalize"]


rule positionalize:
    input:
        unpack(POSITIONALIZE.inputs),
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
        dataset=one_of(POSITIONALIZE.datasets),
    conda:
        POSITIONALIZE.env
    params:
        variant=POSITIONALIZE.spec,
        tokenizer=POSITIONALIZE.tokenizer,
    script:
        "../scripts/positionalize.py"
