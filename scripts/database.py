"""Snakemake script for rule database: see irflow.evaluation.aggregate.build_database."""

from pathlib import Path

from _common import setup_logging

from irflow.evaluation.aggregate import build_database

setup_logging(snakemake)
inp = snakemake.input
build_database(Path(snakemake.output[0]), {name: list(inp[name]) for name in inp.keys()})
