"""Snakemake script for rule aggregate: see irflow.aggregate."""

from pathlib import Path

from _common import setup_logging

from irflow.aggregate import build_database, build_summary, write_summary, write_tables

setup_logging(snakemake)
inp, out, params = snakemake.input, snakemake.output, snakemake.params
summary = build_summary([(d, s, Path(path)) for (d, s), path in zip(params.pairs, inp.scores)])
write_summary(summary, Path(out.summary))
write_tables(summary, params.report_metrics, Path(out.markdown), Path(out.tables))
views = {
    name: [Path(p) for p in inp[name]]
    for name in ("corpus", "queries", "qrels", "filter_audit", "runs")
}
views["per_query"] = [Path(p) for p in inp.scores]
build_database(Path(out.database), views, Path(out.summary), [Path(p) for p in inp.manifests])
