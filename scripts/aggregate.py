"""Snakemake script for rule aggregate: see irflow.evaluation.results."""

from pathlib import Path

from _common import setup_logging

from irflow.core import contracts
from irflow.evaluation.results import ResultFiles, write_results
from irflow.evaluation.tables import TableLayout

setup_logging(snakemake)
inp, out, params = snakemake.input, snakemake.output, snakemake.params
write_results(
    [(d, s, Path(p)) for (d, s), p in zip(params.pairs, inp.scores)],
    Path(inp.published),
    ResultFiles(**{name: Path(path) for name, path in out.items()}),
    params.report_metrics,
    TableLayout(**params.layout),
    params.identities,
    depth=params.depth,
    tests=(contracts.read_frame(inp.significance), params.significance),
)
