"""Snakemake script for rule saliency_plot: see irflow.analyses.saliency (saliency_figure,
saliency_table)."""

from pathlib import Path

import pandas as pd
from _common import setup_logging

from irflow.analyses.plots import save
from irflow.analyses.saliency import saliency_figure, saliency_table
from irflow.core import contracts

setup_logging(snakemake)
profiles = pd.concat([contracts.read_frame(path) for path in snakemake.input.profiles])
save(saliency_figure(profiles), Path(snakemake.output.figure))
table = Path(snakemake.output.table)
table.parent.mkdir(parents=True, exist_ok=True)
table.write_text(saliency_table(profiles), encoding="utf-8")
