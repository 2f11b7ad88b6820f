"""Snakemake script for rule negatives: see irflow.negatives."""

import logging
from pathlib import Path

from _common import start_job

from irflow.negatives import run_negatives

manifest = start_job(snakemake, "negatives")
inp, out, settings = snakemake.input, snakemake.output, snakemake.params.settings
counts = run_negatives(
    Path(inp.run),
    Path(inp.qrels),
    Path(inp.queries),
    Path(inp.corpus),
    settings,
    Path(out.parquet),
    Path(out.jsonl),
)
logging.getLogger("irflow.negatives").info("%s", counts)
manifest.add(**counts, settings=settings)
manifest.write()
