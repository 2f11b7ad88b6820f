"""Snakemake script for rule embed_gather: see irflow.embed.gather."""

import json
from pathlib import Path

from _common import start_job

from irflow.embed import gather

manifest = start_job(snakemake, "embed")
shard_manifests = [json.loads(Path(path).read_text()) for path in snakemake.input.manifests]
facts = gather(
    [Path(path) for path in snakemake.input.shards],
    shard_manifests,
    Path(snakemake.input.texts),
    snakemake.wildcards.side,
    Path(snakemake.output.embeddings),
)
manifest.add(**facts)
manifest.write()
