"""Snakemake script for rule embed: see irflow.embed."""

from pathlib import Path

import torch
from _common import start_job

from irflow.embed import Encoder, Reuse, embed_file, query_latency

manifest = start_job(snakemake, "embed")
torch.set_num_threads(snakemake.threads)
spec = snakemake.config["models"][snakemake.wildcards.model]
encoder = Encoder.load(spec)
manifest.add(settings=spec, **encoder.provenance)
side, inp = snakemake.wildcards.side, snakemake.input
reuse = (
    Reuse(Path(inp.reuse_texts), Path(inp.reuse_embeddings), side)
    if "reuse_embeddings" in inp.keys()
    else None
)
manifest.add(**embed_file(encoder, Path(inp.texts), side, Path(snakemake.output.embeddings), reuse))
if snakemake.params.latency_queries:
    count = snakemake.params.latency_queries
    manifest.add(latency=query_latency(encoder, Path(snakemake.input.texts), count))
manifest.write()
