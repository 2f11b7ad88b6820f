# embed: filtered corpus (or its passages) and queries -> sentence-transformers embeddings per
# model. A variant reuses its base dataset's vectors for unchanged rows. Resumable: finished
# parts, named by the rows they hold, survive a killed job in <output>.parts/.


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
    params:
        model=lambda wc: model_result_settings(wc.model),
        # Queries are also encoded one at a time, for the per-query latency in the cost table.
        latency_queries=lambda wc: (
            config["cost"]["latency_queries"] if wc.side == "queries" else 0
        ),
    script:
        "../scripts/embed.py"
