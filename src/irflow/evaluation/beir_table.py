"""beir_table: the user's run in the shape of BEIR's Table 2, irflow's value beside the paper's.

BEIR's Table 2 ("In-domain and zero-shot performances on beir benchmark. All scores denote
nDCG@10", BEIR, shared/references/beir.txt, line 140) has the datasets down and its ten systems
across, and a last row, "Avg. Performance vs. BM25". config/reference/published.yaml holds every
cell (source ``table: 2``). For a run with a dataset of the table and a system that is one of
its columns (irflow.evaluation.published.matches: config/reproduce/beir-table2.yaml's, and any
config's BM25 with Anserini's k1 0.9 and b 0.4), results.md and the report show that layout:
each cell "irflow / paper", a column's header naming the irflow system it is, an in-domain
dataset marked ‡. The docT5query column is BM25 on the dataset's document-expanded copy
(``expand``, as config/reproduce/beir-table2.yaml makes it).

**The "vs. BM25" row.** The paper does not say how it computes it, and no formula tried on its
own cells gives its printed row within 0.5 points (docs/metrics.md, "BEIR's Avg. Performance
vs. BM25"); the closest is the relative difference of the means over its 18 zero-shot datasets,
(mean(system) − mean(BM25)) / mean(BM25), within 3.7 points. irflow computes that one over
the run's zero-shot datasets (not in-domain) where both have a value, for irflow's values and
for the paper's cells of the same datasets, and shows the printed row beneath.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import pandas as pd

from irflow.evaluation.published import RELATIVE_SUFFIX, matches
from irflow.evaluation.tables import IN_DOMAIN, TableLayout, benchmark_columns, metric_values

TABLE = 2
METRIC = "ndcg_cut_10"
# A column whose system is another column's on the datasets' copies of a kind: docT5query is
# The paper's baseline column: Anserini's multifield BM25 (line 104).
BASELINE = "BM25"
# BM25 on the documents expanded with generated queries (BEIR §4, line 106): the BM25 column's
# system on the expanded copies.
EXPANDED = {"doct5query": (BASELINE, "document-expanded copies")}
RELATIVE_ROW = "vs. BM25 (these datasets)"
PRINTED_ROW = "vs. BM25 (printed)"


@dataclass(frozen=True)
class Table2View:
    """``frame``: BEIR's datasets of the run (and the two vs. BM25 rows) x BEIR's systems,
    each cell text; ``notes``: what each column is in the run and what the rows are over."""

    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def relative_to_bm25(system: pd.Series, bm25: pd.Series) -> float:
    """(mean(system) − mean(BM25)) / mean(BM25), over the datasets both have."""
    both = system.notna() & bm25.notna()
    if not both.any():
        return float("nan")
    return (system[both].mean() - bm25[both].mean()) / bm25[both].mean()


def _cell(irflow: float, paper: float, percent: bool = False) -> str:
    shown = "{:+.1%}" if percent else "{:.4f}"
    mine = "–" if pd.isna(irflow) else shown.format(irflow)
    theirs = "–" if pd.isna(paper) else ("{:+.1%}" if percent else "{:g}").format(paper)
    return f"{mine} / {theirs}"


def _matched(system: dict, identities: dict[str, dict]) -> list[str]:
    return [name for name, identity in sorted(identities.items()) if matches(identity, system)]


def view(
    summary: pd.DataFrame, entries: list[dict], identities: dict[str, dict], layout: TableLayout
) -> Table2View | None:
    """The run as BEIR's Table 2, or None where it has none of its datasets or systems."""
    cells = [
        e
        for e in entries
        if e["source"].get("kind") == "paper" and e["source"].get("table") == TABLE
    ]
    scores = [e for e in cells if e["metric"] == METRIC]
    printed = {
        e["source"]["column"]: e["value"] for e in cells if e["metric"].endswith(RELATIVE_SUFFIX)
    }
    system_of = {e["source"]["column"]: e["system"] for e in scores}
    paper = pd.DataFrame(
        [(e["dataset"], e["source"]["column"], e["value"]) for e in scores],
        columns=["dataset", "column", "value"],
    ).pivot(index="dataset", columns="column", values="value")
    datasets = [d for d in dict.fromkeys(e["dataset"] for e in scores) if d in layout.columns()]
    matched = {column: _matched(system, identities) for column, system in system_of.items()}
    if not datasets or METRIC not in set(summary["metric"]):
        return None
    values = metric_values(summary, METRIC)
    own = benchmark_columns(values, layout)
    irflow = pd.DataFrame(index=datasets, columns=list(system_of), dtype=float)
    for column, systems in matched.items():
        if systems:
            irflow[column] = own.loc[systems[0], datasets] if systems[0] in own.index else None
    notes = []
    for column, (source, kind) in _expanded_columns(system_of).items():
        copies = {
            made["base"]: name for name, made in layout.derived.items() if made["kind"] == kind
        }
        if copies and matched.get(source) and matched[source][0] in values.index:
            found = values.loc[matched[source][0]]
            irflow[column] = [found.get(copies.get(d), float("nan")) for d in datasets]
            matched[column] = [f"{matched[source][0]} on the {kind}"]
    if not any(irflow[column].notna().any() for column in irflow):
        return None
    bm25 = BASELINE
    zero_shot = [d for d in datasets if d not in layout.in_domain_columns()]
    rows = {
        (f"{d} {IN_DOMAIN}" if d not in zero_shot else d): [
            _cell(irflow.at[d, c], paper.at[d, c]) for c in system_of
        ]
        for d in datasets
    }
    rows[RELATIVE_ROW] = [
        ""
        if c == bm25
        else _cell(
            relative_to_bm25(irflow.loc[zero_shot, c], irflow.loc[zero_shot, bm25]),
            relative_to_bm25(paper.loc[zero_shot, c], paper.loc[zero_shot, bm25]),
            percent=True,
        )
        for c in system_of
    ]
    rows[PRINTED_ROW] = ["" if c == bm25 else f"{printed[c]:+.1%}" for c in system_of]
    header = [f"{c} ({matched[c][0]})" if matched[c] else c for c in system_of]
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=header)
    notes += [
        f"{c}: also {', '.join(matched[c][1:])}, not shown."
        for c in system_of
        if len(matched[c]) > 1
    ]
    notes += [
        f"{RELATIVE_ROW}: (mean(system) − mean(BM25)) / mean(BM25) over the {len(zero_shot)} "
        f"zero-shot datasets here ({', '.join(zero_shot)}), irflow's / the paper's cells; "
        "the printed row is over BEIR's 18 (docs/metrics.md says how it was checked).",
    ]
    return Table2View(frame, notes)


def _expanded_columns(system_of: dict[str, dict]) -> dict[str, tuple[str, str]]:
    """Each column that is another column's system on copies of a kind: (that column, kind)."""
    return {
        column: EXPANDED[system["variant"]]
        for column, system in system_of.items()
        if system.get("variant") in EXPANDED
    }


def markdown(table: Table2View | None) -> str:
    """results.md's section: BEIR's Table 2 with irflow's value beside the paper's."""
    if table is None:
        return ""
    header = ["dataset", *table.frame.columns]
    lines = [
        "## BEIR's Table 2 (nDCG@10): irflow / paper",
        "",
        "Each cell is irflow's value / BEIR's (Thakur et al., 2021, Table 2); a column names "
        "the irflow system that is BEIR's (– where none is).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * len(table.frame.columns)) + "|",
    ]
    lines += [f"| {name} | " + " | ".join(row) + " |" for name, row in table.frame.iterrows()]
    return "\n".join([*lines, "", *[f"- {note}" for note in table.notes], ""]) + "\n"


def html_table(table: Table2View | None) -> str:
    """The report's same table."""
    if table is None:
        return ""
    items = "".join(f"<li>{html.escape(note)}</li>" for note in table.notes)
    return (
        "<h3>BEIR's Table 2 (nDCG@10): irflow / paper</h3>"
        + table.frame.to_html()
        + (f"<ul>{items}</ul>" if items else "")
    )
