"""Snakemake script for rule position_plots: see irflow.analyses.plots."""

from pathlib import Path

import pandas as pd
from _common import setup_logging

from irflow.analyses.plots import position_curves, psi_table

setup_logging(snakemake)
inp, out = snakemake.input, snakemake.output
position_curves(pd.read_parquet(inp.bins), Path(out.curves))
Path(out.psi_table).parent.mkdir(parents=True, exist_ok=True)
Path(out.psi_table).write_text(psi_table(pd.read_parquet(inp.psi)), encoding="utf-8")
