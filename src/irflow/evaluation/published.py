"""published: the user's numbers beside every published number irflow knows.

``config/reference/published.yaml`` holds published results, one entry per dataset, system and
metric: the value as published, a tolerance, the source quoted (repository, file and line, or
paper and table), and ``differs``, how the published run differs from irflow's where it does.
It is the one place a published number is written: the tests, docs/validation.md, the
database's ``published`` view, results.md and the report read it.

An irflow system matches an entry when its retriever family says it is that system
(``RetrieverFamily.published_as``): the same family and model (a local model folder names the
Hugging Face id it holds with ``models.<name>.hub_id``), and for BM25 the same scoring method,
k1 and b. Every matching entry gets a row: irflow's value, the published one and Δ. An entry
without ``differs`` is a reproduction: a Δ beyond its tolerance is reported as a miss (in the
job's log, results.md and the report). It does not fail the run: a user may mean to differ.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import yaml

from irflow.core.config import SAFE_LOADER
from irflow.core.errors import InputError
from irflow.evaluation.measures import metric_name
from irflow.evaluation.tables import markdown_rows, signed

log = logging.getLogger(__name__)

ENTRY_KEYS = {"dataset", "system", "metric", "value", "tolerance", "source", "differs"}
# A paper's table cell: the paper's text (a path under the checkout's parent folder), the
# table's number, the line the quote is and the table's column it stands in.
PAPER_KEYS = {"title", "file", "table", "line", "column", "quote", "where"}
# A metric that is a relative difference to BM25 (BEIR's "Avg. Performance vs. BM25"), which
# may be negative.
RELATIVE_SUFFIX = "_vs_bm25"
COLUMNS = [
    "dataset",
    "system",
    "metric",
    "value",
    "published",
    "delta",
    "tolerance",
    "within",
    "reproduction",
    "published_system",
    "differs",
    "source",
]


def load_published(path: str | Path) -> list[dict]:
    """The entries of a published-results file, each checked for the keys it needs; an error
    names the file, the entry and the key."""
    # libyaml's parser where PyYAML has it: the file is 20,000 lines (1.2 s against 4.8 s).
    entries = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=SAFE_LOADER) or []
    if not isinstance(entries, list):
        raise InputError(path, "a list of published results, one entry each, was expected")
    for at, entry in enumerate(entries):
        if not isinstance(entry, dict) or ENTRY_KEYS - set(entry):
            missing = sorted(ENTRY_KEYS - set(entry)) if isinstance(entry, dict) else "all"
            raise InputError(path, f"entry {at}: missing keys {missing}")
        if not isinstance(entry["system"], dict) or "family" not in entry["system"]:
            raise InputError(path, f"entry {at}: 'system' needs a 'family'", field="system")
        for key in ("value", "tolerance"):
            signed = key == "value" and entry["metric"].endswith(RELATIVE_SUFFIX)
            if not isinstance(entry[key], int | float) or (entry[key] < 0 and not signed):
                message = f"entry {at}: {key!r} must be a number >= 0, not {entry[key]!r}"
                raise InputError(path, message, field=key)
        source = entry["source"]
        if isinstance(source, dict) and source.get("kind") == "paper":
            lacking = sorted(PAPER_KEYS - set(source))
            if lacking or not isinstance(source["line"], int):
                message = f"entry {at}: a paper source needs {sorted(PAPER_KEYS)}, an int line"
                raise InputError(path, f"{message}; it lacks {lacking}", field="source")
    return entries


def matches(identity: dict, system: dict) -> bool:
    """Whether an irflow system (its ``identity``) is the published ``system``: every key they
    both name agrees, family, model and a dual encoder's query model included."""
    if identity.get("family") != system["family"]:
        return False
    if any(system.get(key) != identity.get(key) for key in ("model", "query_model")):
        return False
    settings = system.get("settings") or {}
    return all(settings[key] == value for key, value in identity.items() if key in settings)


def source_text(source: dict) -> str:
    """A source in one line: repository and file (at its commit), or paper and table."""
    if source.get("kind") == "paper":
        return f"{source.get('title')}, {source.get('where')}"
    place = source.get("url") or f"{source.get('repo')}: {source.get('file')}"
    commit = f" @ {source['commit'][:8]}" if source.get("commit") else ""
    return f"{place}{commit}"


def compare(
    summary: pd.DataFrame, entries: list[dict], identities: dict[str, dict]
) -> pd.DataFrame:
    """One row per published entry that a (dataset, system, metric) of ``summary`` matches,
    except those scored on other judgements (``judgements``)."""
    values = summary.set_index(["dataset", "system", "metric"])["value"]
    rows = []
    # An entry scored on other judgements than the dataset's (``judgements``) is no run's.
    for entry in (e for e in entries if not e.get("judgements")):
        for system, identity in identities.items():
            key = (entry["dataset"], system, entry["metric"])
            if key not in values.index or not matches(identity, entry["system"]):
                continue
            delta = float(values[key]) - entry["value"]
            rows.append(
                {
                    "dataset": entry["dataset"],
                    "system": system,
                    "metric": entry["metric"],
                    "value": float(values[key]),
                    "published": float(entry["value"]),
                    "delta": delta,
                    "tolerance": float(entry["tolerance"]),
                    "within": abs(delta) <= entry["tolerance"],
                    "reproduction": entry["differs"] is None,
                    "published_system": _system_text(entry["system"]),
                    "differs": entry["differs"] or "",
                    "source": source_text(entry["source"]),
                }
            )
    comparison = pd.DataFrame(rows, columns=COLUMNS)
    # Each number's reproductions first, then the variants, in the file's order.
    order = ["dataset", "system", "metric", "reproduction"]
    return comparison.sort_values(
        order, ascending=[True, True, True, False], kind="stable"
    ).reset_index(drop=True)


def _system_text(system: dict) -> str:
    return " ".join(str(system[key]) for key in ("family", "model", "variant") if system.get(key))


def misses(comparison: pd.DataFrame) -> pd.DataFrame:
    """The reproductions (entries without ``differs``) that miss by more than their tolerance."""
    return comparison[comparison["reproduction"] & ~comparison["within"]]


def log_misses(comparison: pd.DataFrame) -> None:
    """Say in the job's log which published values a system misses, and by how much."""
    for row in misses(comparison).itertuples():
        log.warning(
            "%s on %s: %s %.4f, published %.4f (Δ %+.4f, tolerance %.4g; %s)",
            row.system,
            row.dataset,
            row.metric,
            row.value,
            row.published,
            row.delta,
            row.tolerance,
            row.source,
        )


def verdict(row) -> str:
    """Within its tolerance or missed, each with the tolerance; or how the published run
    differs."""
    if not row.reproduction:
        return f"differs: {row.differs}"
    return f"{'within' if row.within else 'missed'} (± {row.tolerance:.4g})"


# What a row of the section is: one published value of one irflow number. Its sources (each
# publishing the same value, and saying how its run differs, if it does) are listed together.
VALUE_KEYS = [column for column in COLUMNS if column not in ("differs", "source")]
INTRO = (
    "Each published value irflow knows (config/reference/published.yaml) for a system and "
    "dataset here, in the measures of the tables above: irflow's number, the published one, "
    "Δ = irflow − published, and the verdict. A reproduction is a published run with "
    "irflow's settings: within or missed by more than the tolerance shown; the others differ "
    "as said. Sources that publish the same value share its row."
)


def shown(comparison: pd.DataFrame, metrics: list[str], depth: int | None = None) -> pd.DataFrame:
    """The section's rows: the ``metrics`` (those the tables show), one per published value
    with its sources together, the metric named as the tables name it."""
    rows = comparison[comparison["metric"].isin(metrics)]
    # The tables' order of measures within each (dataset, system), reproductions first.
    position = rows["metric"].map({metric: at for at, metric in enumerate(metrics)})
    rows = rows.assign(position=position).sort_values(
        ["dataset", "system", "position"], kind="stable"
    )
    table = (
        rows.groupby(VALUE_KEYS, sort=False)[["differs", "source"]]
        .agg(lambda texts: "; ".join(dict.fromkeys(texts)))
        .reset_index()
    )
    return pd.DataFrame(
        {
            "dataset": table["dataset"],
            "system": table["system"],
            "metric": [metric_name(metric, depth).label for metric in table["metric"]],
            "irflow": table["value"].map("{:.4f}".format),
            "published": table["published"].map("{:.4f}".format),
            "Δ": table["delta"].map(signed),
            "verdict (tolerance)": [verdict(row) for row in table.itertuples()],
            "published system": table["published_system"],
            "sources": table["source"],
        }
    )


def _left_out(comparison: pd.DataFrame, metrics: list[str]) -> str:
    """A line naming the published values of metrics the tables do not show, if any."""
    other = comparison[~comparison["metric"].isin(metrics)]
    if other.empty:
        return ""
    counts = other.groupby("metric", sort=True).size()
    listed = ", ".join(f"{metric} ({count})" for metric, count in counts.items())
    return (
        f"Published values of measures the tables do not show ({listed}; add them to "
        "report_metrics to show them here) are in results/published.parquet, the database's "
        "published view."
    )


def html(comparison: pd.DataFrame, metrics: list[str], depth: int | None = None) -> str:
    """The report's table of the same rows as results.md's section."""
    if comparison.empty:
        return ""
    left_out = _left_out(comparison, metrics)
    return (
        f"<h3>Against published results</h3><p>{INTRO}</p>"
        + shown(comparison, metrics, depth).to_html(index=False)
        + (f"<p>{left_out}</p>" if left_out else "")
    )


def markdown(comparison: pd.DataFrame, metrics: list[str], depth: int | None = None) -> str:
    """results.md's section: each number of the tables beside its published values."""
    if comparison.empty:
        return ""
    lines = ["## Against published results", "", INTRO, ""]
    lines += markdown_rows(shown(comparison, metrics, depth), ["irflow", "published", "Δ"])
    left_out = _left_out(comparison, metrics)
    return "\n".join(lines + (["", left_out] if left_out else [])) + "\n"


def reference_scores(comparison: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The published ``metric`` of each system and dataset (``system, benchmark, score``, the
    correlation's reference): a reproduction's where there is one, else the first listed."""
    rows = comparison[comparison["metric"] == metric].sort_values(
        "reproduction", ascending=False, kind="stable"
    )
    first = rows.drop_duplicates(["system", "dataset"])
    return pd.DataFrame(
        {"system": first["system"], "benchmark": first["dataset"], "score": first["published"]}
    ).reset_index(drop=True)
