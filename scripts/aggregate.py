"""Snakemake script for rule aggregate: see irflow.evaluation.aggregate."""

from pathlib import Path

from _common import setup_logging

from irflow.core import contracts
from irflow.evaluation import published
from irflow.evaluation.aggregate import build_summary, collect_per_query
from irflow.evaluation.tables import TableLayout, write_tables

setup_logging(snakemake)
inp, out, params = snakemake.input, snakemake.output, snakemake.params
per_query = collect_per_query([(d, s, Path(p)) for (d, s), p in zip(params.pairs, inp.scores)])
contracts.write_frame(per_query, Path(out.per_query))
summary = build_summary(per_query)
contracts.write_frame(summary, Path(out.summary), contracts.SUMMARY)
comparison = published.compare(summary, published.load_published(inp.published), params.identities)
contracts.write_frame(comparison, Path(out.published), contracts.PUBLISHED)
published.log_misses(comparison)
layout = TableLayout(**params.layout)
write_tables(
    summary,
    params.report_metrics,
    layout,
    Path(out.markdown),
    Path(out.tables),
    appendix=published.markdown(comparison),
)
