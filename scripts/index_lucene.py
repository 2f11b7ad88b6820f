"""Snakemake script for rule index_lucene: see irflow.retrieval.lucene."""

from pathlib import Path

from _common import start_job

from irflow.retrieval.lucene import build_index

manifest = start_job(snakemake, "index_lucene")
facts = build_index(
    Path(snakemake.input.corpus),
    snakemake.wildcards.fields,
    Path(snakemake.output.index),
    snakemake.threads,
)
manifest.add(device="cpu", **facts)
manifest.write()
