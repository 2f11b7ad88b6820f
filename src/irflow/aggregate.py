"""aggregate: per-query scores -> summary, BEIR-style tables and one DuckDB database.

The database holds views, not copies: it stays small and always shows the Parquet files the
workflow wrote. Paths in the views are relative to the workflow's working directory, so open
the database from there (``duckdb results/irflow.duckdb``).
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from irflow import contracts
from irflow.score import summarize


def build_summary(scores: list[tuple[str, str, Path]]) -> pd.DataFrame:
    """``scores`` lists (dataset, system, per-query Parquet)."""
    frames = []
    for dataset, system, path in scores:
        summary = summarize(pd.read_parquet(path))
        summary.insert(0, "system", system)
        summary.insert(0, "dataset", dataset)
        frames.append(summary)
    return pd.concat(frames, ignore_index=True)[contracts.SUMMARY.names]


def wide_table(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Systems x datasets for one metric, with the average over datasets (BEIR's table 2)."""
    selected = summary[summary["metric"] == metric]
    if selected.empty:
        known = ", ".join(sorted(summary["metric"].unique()))
        raise ValueError(f"report metric {metric!r} was not computed; computed metrics: {known}")
    table = selected.pivot(index="system", columns="dataset", values="value")
    table = table[sorted(table.columns)]
    table["Average"] = table.mean(axis=1)
    return table.sort_values("Average", ascending=False)


def markdown(tables: dict[str, pd.DataFrame]) -> str:
    parts = ["# irflow results", ""]
    for metric, table in tables.items():
        header = ["system", *table.columns]
        parts += [
            f"## {metric}",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "|".join(["---"] + ["---:"] * len(table.columns)) + "|",
        ]
        for system, row in table.iterrows():
            cells = ["" if pd.isna(v) else f"{v:.4f}" for v in row]
            parts.append("| " + " | ".join([system, *cells]) + " |")
        parts.append("")
    return "\n".join(parts)


def write_tables(summary: pd.DataFrame, metrics: list[str], markdown_path: Path, csv_dir: Path):
    tables = {metric: wide_table(summary, metric) for metric in metrics}
    csv_dir.mkdir(parents=True, exist_ok=True)
    for metric, table in tables.items():
        table.to_csv(csv_dir / f"{metric}.csv", float_format="%.6f")
    markdown_path.write_text(markdown(tables), encoding="utf-8")


def _files(paths: list[Path]) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def _parquet_view(name: str, paths: list[Path], pattern: str, keys: list[str]) -> str:
    """A view over ``paths`` with ``keys`` (dataset, system) taken from each file's path."""
    columns = ", ".join(
        f"regexp_extract(filename, '{pattern}', {i + 1}) AS {key}" for i, key in enumerate(keys)
    )
    return (
        f"CREATE OR REPLACE VIEW {name} AS SELECT {columns}, * EXCLUDE (filename) "
        f"FROM read_parquet({_files(paths)}, filename = true)"
    )


# View name -> (path pattern with capture groups, the keys they capture).
PATTERNS = {
    "corpus": (r"datasets/([^/]+)/corpus\.parquet$", ["dataset"]),
    "queries": (r"datasets/([^/]+)/queries\.parquet$", ["dataset"]),
    "qrels": (r"datasets/([^/]+)/qrels\.parquet$", ["dataset"]),
    "filter_audit": (r"datasets/([^/]+)/filtered/audit\.parquet$", ["dataset"]),
    "runs": (r"runs/([^/]+)/([^/]+)\.parquet$", ["dataset", "system"]),
    "per_query": (r"scores/([^/]+)/([^/]+)\.parquet$", ["dataset", "system"]),
}


def build_database(
    db_path: Path, files: dict[str, list[Path]], summary_path: Path, manifests: list[Path]
) -> None:
    """(Re)create the DuckDB file with one view per contract."""
    tmp = db_path.with_name(f".{db_path.name}.tmp")
    tmp.unlink(missing_ok=True)
    with duckdb.connect(str(tmp)) as db:
        for view, paths in files.items():
            pattern, keys = PATTERNS[view]
            db.execute(_parquet_view(view, paths, pattern, keys))
        db.execute(
            f"CREATE OR REPLACE VIEW summary AS SELECT * FROM read_parquet('{summary_path}')"
        )
        db.execute(
            "CREATE OR REPLACE VIEW manifests AS SELECT filename AS path, "
            f"content::JSON AS record FROM read_text({_files(manifests)})"
        )
    os.replace(tmp, db_path)


def write_summary(summary: pd.DataFrame, path: Path) -> None:
    table = pa.Table.from_pandas(summary, schema=contracts.SUMMARY, preserve_index=False)
    contracts.write_table(table, path)
