"""Snakemake script for rule plots: see irflow.analyses.plots."""

from pathlib import Path

import numpy as np
from _common import setup_logging

from irflow.analyses.correlate import MIN_SYSTEMS
from irflow.analyses.plots import (
    bar_charts,
    bootstrap_histogram,
    latency_quality,
    matrix,
    significance_matrices,
    significance_table,
)
from irflow.core import contracts
from irflow.evaluation import beir_table, published, significance
from irflow.evaluation.tables import TableLayout, html_tables, result_tables

setup_logging(snakemake)
inp, out, params = snakemake.input, snakemake.output, snakemake.params
per_query = contracts.read_frame(inp.per_query)
summary = contracts.read_frame(inp.summary)
cost = contracts.read_frame(inp.cost)

bar_charts(per_query, params.metric, Path(out.quality))
comparisons = contracts.read_frame(inp.significance)
significance_matrices(comparisons, params.significance["metrics"][0], Path(out.significance))
correlations = contracts.read_frame(inp.correlations)
systems = per_query["system"].nunique()
for kind, path in (("datasets", out.correlation_datasets), ("metrics", out.correlation_metrics)):
    pairs = correlations[correlations["kind"] == kind]
    table = pairs.pivot(index="left", columns="right", values="spearman")
    matrix(
        table,
        f"Spearman correlation of system orderings between {kind}",
        Path(path),
        empty=f"a rank correlation needs {MIN_SYSTEMS} systems; this run has {systems}",
    )
draws = contracts.read_frame(inp.bootstrap)
full = np.nan  # the two groups' correlation on every query, from the benchmarks rows
if not draws.empty:
    groups = correlations[correlations["kind"] == "benchmarks"].set_index(["left", "right"])
    left, right = draws["left"].iloc[0], draws["right"].iloc[0]
    # A benchmark against a subsample of itself: the table has no row of it with itself.
    full = 1.0 if left == right else groups.loc[(left, right), "spearman"]
bootstrap_histogram(draws, Path(out.bootstrap), full=full)
similarity = contracts.read_frame(inp.similarity).pivot(
    index="left", columns="right", values="similarity"
)
matrix(
    similarity, "Corpus similarity (weighted Jaccard)", Path(out.similarity), vmin=0, cmap="viridis"
)

quality = summary[summary["metric"] == params.metric][["dataset", "system", "value"]]
latency_quality(cost.merge(quality, on=["dataset", "system"]), params.metric, Path(out.latency))

layout = TableLayout(**params.layout)
entries = published.load_published(inp.reference)
tables = (
    html_tables(
        {metric: result_tables(summary, metric, layout) for metric in params.report_metrics},
        layout,
        params.depth,
    )
    + beir_table.html_table(beir_table.view(summary, entries, params.identities, layout))
    + published.html(contracts.read_frame(inp.published), params.report_metrics, params.depth)
)
Path(out.results_table).parent.mkdir(parents=True, exist_ok=True)
Path(out.results_table).write_text(tables, encoding="utf-8")
tests = params.significance
against = significance.html(comparisons, tests["baseline"], tests["alpha"], params.depth)
Path(out.significance_table).write_text(against + significance_table(comparisons), encoding="utf-8")
Path(out.cost_table).write_text(
    cost.to_html(index=False, float_format="{:.3f}".format, na_rep="–"), encoding="utf-8"
)
