"""Snakemake script for rule label_audit_summary: one row per audited dataset, and the
report's table; see irflow.derived.label_audit."""

from pathlib import Path

import pandas as pd
from _common import setup_logging

from irflow.core import contracts
from irflow.derived.label_audit import SUMMARY_COLUMNS, summary_table_html

setup_logging(snakemake)
inp, out = snakemake.input, snakemake.output
frames = [contracts.read_frame(path) for path in inp.summaries]
summary = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SUMMARY_COLUMNS)
contracts.write_frame(summary[SUMMARY_COLUMNS], out.summary)
Path(out.table).parent.mkdir(parents=True, exist_ok=True)
Path(out.table).write_text(summary_table_html(summary), encoding="utf-8")
