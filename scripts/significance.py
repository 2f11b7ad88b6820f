"""Snakemake script for rule significance: see irflow.evaluation.significance."""

from pathlib import Path

from _common import setup_logging

from irflow.core import contracts
from irflow.evaluation.aggregate import collect_per_query
from irflow.evaluation.significance import every_comparison

setup_logging(snakemake)
pairs = zip(snakemake.params.pairs, snakemake.input.scores)
per_query = collect_per_query([(dataset, system, Path(path)) for (dataset, system), path in pairs])
table = every_comparison(per_query, snakemake.params.settings)
contracts.write_frame(table, snakemake.output.table, contracts.SIGNIFICANCE)
