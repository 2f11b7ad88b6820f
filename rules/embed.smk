# embed: filtered corpus (or its passages) and queries -> sentence-transformers embeddings per
# model, both sides in one job (embed_passages where the model embeds passages). A variant
# reuses its base dataset's vectors for unchanged rows. Resumable: finished parts, named by
# the rows they hold, survive a killed job in <output>.parts/.
# A dataset with embed_shards > 1 embeds its documents as that many embed_shard jobs (a GPU
# each on a cluster), which embed_gather joins into the same file embed would write, and its
# queries in embed_queries.
# A dual encoder's query model embeds the queries alone (embed_query_model) where no retriever
# embeds documents with it.
# A model with an ONNX backend runs on the graph its onnx_export job made (input onnx).


include: "onnx_export.smk"


rule embed:
    input:
        unpack(plan.document_and_query_inputs),
        onnx=plan.onnx_graph,
    output:
        embeddings="results/embeddings/{dataset}/{model}/corpus.parquet",
        manifest="results/manifests/embed/{dataset}/{model}/corpus.json",
        query_embeddings="results/embeddings/{dataset}/{model}/queries.parquet",
        query_manifest="results/manifests/embed/{dataset}/{model}/queries.json",
    log:
        "results/logs/embed/{dataset}/{model}/corpus+queries.log",
    wildcard_constraints:
        dataset=one_of(plan.unsharded_datasets),
        model=one_of(plan.corpus_models),
    # The longest jobs of a dataset start first; the short ones fill the cores around them
    # (on a small machine an encoding takes every core, and a short job alone leaves one idle).
    priority: 1
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
        "../scripts/embed.py"


use rule embed as embed_passages with:
    output:
        embeddings="results/embeddings/{dataset}/{model}/passages.parquet",
        manifest="results/manifests/embed/{dataset}/{model}/passages.json",
        query_embeddings="results/embeddings/{dataset}/{model}/queries.parquet",
        query_manifest="results/manifests/embed/{dataset}/{model}/queries.json",
    log:
        "results/logs/embed/{dataset}/{model}/passages+queries.log",
    wildcard_constraints:
        dataset=one_of(plan.unsharded_datasets),
        model=one_of(plan.passage_models),
    params:
        model=lambda wc: plan.model_result_settings(wc.model),
        side="passages",
        latency_queries=config["cost"]["latency_queries"],


use rule embed as embed_queries with:
    input:
        unpack(plan.query_inputs),
        onnx=plan.onnx_graph,
    output:
        embeddings="results/embeddings/{dataset}/{model}/queries.parquet",
        manifest="results/manifests/embed/{dataset}/{model}/queries.json",
    log:
        "results/logs/embed/{dataset}/{model}/queries.log",
    wildcard_constraints:
        dataset=one_of(plan.sharded_datasets),
        model=one_of(plan.dense_models),
    params:
        model=lambda wc: plan.model_result_settings(wc.model),
        side="queries",
        latency_queries=config["cost"]["latency_queries"],


# A dual encoder's query model that embeds no documents: its query vectors alone.
use rule embed_queries as embed_query_model with:
    wildcard_constraints:
        dataset=one_of(plan.datasets),
        model=one_of(plan.query_only_models),


use rule embed as embed_shard with:
    input:
        unpack(plan.shard_inputs),
        onnx=plan.onnx_graph,
    output:
        embeddings=temp(
            "results/embeddings/{dataset}/{model}/{side}.shards/{shard}-of-{shards}.parquet"
        ),
        manifest="results/manifests/embed/{dataset}/{model}/{side}.shards/{shard}-of-{shards}.json",
    log:
        "results/logs/embed/{dataset}/{model}/{side}.shards/{shard}-of-{shards}.log",
    wildcard_constraints:
        dataset=one_of(plan.sharded_datasets),
        model=one_of(plan.dense_models),
        side="corpus|passages",
        shard=r"\d+",
        shards=r"\d+",
    params:
        model=lambda wc: plan.model_result_settings(wc.model),
        side=lambda wc: wc.side,
        latency_queries=0,


rule embed_gather:
    input:
        unpack(plan.gather_inputs),
    output:
        embeddings="results/embeddings/{dataset}/{model}/{side}.parquet",
        manifest="results/manifests/embed/{dataset}/{model}/{side}.json",
    log:
        "results/logs/embed/{dataset}/{model}/{side}.log",
    wildcard_constraints:
        dataset=one_of(plan.sharded_datasets),
        side="corpus|passages",
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, input, attempt: memory.dense_gather_mb(input.shards, attempt),
    script:
        "../scripts/embed_gather.py"
