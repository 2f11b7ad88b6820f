# negatives: a system's run on a dataset -> training triples (query, positive, hard negatives)
# as Parquet and as sentence-transformers JSONL (Arctic-Embed §3.6), one export per key of
# config["negatives"]. An export of another split than the scored one retrieves its queries
# in this job, with the system's searcher (a retriever whose family opens one).


rule negatives:
    input:
        unpack(plan.negatives_inputs),
    output:
        parquet="results/negatives/{export}.parquet",
        jsonl="results/negatives/{export}.jsonl",
        manifest="results/manifests/negatives/{export}.json",
    log:
        "results/logs/negatives/{export}.log",
    wildcard_constraints:
        export=one_of(config["negatives"]),
    conda:
        plan.negatives_env
    params:
        settings=lambda wildcards: config["negatives"][wildcards.export],
        scored_split=lambda wildcards: scored_split(
            config, config["negatives"][wildcards.export]["dataset"]
        ),
        curated_copies=lambda wildcards: sorted(
            name
            for name, spec in plan.kinds["curate"].datasets.items()
            if spec["dataset"] == config["negatives"][wildcards.export]["dataset"]
        ),
        retrieval=plan.negatives_retrieval,
        # A retriever scores the positives its run missed; None for fusion or reranked systems.
        retriever=lambda wildcards: plan.retrievers.get(
            config["negatives"][wildcards.export]["system"]
        ),
    script:
        "../scripts/negatives.py"
