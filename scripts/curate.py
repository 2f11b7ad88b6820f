"""Snakemake script for rule curate: a curated dataset's tables are its base dataset's (see
irflow.data.filter.copy_tables); its own filter block then decides what it keeps."""

from pathlib import Path

from _common import start_job

from irflow.data.filter import copy_tables

manifest = start_job(snakemake, "curate")
names = ["source", "corpus", "queries", "qrels"]
copy_tables(
    [Path(snakemake.input[name]) for name in names],
    [Path(snakemake.output[name]) for name in names],
)
manifest.add(base=snakemake.params.base)
manifest.write()
