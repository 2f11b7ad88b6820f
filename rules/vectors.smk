# vectors: learned sparse vectors (results/sparse) and ColBERT token vectors (results/tokens) of
# documents and queries, per model (irflow.encoding.encode_parts), which retrieve_sparse and
# retrieve_late_interaction search (rules/retrieve.smk). Encoding is resumable and sharded as
# rules/embed.smk embeds: one job per (dataset, model) for documents and queries, or, with
# embed_shards > 1, shard jobs joined by encode_vectors_gather (with embed's gather script) and
# the queries on their own.


rule encode_vectors:
    input:
        unpack(lambda wc: plan.vector_inputs(wc, ["corpus", "queries"])),
    output:
        vectors="results/{family}/{dataset}/{model}/corpus.parquet",
        manifest="results/manifests/{family}/{dataset}/{model}/corpus.json",
        query_vectors="results/{family}/{dataset}/{model}/queries.parquet",
        query_manifest="results/manifests/{family}/{dataset}/{model}/queries.json",
    log:
        "results/logs/{family}/{dataset}/{model}/corpus+queries.log",
    wildcard_constraints:
        family=one_of(plan.vector_models_by_folder),
        dataset=one_of(plan.unsharded_datasets),
        model=one_of(plan.vector_models),
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: memory.embed_mb(attempt),
    params:
        model=lambda wc: plan.model_result_settings(wc.model),
        side="corpus",
        # Queries are also encoded one at a time, for the per-query latency in the cost table.
        latency_queries=config["cost"]["latency_queries"],
    script:
        "../scripts/vectors_encode.py"


use rule encode_vectors as encode_vectors_queries with:
    input:
        unpack(lambda wc: plan.vector_inputs(wc, ["queries"])),
    output:
        vectors="results/{family}/{dataset}/{model}/queries.parquet",
        manifest="results/manifests/{family}/{dataset}/{model}/queries.json",
    log:
        "results/logs/{family}/{dataset}/{model}/queries.log",
    wildcard_constraints:
        family=one_of(plan.vector_models_by_folder),
        dataset=one_of(plan.sharded_datasets),
        model=one_of(plan.vector_models),
    params:
        model=lambda wc: plan.model_result_settings(wc.model),
        side="queries",
        latency_queries=config["cost"]["latency_queries"],


use rule encode_vectors as encode_vectors_shard with:
    input:
        unpack(lambda wc: plan.vector_inputs(wc, ["corpus"])),
    output:
        vectors=temp(
            "results/{family}/{dataset}/{model}/corpus.shards/{shard}-of-{shards}.parquet"
        ),
        manifest="results/manifests/{family}/{dataset}/{model}/corpus.shards/{shard}-of-{shards}.json",
    log:
        "results/logs/{family}/{dataset}/{model}/corpus.shards/{shard}-of-{shards}.log",
    wildcard_constraints:
        family=one_of(plan.vector_models_by_folder),
        dataset=one_of(plan.sharded_datasets),
        model=one_of(plan.vector_models),
        shard=r"\d+",
        shards=r"\d+",
    params:
        model=lambda wc: plan.model_result_settings(wc.model),
        side="corpus",
        latency_queries=0,


rule encode_vectors_gather:
    input:
        unpack(plan.vector_gather_inputs),
    output:
        vectors="results/{family}/{dataset}/{model}/corpus.parquet",
        manifest="results/manifests/{family}/{dataset}/{model}/corpus.json",
    log:
        "results/logs/{family}/{dataset}/{model}/corpus.log",
    wildcard_constraints:
        family=one_of(plan.vector_models_by_folder),
        dataset=one_of(plan.sharded_datasets),
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: memory.gather_mb(attempt),
    script:
        "../scripts/embed_gather.py"
