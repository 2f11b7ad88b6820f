"""Snakemake script for rule filter: see irflow.filter."""

import logging
from pathlib import Path

from _common import start_job

from irflow.filter import run_filter

manifest = start_job(snakemake, "filter")
inp, out = snakemake.input, snakemake.output
counts = run_filter(
    Path(inp.corpus),
    Path(inp.queries),
    Path(inp.qrels),
    snakemake.params.rules,
    Path(out.corpus),
    Path(out.queries),
    Path(out.audit),
    Path(out.clusters),
    workers=snakemake.threads,
)
logging.getLogger("irflow.filter").info("%s", counts)
manifest.add(**counts)
manifest.write()
