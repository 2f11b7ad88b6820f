"""Snakemake script for rules encode_vectors, encode_vectors_queries and encode_vectors_shard:
see irflow.encode_parts. A job encodes one side (params.side) and, where the rule has query
outputs, the queries too, with the model loaded once; each side has its own manifest."""

from pathlib import Path

import torch
from _common import start_job

from irflow.encode_parts import encode_file, query_latency
from irflow.late_interaction import TokenEncoder
from irflow.manifest import Manifest
from irflow.sparse import SparseModel

wildcards, inp, out = snakemake.wildcards, snakemake.input, snakemake.output
sharded = "shard" in wildcards.keys()
manifest = start_job(snakemake, "encode_vectors_shard" if sharded else "encode_vectors")
facts = dict(manifest.facts)
torch.set_num_threads(snakemake.threads)
spec = snakemake.config["models"][wildcards.model]
model = (SparseModel if wildcards.family == "sparse" else TokenEncoder).load(spec)
shard = (int(wildcards.shard), int(wildcards.shards)) if sharded else (0, 1)
sides = [(snakemake.params.side, "")]
if "query_vectors" in out.keys():
    sides.append(("queries", "query_"))
for side, prefix in sides:
    if prefix:  # the second side's manifest times that side only
        manifest = Manifest(getattr(out, f"{prefix}manifest"), **facts)
    manifest.add(side=side, settings=spec, **model.provenance)
    texts = Path(getattr(inp, f"{prefix}texts"))
    vectors = Path(getattr(out, f"{prefix}vectors"))
    manifest.add(**encode_file(model, texts, side, vectors, shard))
    if side == "queries" and snakemake.params.latency_queries:
        manifest.add(latency=query_latency(model, texts, snakemake.params.latency_queries))
    manifest.write()
