"""aggregate: per-query scores -> summary, BEIR-style tables and one DuckDB database.

The database holds views, not copies: it stays small and always shows the Parquet files the
workflow wrote. Paths in the views are relative to the workflow's working directory, so open
the database from there (``duckdb results/irflow.duckdb``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
from pytrec_eval import compute_aggregated_measure

from irflow.core import contracts
from irflow.core.atomic import atomic_path


def collect_per_query(scores: list[tuple[str, str, Path]]) -> pd.DataFrame:
    """All per-query values in one table; ``scores`` lists (dataset, system, Parquet path)."""
    frames = [
        pd.read_parquet(path).assign(dataset=dataset, system=system)
        for dataset, system, path in scores
    ]
    return pd.concat(frames, ignore_index=True)[
        ["dataset", "system", "query_id", "metric", "value"]
    ]


def build_summary(per_query: pd.DataFrame) -> pd.DataFrame:
    """Each metric over the judged queries, aggregated as trec_eval aggregates it: the mean,
    but the sum for ``num_*`` counts and the geometric mean for ``gm_*`` (whose per-query
    values are logs). Quality only: cost measurements stay in the cost table."""
    rows = [
        (
            dataset,
            system,
            metric,
            compute_aggregated_measure(metric, values.to_numpy()),
            len(values),
        )
        for (dataset, system, metric), values in per_query.groupby(
            ["dataset", "system", "metric"], sort=True
        )["value"]
    ]
    return pd.DataFrame(rows, columns=contracts.SUMMARY.names)


def _files(paths: list) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


# Views over per-dataset files: path pattern with capture groups, and the keys they capture.
PATTERNS = {
    "corpus": (r"datasets/([^/]+)/corpus\.parquet$", ["dataset"]),
    "queries": (r"datasets/([^/]+)/queries\.parquet$", ["dataset"]),
    "qrels": (r"datasets/([^/]+)/qrels\.parquet$", ["dataset"]),
    "filter_audit": (r"datasets/([^/]+)/filtered/audit\.parquet$", ["dataset"]),
    "clusters": (r"datasets/([^/]+)/filtered/clusters\.parquet$", ["dataset"]),
    "negatives": (r"negatives/([^/]+)\.parquet$", ["export"]),
    "passages": (r"datasets/([^/]+)/passages/([^/]+)\.parquet$", ["dataset", "model"]),
    "runs": (r"runs/([^/]+)/([^/]+)\.parquet$", ["dataset", "system"]),
    "per_query": (r"scores/([^/]+)/([^/]+)\.parquet$", ["dataset", "system"]),
}


def _view(name: str, paths: list) -> str:
    if name == "manifests":
        source = f"SELECT filename AS path, content::JSON AS record FROM read_text({_files(paths)})"
    elif name in PATTERNS:
        pattern, keys = PATTERNS[name]
        columns = ", ".join(
            f"regexp_extract(filename, '{pattern}', {i + 1}) AS {key}" for i, key in enumerate(keys)
        )
        source = (
            f"SELECT {columns}, * EXCLUDE (filename) "
            f"FROM read_parquet({_files(paths)}, filename = true)"
        )
    else:
        source = f"SELECT * FROM read_parquet({_files(paths)}, union_by_name = true)"
    return f"CREATE OR REPLACE VIEW {name} AS {source}"


def build_database(db_path: Path, files: dict[str, list], experiment: dict | None = None) -> None:
    """(Re)create the DuckDB file with one view per name in ``files`` (a contract's files, a
    table's file, or the JSON manifests), ``lineage``, how each run was made, and the
    ``experiment`` table: the config files and fingerprint of the results
    (irflow.workflow.experiment)."""
    # Named by the process: another build of the same results (a rerun beside a run still
    # going) must not delete or open this one's.
    with atomic_path(db_path) as tmp:
        _build(tmp, files, experiment)


def _build(path: Path, files: dict[str, list], experiment: dict | None) -> None:
    with duckdb.connect(str(path)) as db:
        if experiment is not None:
            db.execute(
                "CREATE TABLE experiment AS SELECT $config_files::VARCHAR[] AS config_files, "
                "$fingerprint AS fingerprint",
                experiment,
            )
        for name, paths in files.items():
            if paths:  # DuckDB cannot read no files (e.g. passages when no model has any)
                db.execute(_view(name, paths))
        if "runs" in files:
            pattern, _ = PATTERNS["runs"]
            db.execute(
                "CREATE OR REPLACE VIEW lineage AS SELECT "
                f"regexp_extract(file_name, '{pattern}', 1) AS dataset, "
                f"regexp_extract(file_name, '{pattern}', 2) AS system, "
                "decode(value)::JSON AS lineage "
                f"FROM parquet_kv_metadata({_files(files['runs'])}) "
                f"WHERE decode(key) = '{contracts.LINEAGE_KEY.decode()}'"
            )
