"""Snakemake script for rule embed: see irflow.embed."""

from pathlib import Path

import torch
from _common import setup_logging

from irflow.embed import Encoder, embed_file
from irflow.manifest import Manifest

setup_logging(snakemake)
wildcards, out = snakemake.wildcards, snakemake.output
torch.set_num_threads(snakemake.threads)
spec = snakemake.config["models"][wildcards.model]
manifest = Manifest(
    out.manifest, stage="embed", dataset=wildcards.dataset, side=wildcards.side, settings=spec
)
encoder = Encoder.load(spec)
manifest.add(**encoder.provenance)
manifest.add(
    **embed_file(encoder, Path(snakemake.input.texts), wildcards.side, Path(out.embeddings))
)
manifest.write()
