# embed: filtered corpus (or its passages) and queries -> sentence-transformers embeddings per
# model. A variant reuses its base dataset's vectors for unchanged rows. Resumable: finished
# parts, named by the rows they hold, survive a killed job in <output>.parts/.
# A dataset with embed_shards > 1 embeds its documents as that many embed_shard jobs (a GPU
# each on a cluster), which embed_gather joins into the same file embed would write.


rule embed:
    input:
        unpack(embed_inputs),
    output:
        embeddings="results/embeddings/{dataset}/{model}/{side}.parquet",
        manifest="results/manifests/embed/{dataset}/{model}/{side}.json",
    log:
        "results/logs/embed/{dataset}/{model}/{side}.log",
    conda:
        "../envs/models.yaml"
    threads: 8  # capped by --cores, and on SLURM by the profile's max-threads
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: memory.embed_mb(attempt),
    params:
        model=lambda wc: model_result_settings(wc.model),
        # Queries are also encoded one at a time, for the per-query latency in the cost table.
        latency_queries=lambda wc: (
            config["cost"]["latency_queries"] if wc.side == "queries" else 0
        ),
    script:
        "../scripts/embed.py"


use rule embed as embed_shard with:
    output:
        embeddings=temp(
            "results/embeddings/{dataset}/{model}/{side}.shards/{shard}-of-{shards}.parquet"
        ),
        manifest="results/manifests/embed/{dataset}/{model}/{side}.shards/{shard}-of-{shards}.json",
    log:
        "results/logs/embed/{dataset}/{model}/{side}.shards/{shard}-of-{shards}.log",
    wildcard_constraints:
        side="corpus|passages",
        shard=r"\d+",
        shards=r"\d+",
    params:
        model=lambda wc: model_result_settings(wc.model),
        latency_queries=0,


rule embed_gather:
    input:
        unpack(gather_inputs),
    output:
        embeddings="results/embeddings/{dataset}/{model}/{side}.parquet",
        manifest="results/manifests/embed/{dataset}/{model}/{side}.json",
    log:
        "results/logs/embed/{dataset}/{model}/{side}.log",
    wildcard_constraints:
        dataset=one_of(SHARDED_DATASETS),
        side="corpus|passages",
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: memory.gather_mb(attempt),
    script:
        "../scripts/embed_gather.py"


# A sharded dataset's documents are gathered from shards, never embedded in one job.
ruleorder: embed_gather > embed
