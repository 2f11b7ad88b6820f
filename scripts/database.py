"""Snakemake script for rule database: see irflow.evaluation.aggregate.build_database and
irflow.workflow.experiment."""

from pathlib import Path

from _common import setup_logging

from irflow.evaluation.aggregate import build_database
from irflow.workflow.experiment import write_record

setup_logging(snakemake)
inp, out, experiment = snakemake.input, snakemake.output, snakemake.params.experiment
# The record first: the database's views check it (irflow.evaluation.aggregate).
write_record(experiment, snakemake.config, Path(out.experiment))
files = {name: list(inp[name]) for name in inp.keys()}
build_database(Path(out.database), files, experiment, record=Path(out.experiment))
