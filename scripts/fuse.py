"""Snakemake script for rule fuse: see irflow.retrieval.fuse."""

from pathlib import Path

from _common import start_job

from irflow.core import contracts
from irflow.retrieval.fuse import reciprocal_rank_fusion, weighted_fusion
from irflow.retrieval.runs import read_run, write_run

manifest = start_job(snakemake, "fuse")
settings, wildcards = snakemake.params.settings, snakemake.wildcards
runs = [read_run(path) for path in snakemake.input.runs]
if settings["method"] == "rrf":
    fused = reciprocal_rank_fusion(runs, k=settings["k"], top_k=settings["top_k"])
else:
    weights = settings["weights"] or [1.0] * len(runs)
    fused = weighted_fusion(
        runs, weights, normalization=settings["normalization"], top_k=settings["top_k"]
    )
lineage = {
    "stage": "fuse",
    "system": wildcards.system,
    "dataset": wildcards.dataset,
    "inputs": [contracts.read_lineage(path) for path in snakemake.input.runs],
} | settings
write_run(fused, Path(snakemake.output.run), lineage, Path(snakemake.output.trec), wildcards.system)
manifest.add(settings=settings, rows=len(fused))
manifest.write()
