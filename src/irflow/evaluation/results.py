"""results: the aggregate rule's outputs (per-query table, summary, published comparison,
results.md and its CSV tables), for every (dataset, system) of a run, or for the pairs that
finished when a run failed (irflow.workflow.run_end, results/partial/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from irflow.core import contracts
from irflow.evaluation import beir_table, published, significance
from irflow.evaluation.aggregate import build_summary, collect_per_query
from irflow.evaluation.tables import TableLayout, write_tables


@dataclass(frozen=True)
class ResultFiles:
    """Where the aggregate's outputs go."""

    per_query: Path
    summary: Path
    markdown: Path
    tables: Path
    published: Path

    @classmethod
    def in_folder(cls, folder: Path) -> ResultFiles:
        """The outputs under ``folder``, named as the aggregate rule names them in results/."""
        return cls(
            per_query=folder / "per_query.parquet",
            summary=folder / "summary.parquet",
            markdown=folder / "results.md",
            tables=folder / "tables",
            published=folder / "published.parquet",
        )


def write_results(
    scores: list[tuple[str, str, Path]],
    published_path: Path,
    files: ResultFiles,
    report_metrics: list[str],
    layout: TableLayout,
    identities: dict,
    *,
    missing: dict[tuple[str, str], str] | None = None,
    depth: int | None = None,
    tests: tuple[pd.DataFrame, dict] | None = None,
) -> pd.DataFrame:
    """Aggregate ``scores`` ((dataset, system, per-query Parquet) each) into ``files``: the
    per-query table, the summary, each number beside its published value
    (``published_path``; ``identities``: what each system is published as) and the tables of
    ``report_metrics``, named with ``depth``, every run's (top_k), with BEIR's Table 2 in its
    shape where the run has its datasets and systems (irflow.evaluation.beir_table). With
    ``tests``, the significance table and its settings (config ``significance``), results.md
    shows each system against the baseline (irflow.evaluation.significance). With ``missing``,
    a partial run's tables (irflow.evaluation.tables). Returns the summary."""
    per_query = collect_per_query(scores)
    contracts.write_frame(per_query, files.per_query)
    summary = build_summary(per_query, layout.seed_of())
    contracts.write_frame(summary, files.summary, contracts.SUMMARY)
    entries = published.load_published(published_path)
    comparison = published.compare(summary, entries, identities)
    contracts.write_frame(comparison, files.published, contracts.PUBLISHED)
    published.log_misses(comparison)
    appendix = ""
    if tests is not None:
        comparisons, settings = tests
        appendix = significance.markdown(
            comparisons, settings["baseline"], settings["alpha"], depth
        )
    appendix += beir_table.markdown(beir_table.view(summary, entries, identities, layout))
    appendix += published.markdown(comparison, report_metrics, depth)
    write_tables(
        summary,
        report_metrics,
        layout,
        files.markdown,
        files.tables,
        appendix=appendix,
        missing=missing,
        depth=depth,
    )
    return summary
