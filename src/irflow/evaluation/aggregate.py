"""aggregate: per-query scores -> the summary, and one DuckDB database over every result.

The database holds views, not copies: it stays small and always shows the Parquet files the
workflow wrote. The views name those files by their absolute paths, so the database shows its
own experiment's files from whatever folder it is opened in (DuckDB resolves a relative path
against the folder of the process that reads it, not of the database: with relative paths, a
database opened from another experiment's folder showed that experiment's rows). The tables of
results.md are irflow.evaluation.tables.

A moved or copied results folder keeps reading the files where they were made. Each view
therefore checks, as it is read, that the experiment record there (results/experiment.json,
irflow.workflow.experiment) is still the one the database was built with, and otherwise raises
an error that says so; where the files are gone, DuckDB's error names the missing file. Either
way it never shows another experiment's data. ``snakemake --forcerun database`` rebuilds it
where the folder now lies.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
from pytrec_eval import compute_aggregated_measure

from irflow.core import contracts
from irflow.core.atomic import atomic_path
from irflow.core.verify import verify_files


def collect_per_query(scores: list[tuple[str, str, Path]]) -> pd.DataFrame:
    """All per-query values in one table; ``scores`` lists (dataset, system, Parquet path)."""
    frames = [
        contracts.read_frame(path).assign(dataset=dataset, system=system)
        for dataset, system, path in scores
    ]
    return pd.concat(frames, ignore_index=True)[
        ["dataset", "system", "query_id", "metric", "value"]
    ]


def build_summary(per_query: pd.DataFrame, seeds: dict[str, int] | None = None) -> pd.DataFrame:
    """Each metric over the judged queries, aggregated as trec_eval aggregates it: the mean,
    but the sum for ``num_*`` counts and the geometric mean for ``gm_*`` (whose per-query
    values are logs). Quality only: cost measurements stay in the cost table. ``seed``: the
    seed each dataset of ``seeds`` was made under (one of several, irflow.core.seeds), null
    for the others."""
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
    summary = pd.DataFrame(rows, columns=["dataset", "system", "metric", "value", "queries"])
    return summary.assign(seed=summary["dataset"].map(seeds or {}).astype("Int64"))


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _files(paths: list) -> str:
    return "[" + ", ".join(_sql_string(str(Path(p).absolute())) for p in paths) + "]"


def experiment_guard(record: Path, fingerprint: str) -> str:
    """A WHERE clause that passes while ``record`` holds the experiment of ``fingerprint``, and
    raises an error naming both otherwise (read once per query: the record is a small file)."""
    record = Path(record).absolute()
    stale = (
        f"the views of this database read the files of the experiment in {record.parent}/ "
        f"(fingerprint {fingerprint}), but {record} now records another experiment "
        "(fingerprint ' || coalesce(recorded, 'none') || '). Open the database of the "
        "experiment you mean, or rebuild this one from its folder (snakemake --forcerun "
        "database with that folder's config)."
    )
    return (
        f"(SELECT CASE WHEN recorded = {_sql_string(fingerprint)} THEN true "
        f"ELSE error({_sql_string(stale)}) END "
        f"FROM (SELECT max(content::JSON->>'fingerprint') AS recorded "
        f"FROM read_text({_sql_string(str(record))})))"
    )


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


# Each tested pair once (the significance view has it once per family, with one sign: the
# baseline is system_a wherever a pair holds it), with each family's Holm p side by side.
PAIRS_VIEW = """
CREATE OR REPLACE VIEW significance_pairs AS
SELECT dataset, metric, system_a, system_b, any_value(queries) AS queries,
       any_value(mean_a) AS mean_a, any_value(mean_b) AS mean_b,
       any_value(b_minus_a) AS b_minus_a, any_value(effect_size) AS effect_size,
       any_value(randomization_p_holm) FILTER (family = 'all pairs') AS p_holm_all_pairs,
       any_value(significant) FILTER (family = 'all pairs') AS significant_all_pairs,
       any_value(randomization_p_holm) FILTER (family LIKE 'against %') AS p_holm_against_baseline,
       any_value(significant) FILTER (family LIKE 'against %') AS significant_against_baseline
FROM significance GROUP BY dataset, metric, system_a, system_b
"""


def _view(name: str, paths: list, guard: str) -> str:
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
    return f"CREATE OR REPLACE VIEW {name} AS {source} WHERE {guard}"


def build_database(
    db_path: Path,
    files: dict[str, list],
    experiment: dict | None = None,
    *,
    record: Path | None = None,
) -> None:
    """(Re)create the DuckDB file with one view per name in ``files`` (a contract's files, a
    table's file, or the JSON manifests), ``lineage``, how each run was made,
    ``significance_pairs``, each tested pair once (``PAIRS_VIEW``), and the
    ``experiment`` table: the config files and fingerprint of the results
    (irflow.workflow.experiment). With ``record``, the file that records ``experiment``, every
    view checks that it still does (``experiment_guard``). A file that does not read back
    whole stops the build, named (irflow.core.verify.DamagedFilesError)."""
    if record is not None and experiment is None:
        raise ValueError(f"a database checked against {record} needs the experiment it records")
    guard = "true" if record is None else experiment_guard(record, experiment["fingerprint"])
    # DuckDB's views verify no checksum and a query reads a row or a file, not all: every file
    # the views read is read back whole first (irflow.core.verify).
    verify_files(path for paths in files.values() for path in paths)
    # Named by the process: another build of the same results (a rerun beside a run still
    # going) must not delete or open this one's.
    with atomic_path(db_path) as tmp:
        try:
            views = _build(tmp, files, experiment, guard)
            check_database(tmp, views, has_experiment=experiment is not None)
        finally:
            # DuckDB's write-ahead log, left beside a database whose checkpoint failed.
            tmp.with_name(tmp.name + ".wal").unlink(missing_ok=True)


def check_database(path: Path, views: list[str], *, has_experiment: bool) -> None:
    """Raise unless the database at ``path`` holds ``views`` (and the experiment table), each
    answering a query: it replaces the old database only then. DuckDB's own checkpoint on close
    fails without raising on a full disk, which left a database of no view that the workflow
    took for done."""
    with duckdb.connect(str(path), read_only=True) as db:
        found = {row[0] for row in db.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        tables = {row[0] for row in db.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        missing = sorted(set(views) - found) + (
            ["experiment"] if has_experiment and "experiment" not in tables else []
        )
        if missing:
            raise OSError(
                f"{path}: the database was not written whole (missing {', '.join(missing)}); "
                "is the disk full? The previous database is kept."
            )
        for view in views:
            db.execute(f"SELECT 1 FROM {view} LIMIT 1").fetchall()


def _build(path: Path, files: dict[str, list], experiment: dict | None, guard: str) -> list[str]:
    """Write the database; the names of its views."""
    views = [name for name, paths in files.items() if paths]
    with duckdb.connect(str(path)) as db:
        if experiment is not None:
            db.execute(
                "CREATE TABLE experiment AS SELECT $config_files::VARCHAR[] AS config_files, "
                "$fingerprint AS fingerprint",
                experiment,
            )
        for name, paths in files.items():
            if paths:  # DuckDB cannot read no files (e.g. passages when no model has any)
                db.execute(_view(name, paths, guard))
        if "runs" in files:
            pattern, _ = PATTERNS["runs"]
            db.execute(
                "CREATE OR REPLACE VIEW lineage AS SELECT "
                f"regexp_extract(file_name, '{pattern}', 1) AS dataset, "
                f"regexp_extract(file_name, '{pattern}', 2) AS system, "
                "decode(value)::JSON AS lineage "
                f"FROM parquet_kv_metadata({_files(files['runs'])}) "
                f"WHERE decode(key) = '{contracts.LINEAGE_KEY.decode()}' AND {guard}"
            )
            views.append("lineage")
        if files.get("significance"):
            db.execute(PAIRS_VIEW)
            views.append("significance_pairs")
        # Raises where the disk is full: the checkpoint DuckDB makes on close does not.
        db.execute("CHECKPOINT")
    return views
