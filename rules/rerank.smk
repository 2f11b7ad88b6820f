# rerank: each first-stage run's top k rescored by a cross-encoder, a bi-encoder or a ColBERT
# model; the result is a run like any other, its lineage (first stage, k, reranker) in the
# file's metadata. A bi-encoder encodes each distinct candidate once and shares the vectors with
# later jobs (and QC votes) of the same model settings through results/vector-cache
# (irflow.retrieval.rerank.VectorCache); a ColBERT model holds one batch of candidates' token vectors at a
# time (irflow.retrieval.late_interaction.MaxSimScorer).


rule rerank:
    input:
        unpack(plan.rerank_inputs),
    output:
        run="results/runs/{dataset}/{system}.parquet",
        trec="results/runs/{dataset}/{system}.trec",
        manifest="results/manifests/rerank/{dataset}/{system}.json",
    log:
        "results/logs/rerank/{dataset}/{system}.log",
    wildcard_constraints:
        system=one_of(plan.reranked),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=1,
        mem_mb=lambda wc, input, attempt: memory.rerank_mb(
            input.corpus, input.queries, plan.rerank_settings(wc), attempt
        ),
    params:
        settings=plan.rerank_settings,
        latency_queries=config["cost"]["latency_queries"],
    script:
        "../scripts/rerank.py"
