"""Snakemake script for rule filter: see irflow.filter."""

import logging
from pathlib import Path

from _common import setup_logging

from irflow.filter import run_filter
from irflow.manifest import Manifest

setup_logging(snakemake)
out = snakemake.output
manifest = Manifest(out.manifest, stage="filter", dataset=snakemake.wildcards.dataset)
inp = snakemake.input
counts = run_filter(
    Path(inp.corpus),
    Path(inp.queries),
    Path(inp.qrels),
    snakemake.params.rules,
    Path(out.corpus),
    Path(out.queries),
    Path(out.audit),
)
logging.getLogger("irflow.filter").info("%s", counts)
manifest.add(**counts)
manifest.write()
