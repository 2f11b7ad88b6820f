"""BEIR's Table 2 in its own shape beside the user's run (irflow.evaluation.beir_table), and the
finding that no formula over the paper's cells gives its printed "vs. BM25" row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, SCHEMA

from irflow.evaluation.beir_table import PRINTED_ROW, RELATIVE_ROW, relative_to_bm25, view
from irflow.evaluation.published import load_published
from irflow.evaluation.results import ResultFiles, write_results
from irflow.evaluation.tables import TableLayout
from irflow.workflow.config import expand_config, validate_config
from irflow.workflow.run_inputs import Plan

ENTRIES = load_published(REPO / "config" / "reference" / "published.yaml")
TABLE2 = [e for e in ENTRIES if e["source"].get("table") == 2]


def paper(dataset: str, column: str) -> float:
    [value] = [
        e["value"]
        for e in TABLE2
        if (e["dataset"], e["source"]["column"], e["metric"]) == (dataset, column, "ndcg_cut_10")
    ]
    return value


def table2_plan() -> Plan:
    """config/reproduce/beir-table2.yaml, with MS MARCO (in-domain by the catalog) added."""
    config = yaml.safe_load((REPO / "config" / "reproduce" / "beir-table2.yaml").read_text())
    config["datasets"]["msmarco"] = {"source": {"type": "beir", "name": "msmarco"}}
    return Plan(validate_config(expand_config(config), SCHEMA), REPO)


def test_results_md_shows_the_run_as_beirs_table_2(tmp_path):
    """config/reproduce/beir-table2.yaml's run: datasets down, BEIR's systems across, each
    cell irflow / paper; docT5query is BM25 on the expanded copy; MS MARCO is marked ‡ and
    left out of the vs. BM25 row, which is the relative difference of the means for irflow's
    values and the paper's cells alike, with the printed row beneath."""
    plan = table2_plan()
    scores = []
    value = {}
    for at, (dataset, system) in enumerate(plan.pairs):
        value[dataset, system] = round(0.2 + 0.01 * at, 4)
        path = tmp_path / f"{at}.parquet"
        frame = {"query_id": ["q"], "metric": ["ndcg_cut_10"], "value": [value[dataset, system]]}
        pd.DataFrame(frame).to_parquet(path)
        scores.append((dataset, system, path))
    files = ResultFiles.in_folder(tmp_path / "results")
    files.tables.mkdir(parents=True)
    layout = TableLayout(**plan.table_layout)
    write_results(
        scores,
        REPO / "config" / "reference" / "published.yaml",
        files,
        ["ndcg_cut_10"],
        layout,
        plan.published_identities,
    )
    text = files.markdown.read_text(encoding="utf-8")
    section = text.split("## BEIR's Table 2 (nDCG@10): irflow / paper", 1)[1]
    assert section.index("## Against published results") > 0  # the published section follows
    rows = {
        line.split(" | ")[0][2:]: line.strip("| ").split(" | ")[1:]
        for line in section.split("\n## ")[0].splitlines()
        if line.startswith("| ") and not line.startswith("| dataset")
    }
    header = next(line for line in section.splitlines() if line.startswith("| dataset"))
    columns = header.strip("| ").split(" | ")[1:]
    assert columns[:4] == [
        "BM25 (bm25)",
        "DeepCT",
        "SPARTA",
        "docT5query (bm25 on the document-expanded copies)",
    ]
    assert columns[6:] == ["TAS-B (tas-b)", "GenQ", "ColBERT", "BM25+CE (bm25+ce-minilm@100)"]
    assert list(rows) == ["msmarco ‡", "nfcorpus", "arguana", "scifact", RELATIVE_ROW, PRINTED_ROW]
    at = {column.split(" (")[0]: i for i, column in enumerate(columns)}
    scifact = rows["scifact"]
    assert scifact[at["BM25"]] == f"{value['scifact', 'bm25']:.4f} / {paper('scifact', 'BM25'):g}"
    expanded = value["scifact-doct5query", "bm25"]
    assert scifact[at["docT5query"]] == f"{expanded:.4f} / {paper('scifact', 'docT5query'):g}"
    assert scifact[at["DeepCT"]] == f"– / {paper('scifact', 'DeepCT'):g}"
    zero_shot = ["nfcorpus", "arguana", "scifact"]

    def relative(of):
        return relative_to_bm25(
            pd.Series([of(d, "TAS-B") for d in zero_shot]),
            pd.Series([of(d, "BM25") for d in zero_shot]),
        )

    mine = relative(lambda d, c: value[d, {"TAS-B": "tas-b", "BM25": "bm25"}[c]])
    assert rows[RELATIVE_ROW][at["TAS-B"]] == f"{mine:+.1%} / {relative(paper):+.1%}"
    [printed] = [
        e["value"]
        for e in TABLE2
        if e["metric"] == "ndcg_cut_10_vs_bm25" and e["source"]["column"] == "TAS-B"
    ]
    assert rows[PRINTED_ROW][at["TAS-B"]] == f"{printed:+.1%}"
    # With MS MARCO in the row, TAS-B's paper value would differ: it is left out.
    with_msmarco = relative_to_bm25(
        pd.Series([paper(d, "TAS-B") for d in ["msmarco", *zero_shot]]),
        pd.Series([paper(d, "BM25") for d in ["msmarco", *zero_shot]]),
    )
    assert f"{with_msmarco:+.1%}" != f"{relative(paper):+.1%}"


def test_a_run_with_no_system_of_beirs_has_no_table_2_view(tmp_path):
    """A config whose BM25 is not Anserini's multifield (bm25s, even with Anserini's k1 and b)
    matches no column: no section; Anserini's multifield BM25 is BM25's column alone."""
    config = {
        "datasets": {"scifact": {"source": {"type": "beir", "name": "scifact"}}},
        "retrievers": {"bm25": {"type": "bm25", "method": "lucene", "k1": 0.9, "b": 0.4}},
    }
    plan = Plan(validate_config(expand_config(config), SCHEMA), REPO)
    path = tmp_path / "s.parquet"
    pd.DataFrame({"query_id": ["q"], "metric": ["ndcg_cut_10"], "value": [0.5]}).to_parquet(path)
    files = ResultFiles.in_folder(tmp_path / "results")
    files.tables.mkdir(parents=True)
    layout = TableLayout(**plan.table_layout)
    write_results(
        [("scifact", "bm25", path)],
        REPO / "config" / "reference" / "published.yaml",
        files,
        ["ndcg_cut_10"],
        layout,
        plan.published_identities,
    )
    assert "BEIR's Table 2" not in files.markdown.read_text(encoding="utf-8")
    # Anserini's multifield BM25 is BEIR's; without expanded copies docT5query is none.
    config["retrievers"] = {"bm25": {"type": "lucene", "fields": "multifield"}}
    bm25 = Plan(validate_config(expand_config(config), SCHEMA), REPO).published_identities
    summary = pd.DataFrame(
        {"dataset": ["scifact"], "system": ["bm25"], "metric": ["ndcg_cut_10"], "value": [0.5]}
    )
    table = view(summary, ENTRIES, bm25, layout)
    assert [c for c in table.frame.columns if "(" in c] == ["BM25 (bm25)"]
    assert table.frame.index.tolist() == ["scifact", RELATIVE_ROW, PRINTED_ROW]


# The formulas tried for Table 2's "Avg. Performance vs. BM25" row, over sets of its datasets
# (docs/metrics.md, "BEIR's Avg. Performance vs. BM25"): (name, function of a system's and
# BM25's cells as Series).
FORMULAS = {
    "relative difference of the means": relative_to_bm25,
    "mean of the relative differences": lambda s, b: ((s - b) / b).mean(),
    "mean of the differences": lambda s, b: (s - b).mean(),
    "median of the relative differences": lambda s, b: ((s - b) / b).median(),
    "geometric mean of the ratios, minus 1": lambda s, b: np.exp(np.log(s / b).mean()) - 1,
}
LICENSED = ["bioasq", "signal1m", "trec-news", "robust04"]


def test_no_formula_over_table_2s_cells_gives_its_printed_row_within_half_a_point():
    """Each formula over each set of datasets misses the printed row by more than 0.5 points
    for some system; over the paper's 18 zero-shot datasets the one irflow computes misses by
    the least on average (1.1 points), by 3.7 at most, and agrees in sign for every system."""
    cells = pd.DataFrame(
        [
            (e["dataset"], e["source"]["column"], e["value"])
            for e in TABLE2
            if e["metric"] == "ndcg_cut_10"
        ],
        columns=["dataset", "column", "value"],
    ).pivot(index="dataset", columns="column", values="value")
    printed = pd.Series(
        {
            e["source"]["column"]: 100 * e["value"]
            for e in TABLE2
            if e["metric"] == "ndcg_cut_10_vs_bm25"
        }
    )
    zero_shot = [d for d in cells.index if d != "msmarco"]
    sets = {
        "18 zero-shot": zero_shot,
        "all 19": list(cells.index),
        "14 public zero-shot": [d for d in zero_shot if d not in LICENSED],
        "17 without CQADupStack": [d for d in zero_shot if d != "cqadupstack"],
    }
    computed = {
        (formula, name): pd.Series(
            {
                column: 100 * compute(cells.loc[datasets, column], cells.loc[datasets, "BM25"])
                for column in printed.index
            }
        )
        for formula, compute in FORMULAS.items()
        for name, datasets in sets.items()
    }
    misses = {key: (values - printed).abs() for key, values in computed.items()}
    assert min(miss.max() for miss in misses.values()) > 0.5
    over_18 = {formula: miss for (formula, name), miss in misses.items() if name == "18 zero-shot"}
    best = min(over_18, key=lambda formula: over_18[formula].mean())
    assert best == "relative difference of the means"
    assert (over_18[best].mean(), over_18[best].max()) == pytest.approx((1.1, 3.7), abs=0.05)
    closest = computed[best, "18 zero-shot"]
    assert ((closest > 0) == (printed > 0)).all()
