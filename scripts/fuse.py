"""Snakemake script for rule fuse: see irflow.retrieval.fuse."""

from pathlib import Path

from _common import start_job

from irflow.core import contracts
from irflow.retrieval.fuse import fuse_runs
from irflow.retrieval.runs import read_run, write_run

manifest = start_job(snakemake, "fuse")
settings, wildcards = snakemake.params.settings, snakemake.wildcards
runs = [read_run(path) for path in snakemake.input.runs]
fused = fuse_runs(runs, settings)
lineage = {
    "stage": "fuse",
    "system": wildcards.system,
    "dataset": wildcards.dataset,
    "inputs": [contracts.read_lineage(path) for path in snakemake.input.runs],
} | settings
write_run(fused, Path(snakemake.output.run), lineage, Path(snakemake.output.trec), wildcards.system)
manifest.add(settings=settings, rows=len(fused))
manifest.write()
