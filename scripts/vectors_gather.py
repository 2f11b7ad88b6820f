"""Snakemake script for rule encode_vectors_gather: see irflow.encode_parts.gather."""

import json
from pathlib import Path

from _common import start_job

from irflow.encode_parts import gather

manifest = start_job(snakemake, "encode_vectors")
shard_manifests = [json.loads(Path(path).read_text()) for path in snakemake.input.manifests]
facts = gather(
    [Path(path) for path in snakemake.input.shards],
    shard_manifests,
    Path(snakemake.input.texts),
    Path(snakemake.output.vectors),
)
manifest.add(**facts)
manifest.write()
