"""Snakemake script for rule filter_summary: see irflow.data.filter.summarize_filters."""

from pathlib import Path

from _common import setup_logging

from irflow.core.contracts import FILTER_SUMMARY, write_table
from irflow.data import filter as filtering

setup_logging(snakemake)
inp, out = snakemake.input, snakemake.output
datasets = {
    dataset: {
        "corpus": Path(inp.corpus[i]),
        "filtered": Path(inp.filtered[i]),
        "audit": Path(inp.audit[i]),
        "clusters": Path(inp.clusters[i]),
    }
    for i, dataset in enumerate(snakemake.params.datasets)
}
summary = filtering.summarize_filters(datasets)
write_table(summary, Path(out.summary), FILTER_SUMMARY)
Path(out.table).parent.mkdir(parents=True, exist_ok=True)
Path(out.table).write_text(filtering.filter_table_html(summary), encoding="utf-8")
