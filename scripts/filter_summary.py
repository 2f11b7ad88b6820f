"""Snakemake script for rule filter_summary: see irflow.filter.summarize_filters."""

from pathlib import Path

from _common import setup_logging

from irflow import filter as filtering
from irflow.contracts import write_table

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
write_table(summary, Path(out.summary), filtering.FILTER_SUMMARY)
Path(out.table).parent.mkdir(parents=True, exist_ok=True)
Path(out.table).write_text(filtering.filter_table_html(summary), encoding="utf-8")
