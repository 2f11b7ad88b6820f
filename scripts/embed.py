"""Snakemake script for rules embed, embed_passages, embed_queries and embed_shard: see
irflow.embed. A job embeds one side (params.side) and, where the rule has query outputs, the
queries too, with the model loaded once; each side has its own manifest."""

from pathlib import Path

import torch
from _common import start_job

from irflow.embed import Encoder, Reuse, embed_file, query_latency
from irflow.manifest import Manifest

wildcards, inp, out = snakemake.wildcards, snakemake.input, snakemake.output
sharded = "shard" in wildcards.keys()
manifest = start_job(snakemake, "embed_shard" if sharded else "embed")
facts = dict(manifest.facts)
torch.set_num_threads(snakemake.threads)
spec = snakemake.config["models"][wildcards.model]
# The exported graph, for a model with an ONNX backend (rules/onnx_export.smk).
encoder = Encoder.load(spec, Path(inp.onnx) if inp.get("onnx") else None)
shard = (int(wildcards.shard), int(wildcards.shards)) if sharded else (0, 1)
sides = [(snakemake.params.side, "")]
if "query_embeddings" in out.keys():
    sides.append(("queries", "query_"))
for side, prefix in sides:
    if prefix:  # the second side's manifest times that side only
        manifest = Manifest(getattr(out, f"{prefix}manifest"), **facts)
    manifest.add(side=side, settings=spec, **encoder.provenance)
    reuse = (
        Reuse(
            Path(getattr(inp, f"reuse_{prefix}texts")),
            Path(getattr(inp, f"reuse_{prefix}embeddings")),
            side,
        )
        if f"reuse_{prefix}embeddings" in inp.keys()
        else None
    )
    texts = Path(getattr(inp, f"{prefix}texts"))
    embeddings = Path(getattr(out, f"{prefix}embeddings"))
    manifest.add(**embed_file(encoder, texts, side, embeddings, reuse, shard))
    if side == "queries" and snakemake.params.latency_queries:
        count = snakemake.params.latency_queries
        manifest.add(latency=query_latency(encoder, texts, count))
    manifest.write()
