"""Snakemake script for rule filter: see irflow.data.filter."""

import logging
from pathlib import Path

from _common import start_job

from irflow.data.filter import run_filter, run_filter_as_base

manifest = start_job(snakemake, "filter")
inp, out = snakemake.input, snakemake.output
tables = [Path(inp.corpus), Path(inp.queries), Path(inp.qrels)]
if "base_corpus" in inp.keys():
    # A document-expanded copy: its base's documents, not its own texts, decide.
    counts = run_filter_as_base(
        *tables,
        Path(inp.base_corpus),
        Path(inp.base_audit),
        out_corpus=Path(out.corpus),
        out_queries=Path(out.queries),
        out_audit=Path(out.audit),
        base_clusters=Path(inp.base_clusters),
        out_clusters=Path(out.clusters),
    )
else:
    counts = run_filter(
        *tables,
        snakemake.params.rules,
        out_corpus=Path(out.corpus),
        out_queries=Path(out.queries),
        out_audit=Path(out.audit),
        out_clusters=Path(out.clusters),
        workers=snakemake.threads,
    )
logging.getLogger("irflow.data.filter").info("%s", counts)
manifest.add(**counts)
manifest.write()
