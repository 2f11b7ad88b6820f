"""Snakemake script for rules embed and embed_shard: see irflow.embed."""

from pathlib import Path

import torch
from _common import start_job

from irflow.embed import Encoder, Reuse, embed_file, query_latency

wildcards, inp = snakemake.wildcards, snakemake.input
sharded = "shard" in wildcards.keys()
manifest = start_job(snakemake, "embed_shard" if sharded else "embed")
torch.set_num_threads(snakemake.threads)
spec = snakemake.config["models"][wildcards.model]
encoder = Encoder.load(spec)
manifest.add(settings=spec, **encoder.provenance)
reuse = (
    Reuse(Path(inp.reuse_texts), Path(inp.reuse_embeddings), wildcards.side)
    if "reuse_embeddings" in inp.keys()
    else None
)
shard = (int(wildcards.shard), int(wildcards.shards)) if sharded else (0, 1)
stats = embed_file(
    encoder, Path(inp.texts), wildcards.side, Path(snakemake.output.embeddings), reuse, shard
)
manifest.add(**stats)
if snakemake.params.latency_queries:
    count = snakemake.params.latency_queries
    manifest.add(latency=query_latency(encoder, Path(inp.texts), count))
manifest.write()
