"""Snakemake script for rule beir_figures: see irflow.analyses.beir_figures."""

from _common import setup_logging

from irflow.analyses.beir_figures import write_figures

setup_logging(snakemake)
params = snakemake.params
pairs = [(d, s) for d in params.datasets for s in params.systems]
write_figures(
    snakemake.input.summary,
    dict(zip(pairs, snakemake.input.runs)),
    dict(zip(params.datasets, snakemake.input.corpora)),
    params.layout,
    params.settings,
    snakemake.output,
)
