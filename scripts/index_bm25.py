"""Snakemake script for rule index_bm25: see irflow.retrieval.bm25."""

from pathlib import Path

from _common import start_job

from irflow.retrieval.bm25 import build_index

manifest = start_job(snakemake, "index_bm25")
facts = build_index(
    Path(snakemake.input.corpus), snakemake.params.settings, Path(snakemake.output.index)
)
manifest.add(settings=snakemake.params.settings, device="cpu", **facts)
manifest.write()
