"""tables: the systems x datasets tables of results.md, results/tables/ and the report.

Each report metric gets one main table, whose Average ranks the systems, and tables beside it
for what the Average leaves out.

- **The Average is over the benchmark's own datasets**, the ``datasets`` of the config, each
  once: BEIR's Table 2 ("In-domain and zero-shot performances on BEIR benchmark. All scores
  denote nDCG@10."), whose last row, "Avg. Performance vs. BM25", averages over its zero-shot
  datasets, one column each. Datasets made from them (positional variants, generated
  benchmarks, curated, quality-controlled and document-expanded copies) are not the
  benchmark's: a copy that a system does well on would otherwise lift that system's Average
  and change the ranking. Each base dataset's derived datasets of one kind get a table of
  their own, beside the base's column, named with it ("scifact: positional variants"),
  without an Average.
- **An in-domain dataset is shown, marked, and not averaged.** BEIR reports MS MARCO, on
  which its systems were trained, "but don’t include the outcome in our zero-shot
  comparison" (BEIR, shared/references/beir.txt, line 51; Table 2: "\\ddagger indicates the
  in-domain performances"). A dataset the layout names ``in_domain`` (the catalog's, or
  ``datasets.<name>.in_domain``) keeps its column, marked ``‡``, and the Average leaves it out.
- **A group counts once.** Datasets whose ``group`` is set are one column of the main table,
  the mean of its members, as BEIR does for CQADupStack: "We evaluate each StackExchange
  subforum separately and report the overall mean scores for all tasks in BEIR." The members
  are shown in a table of their own.
- **A dataset made under several seeds is one column**, the mean ± the standard deviation
  (ddof 1) over its seeds, in its base's table of derived datasets (irflow.core.seeds): the
  overview's "Report mean and standard deviation across runs" (benchmarks-and-metrics.txt,
  line 643). A system lacking a seed's value gets none, and a note says so; each seed's
  values are in the summary, with their ``seed``.
- **No Average over fewer datasets.** A system without a score on a base dataset (or on a
  member of a group) gets no Average (and no group value): a mean over other datasets is not
  comparable. A note under the table names what it lacks.

Which datasets are derived, and from which base, is data the workflow's plan passes
(irflow.workflow.plan, ``table_layout``): names are never parsed.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from irflow.core.config import register_check
from irflow.core.seeds import mean_sd_text
from irflow.evaluation.measures import metric_name

AVERAGE = "Average"
# BEIR's mark of an in-domain result (Table 2's \ddagger).
IN_DOMAIN = "‡"


def counted(count: int, noun: str) -> str:
    """ "1 dataset", "2 datasets"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class TableLayout:
    """Which tables a dataset is shown in.

    ``benchmark``: each of the benchmark's own datasets, with the group it counts in (None:
    on its own). ``derived``: each dataset made from another, with that dataset (``base``) and
    what kind of dataset it is (``kind``, words: "positional variants"). ``in_domain``: the
    benchmark's datasets that its systems were trained on, shown but not averaged. ``seeds``:
    each derived dataset made under one of several seeds, with the name they are shown under
    (``of``) and its ``seed`` (irflow.core.seeds.seed_groups).
    """

    benchmark: dict[str, str | None]
    derived: dict[str, dict[str, str]] = field(default_factory=dict)
    in_domain: list[str] = field(default_factory=list)
    seeds: dict[str, dict] = field(default_factory=dict)

    def seed_of(self) -> dict[str, int]:
        """The seed of each dataset made under one of several."""
        return {name: made["seed"] for name, made in self.seeds.items()}

    def seed_sets(self) -> dict[str, list[str]]:
        """Each name that several seeds are shown under, with its datasets in seed order."""
        sets: dict[str, list[str]] = {}
        for name, made in sorted(self.seeds.items(), key=lambda item: item[1]["seed"]):
            sets.setdefault(made["of"], []).append(name)
        return sets

    def groups(self) -> dict[str, list[str]]:
        """Each group's member datasets, in name order."""
        members: dict[str, list[str]] = {}
        for dataset, group in sorted(self.benchmark.items()):
            if group is not None:
                members.setdefault(group, []).append(dataset)
        return members

    def columns(self) -> list[str]:
        """The main table's columns before the Average: ungrouped datasets and groups."""
        single = [dataset for dataset, group in self.benchmark.items() if group is None]
        return sorted(single + list(self.groups()))

    def in_domain_columns(self) -> list[str]:
        """The main table's columns of in-domain datasets (a group: all its members)."""
        groups = self.groups()
        return [
            column
            for column in self.columns()
            if set(groups.get(column, [column])) <= set(self.in_domain)
        ]

    def derived_sets(self) -> dict[tuple[str, str], list[str]]:
        """The derived datasets by (base, kind), each list in name order: the bases in name
        order, each one's kinds in the order ``derived`` first names them."""
        sets: dict[tuple[str, str], list[str]] = {}
        for name, made in self.derived.items():
            sets.setdefault((made["base"], made["kind"]), []).append(name)
        ordered = sorted(sets.items(), key=lambda item: item[0][0])
        return {key: sorted(names) for key, names in ordered}


@dataclass(frozen=True)
class ResultTable:
    """One table: ``title`` (the metric, for the main table), ``name`` (its CSV file's stem),
    ``frame`` (systems x columns) and ``notes`` (what a reader must know, e.g. why an Average
    is blank)."""

    title: str
    name: str
    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def metric_values(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Systems x datasets of one metric's values."""
    selected = summary[summary["metric"] == metric]
    if selected.empty:
        known = ", ".join(sorted(summary["metric"].unique()))
        raise ValueError(f"metric {metric!r} was not computed; computed metrics: {known}")
    return selected.pivot(index="system", columns="dataset", values="value")


def _complete_mean(values: pd.DataFrame) -> pd.Series:
    """Each row's mean, or NaN where any value is missing: no mean over fewer columns."""
    return values.mean(axis=1).where(values.notna().all(axis=1))


def _missing(values: pd.DataFrame, system: str) -> list[str]:
    return [column for column in values.columns if pd.isna(values.at[system, column])]


def benchmark_columns(values: pd.DataFrame, layout: TableLayout) -> pd.DataFrame:
    """Systems x the main table's columns: each dataset of the benchmark on its own, and
    each group as its members' mean (none where a member lacks a value)."""
    own = values.reindex(columns=sorted(layout.benchmark))
    table = pd.DataFrame(index=values.index)
    groups = layout.groups()
    for column in layout.columns():
        table[column] = _complete_mean(own[groups[column]]) if column in groups else own[column]
    return table


def benchmark_table(values: pd.DataFrame, layout: TableLayout, metric: str) -> ResultTable:
    """The main table: the benchmark's own datasets (a group as one column, its members'
    mean) and their Average, best first, an in-domain dataset's column marked and left out of
    it; a system lacking one has none, and a note says why."""
    own = values.reindex(columns=sorted(layout.benchmark))
    table = benchmark_columns(values, layout)
    groups = layout.groups()
    in_domain = layout.in_domain_columns()
    table[AVERAGE] = _complete_mean(table.drop(columns=in_domain))
    table = table.sort_index().sort_values(AVERAGE, ascending=False, kind="stable")
    table = table.rename(columns={column: f"{column} {IN_DOMAIN}" for column in in_domain})
    notes = [
        f"{group}: the mean of its {counted(len(members), 'dataset')} ({', '.join(members)}), "
        "counted once in the Average."
        for group, members in groups.items()
    ]
    notes += [
        f"{IN_DOMAIN} {column}: in-domain, not in the Average (datasets.<name>.in_domain)."
        for column in in_domain
    ]
    notes += [
        f"{system}: no Average, as it has no {metric} on {', '.join(_missing(own, system))}."
        for system in table.index[table[AVERAGE].isna()]
    ]
    if layout.derived:
        notes.append(
            f"The Average is over the {counted(len(layout.columns()), 'dataset')} of the "
            "benchmark; datasets made from them are in their own tables, not in the Average."
        )
    return ResultTable(metric, metric, table, notes)


def _table_of(
    values: pd.DataFrame, columns: list[str], order: pd.Index, title: str, name: str
) -> ResultTable:
    """``columns`` of ``values`` for the systems that have any of them, in ``order``."""
    frame = values.reindex(columns=columns).dropna(how="all").rename_axis(columns=None)
    return ResultTable(title, name, frame.reindex([s for s in order if s in frame.index]))


def over_seeds(table: ResultTable, layout: TableLayout, metric: str) -> ResultTable:
    """``table`` with the datasets of each seed set (``layout.seed_sets``) as one column, where
    the first seed's was: "<name> (<n> seeds)", each cell the mean ± the standard deviation of a
    system's values over the seeds (irflow.core.seeds.mean_sd_text), blank where one lacks."""
    frame = table.frame
    for name, members in layout.seed_sets().items():
        if name not in frame.columns:
            continue
        seeds = [layout.seeds[member]["seed"] for member in members]
        values = frame.reindex(columns=members)
        cells = [
            "" if row.isna().any() else mean_sd_text(row.tolist()) for _, row in values.iterrows()
        ]
        column = f"{name} ({len(members)} seeds)"
        frame.insert(frame.columns.get_loc(name), column, pd.Series(cells, index=frame.index))
        frame = frame.drop(columns=[member for member in members if member in frame.columns])
        table.notes.append(
            f"{column}: {metric}'s mean ± standard deviation (ddof 1) over seeds "
            f"{', '.join(map(str, seeds))} ({', '.join(members)}); each seed's value is in "
            "summary.parquet, with its seed."
        )
        lacking = [system for system, cell in zip(frame.index, cells) if not cell]
        if lacking:
            table.notes.append(f"{column}: none for {', '.join(lacking)}, lacking a seed's value.")
    return ResultTable(table.title, table.name, frame, table.notes)


def missing_notes(datasets: list[str], missing: dict[tuple[str, str], str]) -> list[str]:
    """What a partial run lacks on ``datasets``: ``missing`` holds why each (dataset, system)
    has no value; one note per dataset and reason."""
    systems: dict[tuple[str, str], list[str]] = {}
    for (dataset, system), reason in sorted(missing.items()):
        if dataset in datasets:
            systems.setdefault((dataset, reason), []).append(system)
    return [
        f"{dataset}: missing for {', '.join(names)}: {reason}"
        for (dataset, reason), names in systems.items()
    ]


def result_tables(
    summary: pd.DataFrame,
    metric: str,
    layout: TableLayout,
    missing: dict[tuple[str, str], str] | None = None,
) -> list[ResultTable]:
    """One metric's tables: the main table with its Average, then each group's members (with
    the group's mean), then the derived datasets of each base and kind beside the base. With
    ``missing`` (a partial run's (dataset, system) pairs without a score, and why), a system
    missing everywhere still has its row, and each table notes what it lacks and why."""
    values = metric_values(summary, metric)
    if missing:
        values = values.reindex(values.index.union(sorted({s for _, s in missing})))
    unknown = sorted(set(values.columns) - set(layout.benchmark) - set(layout.derived))
    if unknown:
        raise ValueError(
            f"datasets {', '.join(unknown)} are neither the benchmark's datasets nor derived "
            "from one: the tables cannot place them"
        )
    main = benchmark_table(values, layout, metric)
    tables = [(main, sorted(layout.benchmark))]
    for group, members in layout.groups().items():
        table = _table_of(values, members, main.frame.index, f"{group}: its datasets", group)
        table.frame[group] = main.frame[group]
        tables.append((table, members))
    for (base, kind), names in layout.derived_sets().items():
        title = f"{base}: {kind}"
        shown = [base, *names]
        table = _table_of(values, shown, main.frame.index, title, f"{base}.{kind}")
        tables.append((over_seeds(table, layout, metric), shown))
    for table, datasets in tables:
        table.notes.extend(missing_notes(datasets, missing or {}))
    return [table for table, _ in tables]


def signed(value: float) -> str:
    """A difference to 4 decimals with its sign, and no "-0.0000" for a rounding error."""
    return f"{round(value, 4) + 0.0:+.4f}"


def _cell(value) -> str:
    """A value to 4 decimals; text (a mean ± sd over seeds) as it is."""
    return value if isinstance(value, str) else "" if pd.isna(value) else f"{value:.4f}"


def table_markdown(table: ResultTable, heading: str) -> list[str]:
    """One table's lines in results.md, under ``heading`` (its title), with its notes."""
    header = ["system", *table.frame.columns]
    parts = [
        heading,
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * len(table.frame.columns)) + "|",
    ]
    for system, row in table.frame.iterrows():
        parts.append("| " + " | ".join([system, *map(_cell, row)]) + " |")
    return parts + [""] + [f"- {note}" for note in table.notes] + ([""] if table.notes else [])


def markdown_rows(frame: pd.DataFrame, numbers: list[str]) -> list[str]:
    """A table of text cells in Markdown, the ``numbers`` columns right-aligned."""
    align = "|".join("---:" if column in numbers else "---" for column in frame.columns)
    return [
        "| " + " | ".join(frame.columns) + " |",
        f"|{align}|",
        *("| " + " | ".join(row) + " |" for row in frame.itertuples(index=False)),
    ]


def legend(layout: TableLayout) -> str:
    """What every table's cells and Average are, as results.md and the report say it first."""
    columns = layout.columns()
    text = (
        "Each table is one measure, named as a paper prints it with trec_eval's id beside it: "
        "systems × datasets, each cell the measure's mean over the dataset's judged queries. "
        f"The Average is the mean over the benchmark's {counted(len(columns), 'dataset')} "
        f"({', '.join(columns)}), each counted once"
    )
    if layout.groups():
        text += " (a group of datasets as one, the mean of its members)"
    if layout.derived:
        text += "; the datasets made from them are in tables of their own, without an Average"
    return text + "; a system lacking one of them has none."


def metric_heading(metric: str, depth: int | None) -> tuple[str, str]:
    """A main table's heading (its metric's name, the id beside it) and the line under it,
    what the metric means (irflow.evaluation.measures)."""
    name = metric_name(metric, depth)
    return name.label, f"{name.title}: {name.meaning}."


def markdown(
    tables: dict[str, list[ResultTable]],
    layout: TableLayout,
    banner: str = "",
    depth: int | None = None,
) -> str:
    """results.md: ``banner`` (what a reader must know first), the ``layout``'s legend, then
    per metric its main table, under its name and what it means (``depth``: every run's, for
    a measure of the whole ranking), and the others under it, each with its notes."""
    parts = ["# irflow results", ""] + ([banner, ""] if banner else [])
    parts += [legend(layout), ""]
    for metric, metric_tables in tables.items():
        title, meaning = metric_heading(metric, depth)
        for i, table in enumerate(metric_tables):
            parts += table_markdown(
                table, f"## {title}\n\n{meaning}" if i == 0 else f"### {table.title}"
            )
    return "\n".join(parts)


def html_tables(
    tables: dict[str, list[ResultTable]], layout: TableLayout, depth: int | None = None
) -> str:
    """The report's results table: the same legend, names, tables and notes as results.md."""
    parts = [f"<p>{html.escape(legend(layout))}</p>"]
    for metric, metric_tables in tables.items():
        title, meaning = metric_heading(metric, depth)
        for i, table in enumerate(metric_tables):
            if i == 0:
                parts.append(f"<h3>{html.escape(title)}</h3><p>{html.escape(meaning)}</p>")
            else:
                parts.append(f"<h4>{html.escape(table.title)}</h4>")
            parts.append(table.frame.to_html(float_format="{:.4f}".format, na_rep=""))
            if table.notes:
                items = "".join(f"<li>{html.escape(note)}</li>" for note in table.notes)
                parts.append(f"<ul>{items}</ul>")
    return "".join(parts)


def csv_path(folder: Path, metric: str, table: ResultTable) -> Path:
    """tables/<metric>.csv for the main table; tables/<metric>/<name>.csv for the others."""
    if table.name == metric:
        return folder / f"{metric}.csv"
    return folder / metric / (re.sub(r"[^A-Za-z0-9._@-]+", "_", table.name) + ".csv")


def write_tables(
    summary: pd.DataFrame,
    metrics: list[str],
    layout: TableLayout,
    markdown_path: Path,
    csv_dir: Path,
    *,
    appendix: str = "",
    missing: dict[tuple[str, str], str] | None = None,
    depth: int | None = None,
) -> None:
    """results.md (with ``appendix`` after the tables; ``depth``: every run's, top_k, for the
    names of whole-ranking measures) and the tables' CSV files. With
    ``missing``, the tables of a partial run (``result_tables``): results.md opens by saying
    so, and tables/missing.csv lists each missing (dataset, system) and why."""
    tables = {metric: result_tables(summary, metric, layout, missing) for metric in metrics}
    for metric, metric_tables in tables.items():
        for table in metric_tables:
            path = csv_path(csv_dir, metric, table)
            path.parent.mkdir(parents=True, exist_ok=True)
            table.frame.to_csv(path, float_format="%.6f")
    banner = ""
    if missing:
        banner = partial_banner(summary, missing)
        rows = [(dataset, system, reason) for (dataset, system), reason in sorted(missing.items())]
        csv_dir.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows, columns=["dataset", "system", "reason"]).to_csv(
            csv_dir / "missing.csv", index=False
        )
    text = markdown(tables, layout, banner, depth)
    text += f"\n{appendix}" if appendix else ""
    markdown_path.write_text(text, encoding="utf-8")


def partial_banner(summary: pd.DataFrame, missing: dict[tuple[str, str], str]) -> str:
    """What a partial run's results.md says first: that it is one, and what it lacks."""
    scored = len(summary[["dataset", "system"]].drop_duplicates())
    return (
        "**Partial results.** The run failed before it scored every dataset. These tables "
        f"hold the (dataset, system) pairs that finished ({scored}); the missing ones "
        f"({len(missing)}) are named under each table that lacks them, with why. The run that "
        "scores them all makes the complete tables (results/results.md) and removes this folder."
    )


@register_check
def _in_domain_problems(config: dict) -> list[str]:
    """A group is one column: its members are in-domain all or none."""
    members: dict[str, list[str]] = {}
    for name, spec in sorted(config["datasets"].items()):
        if spec.get("group") is not None:
            members.setdefault(spec["group"], []).append(name)
    return [
        f"config key 'datasets.{names[0]}.in_domain': the group {group!r} is one column of the "
        f"tables, so its members ({', '.join(names)}) are in-domain all or none"
        for group, names in members.items()
        if len({bool(config["datasets"][name].get("in_domain")) for name in names}) > 1
    ]


@register_check
def _group_problems(config: dict) -> list[str]:
    """A group is a column of the main table beside the datasets: its name must not be one."""
    return [
        f"config key 'datasets.{name}.group': {spec['group']!r} is the name of a dataset; a "
        "group needs a name of its own"
        for name, spec in sorted(config["datasets"].items())
        if spec.get("group") in config["datasets"]
    ]
