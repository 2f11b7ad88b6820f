"""Snakemake script for rule quality_control_summary: one row per QC'd dataset, and the
report's table; see irflow.derived.qc.control.summarize_audit."""

from pathlib import Path

import pandas as pd
from _common import setup_logging

from irflow.core import contracts
from irflow.derived.qc.control import summarize_audit, summary_table_html

setup_logging(snakemake)
inp, out = snakemake.input, snakemake.output
summary = summarize_audit(
    pd.concat([contracts.read_frame(p) for p in inp.audits], ignore_index=True)
)
contracts.write_frame(summary, out.summary)
Path(out.table).parent.mkdir(parents=True, exist_ok=True)
Path(out.table).write_text(summary_table_html(summary), encoding="utf-8")
