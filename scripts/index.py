"""Snakemake script for rule index: see irflow.retrieval.index."""

from pathlib import Path

import faiss
from _common import start_job

from irflow.retrieval.index import index_file

manifest = start_job(snakemake, "index")
faiss.omp_set_num_threads(snakemake.threads)
stats = index_file(
    Path(snakemake.input.embeddings), snakemake.params.index, Path(snakemake.output.index)
)
manifest.add(device="cpu", **stats)
manifest.write()
