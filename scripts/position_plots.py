"""Snakemake script for rule position_plots: see irflow.analyses.plots."""

from pathlib import Path

from _common import setup_logging

from irflow.analyses.plots import position_curves, psi_table
from irflow.analyses.query_types import query_types_table
from irflow.core import contracts

setup_logging(snakemake)
inp, out = snakemake.input, snakemake.output
position_curves(contracts.read_frame(inp.bins), Path(out.curves))
Path(out.psi_table).parent.mkdir(parents=True, exist_ok=True)
Path(out.psi_table).write_text(psi_table(contracts.read_frame(inp.psi)), encoding="utf-8")
types = query_types_table(contracts.read_frame(inp.types))
Path(out.types_table).write_text(types, encoding="utf-8")
