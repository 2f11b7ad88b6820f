"""Snakemake script for rule index: see irflow.index."""

from pathlib import Path

import faiss
from _common import setup_logging

from irflow.index import index_file
from irflow.manifest import Manifest

setup_logging(snakemake)
wildcards, out = snakemake.wildcards, snakemake.output
faiss.omp_set_num_threads(snakemake.threads)
manifest = Manifest(out.manifest, stage="index", dataset=wildcards.dataset, model=wildcards.model)
manifest.add(**index_file(Path(snakemake.input[0]), snakemake.params.index, Path(out.index)))
manifest.write()
