"""Snakemake script for rules embed_gather and encode_vectors_gather: see
irflow.encoding.embed.gather and irflow.encoding.encode_parts.gather."""

import json
from pathlib import Path

from _common import start_job

from irflow.encoding import embed, encode_parts

inp, out = snakemake.input, snakemake.output
dense = "embeddings" in out.keys()
manifest = start_job(snakemake, "embed" if dense else "encode_vectors")
shards = [Path(path) for path in inp.shards]
shard_manifests = [json.loads(Path(path).read_text()) for path in inp.manifests]
if dense:
    side = snakemake.wildcards.side
    facts = embed.gather(shards, shard_manifests, Path(inp.texts), side, Path(out.embeddings))
else:
    facts = encode_parts.gather(shards, shard_manifests, Path(inp.texts), Path(out.vectors))
manifest.add(**facts)
manifest.write()
