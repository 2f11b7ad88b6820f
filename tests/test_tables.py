"""tables: the Average ranks by the benchmark's own datasets, a group counts once, derived
datasets get tables of their own, and a system missing a dataset gets no Average."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from conftest import REPO, SCHEMA, minimal_config

from irflow.core.errors import ConfigError
from irflow.evaluation.aggregate import build_summary
from irflow.evaluation.score import score_run
from irflow.evaluation.tables import TableLayout, result_tables, write_tables
from irflow.workflow.config import expand_config, validate_config
from irflow.workflow.run_inputs import Plan

METRIC = "ndcg_cut_10"
EXPANDED = "document-expanded copies"


def summary_of(values: dict[tuple[str, str], float], metric: str = METRIC) -> pd.DataFrame:
    """A summary from {(dataset, system): value}."""
    return pd.DataFrame(
        [(dataset, system, metric, value, 10) for (dataset, system), value in values.items()],
        columns=["dataset", "system", "metric", "value", "queries"],
    )


def test_the_average_ranks_by_the_benchmarks_own_datasets():
    """The issue's toy case: A is better than B on both real datasets (0.500 against 0.490),
    but B does well on a copy derived from d1. Averaged over every column, as before, B ranked
    first (0.5075 against 0.4550); over the benchmark's own datasets A does (0.500 against
    0.490), and the copy is in a table of its own, beside d1, without an Average."""
    summary = summary_of(
        {
            ("d1", "A"): 0.500,
            ("d2", "A"): 0.500,
            ("d1-copy", "A"): 0.365,
            ("d1", "B"): 0.490,
            ("d2", "B"): 0.490,
            ("d1-copy", "B"): 0.5425,
        }
    )
    layout = TableLayout(
        benchmark={"d1": None, "d2": None},
        derived={"d1-copy": {"base": "d1", "kind": EXPANDED}},
    )
    main, copies = result_tables(summary, METRIC, layout)
    assert list(main.frame.columns) == ["d1", "d2", "Average"]
    assert main.frame.index.tolist() == ["A", "B"]
    assert main.frame["Average"].tolist() == pytest.approx([0.500, 0.490])
    assert copies.title == f"d1: {EXPANDED}"
    assert list(copies.frame.columns) == ["d1", "d1-copy"]
    assert copies.frame.loc["B", "d1-copy"] == 0.5425
    # Every column of every table, averaged as before, would have put B first.
    assert summary.groupby("system")["value"].mean().to_dict() == pytest.approx(
        {"A": 0.455, "B": 0.5075}
    )


def test_a_system_missing_a_dataset_gets_no_average_and_the_table_says_why():
    summary = summary_of(
        {("d1", "A"): 0.4, ("d2", "A"): 0.6, ("d3", "A"): 0.5, ("d1", "B"): 0.9, ("d3", "C"): 0.7}
    )
    layout = TableLayout(benchmark={"d1": None, "d2": None, "d3": None})
    (main,) = result_tables(summary, METRIC, layout)
    # B's 0.9 on d1 alone is not a mean over the benchmark: it ranks after every complete row.
    assert main.frame.index.tolist() == ["A", "B", "C"]
    assert main.frame.loc["A", "Average"] == pytest.approx(0.5)
    assert main.frame["Average"].isna().tolist() == [False, True, True]
    assert main.notes == [
        f"B: no Average, as it has no {METRIC} on d2, d3.",
        f"C: no Average, as it has no {METRIC} on d1, d2.",
    ]


def test_a_group_counts_once_as_the_mean_of_its_members():
    """BEIR counts CQADupStack's subforums as one dataset, their mean: with two subforums and
    one other dataset the Average is (other + mean of the subforums) / 2, not a mean over three."""
    summary = summary_of(
        {
            ("scifact", "A"): 0.6,
            ("cqa-android", "A"): 0.2,
            ("cqa-unix", "A"): 0.4,
            ("scifact", "B"): 0.5,
            ("cqa-android", "B"): 0.5,
        }
    )
    layout = TableLayout(
        benchmark={"scifact": None, "cqa-android": "cqadupstack", "cqa-unix": "cqadupstack"}
    )
    main, members = result_tables(summary, METRIC, layout)
    assert list(main.frame.columns) == ["cqadupstack", "scifact", "Average"]
    assert main.frame.loc["A", "cqadupstack"] == pytest.approx(0.3)
    assert main.frame.loc["A", "Average"] == pytest.approx((0.6 + 0.3) / 2)  # not 0.4
    # B lacks a member: no group value, so no Average either.
    assert main.frame.loc["B"].isna().tolist() == [True, False, True]
    assert main.notes == [
        "cqadupstack: the mean of its 2 datasets (cqa-android, cqa-unix), counted once in the "
        "Average.",
        f"B: no Average, as it has no {METRIC} on cqa-unix.",
    ]
    assert members.title == "cqadupstack: its datasets"
    assert list(members.frame.columns) == ["cqa-android", "cqa-unix", "cqadupstack"]
    assert members.frame.loc["A"].tolist() == pytest.approx([0.2, 0.4, 0.3])


def test_derived_datasets_get_a_table_per_base_and_kind():
    summary = summary_of(
        {
            (dataset, "bm25"): value
            for dataset, value in {
                "scifact": 0.67,
                "nfcorpus": 0.32,
                "scifact@a": 0.5,
                "scifact@b": 0.4,
                "scifact-x": 0.7,
                "nfcorpus-x": 0.33,
            }.items()
        }
    )
    layout = TableLayout(
        benchmark={"scifact": None, "nfcorpus": None},
        derived={
            "scifact@a": {"base": "scifact", "kind": "positional variants"},
            "scifact@b": {"base": "scifact", "kind": "positional variants"},
            "scifact-x": {"base": "scifact", "kind": EXPANDED},
            "nfcorpus-x": {"base": "nfcorpus", "kind": EXPANDED},
        },
    )
    main, *derived = result_tables(summary, METRIC, layout)
    assert list(main.frame.columns) == ["nfcorpus", "scifact", "Average"]
    assert main.frame.loc["bm25", "Average"] == pytest.approx((0.67 + 0.32) / 2)
    assert main.notes == [
        "The Average is over the 2 datasets of the benchmark; datasets made from them are in "
        "their own tables, not in the Average."
    ]
    assert [(t.title, list(t.frame.columns)) for t in derived] == [
        (f"nfcorpus: {EXPANDED}", ["nfcorpus", "nfcorpus-x"]),
        ("scifact: positional variants", ["scifact", "scifact@a", "scifact@b"]),
        (f"scifact: {EXPANDED}", ["scifact", "scifact-x"]),
    ]


def test_one_dataset_is_one_dataset():
    """Issue 51: "The Average is over the 1 datasets of the benchmark"; a group of one, "the
    mean of its 1 datasets"."""
    summary = summary_of({("d1", "A"): 0.5, ("d1-copy", "A"): 0.4, ("cqa-unix", "A"): 0.3})
    layout = TableLayout(
        benchmark={"d1": None, "cqa-unix": "cqadupstack"},
        derived={"d1-copy": {"base": "d1", "kind": EXPANDED}},
    )
    main, *_ = result_tables(summary, METRIC, layout)
    assert main.notes == [
        "cqadupstack: the mean of its 1 dataset (cqa-unix), counted once in the Average.",
        "The Average is over the 2 datasets of the benchmark; datasets made from them are in "
        "their own tables, not in the Average.",
    ]
    (main, _) = result_tables(
        summary_of({("d1", "A"): 0.5, ("d1-copy", "A"): 0.4}),
        METRIC,
        TableLayout(benchmark={"d1": None}, derived=layout.derived),
    )
    assert main.notes[-1].startswith("The Average is over the 1 dataset of the benchmark;")


def test_a_dataset_the_layout_does_not_place_is_refused():
    summary = summary_of({("d1", "A"): 0.5, ("stray", "A"): 0.9})
    with pytest.raises(ValueError, match="datasets stray are neither"):
        result_tables(summary, METRIC, TableLayout(benchmark={"d1": None}))
    with pytest.raises(ValueError, match="metric 'map' was not computed"):
        result_tables(summary, "map", TableLayout(benchmark={"d1": None}))


def test_results_md_and_csv_hold_every_table(tmp_path):
    summary = summary_of(
        {("d1", "A"): 0.5, ("d2", "A"): 1.0, ("d1", "B"): 0.25, ("d1-copy", "A"): 0.75}
    )
    layout = TableLayout(
        benchmark={"d1": None, "d2": None}, derived={"d1-copy": {"base": "d1", "kind": EXPANDED}}
    )
    write_tables(summary, [METRIC], layout, tmp_path / "results.md", tmp_path / "tables")
    text = (tmp_path / "results.md").read_text()
    assert "| A | 0.5000 | 1.0000 | 0.7500 |" in text
    assert "| B | 0.2500 |  |  |" in text  # blank d2 and blank Average
    assert f"- B: no Average, as it has no {METRIC} on d2." in text
    assert f"### d1: {EXPANDED}\n\n| system | d1 | d1-copy |\n" in text
    main = pd.read_csv(tmp_path / "tables" / f"{METRIC}.csv", index_col=0)
    assert main.loc["A", "Average"] == 0.75 and pd.isna(main.loc["B", "Average"])
    copies = pd.read_csv(tmp_path / "tables" / METRIC / f"d1.{EXPANDED.replace(' ', '_')}.csv")
    assert copies.columns.tolist() == ["system", "d1", "d1-copy"]


def test_a_partial_run_s_tables_say_what_is_missing_and_why(tmp_path):
    """A failed run's tables (irflow.workflow.run_end): every table that shows a dataset a
    system lacks says why, a system missing everywhere keeps its row, and results.md opens
    by saying that the results are partial; tables/missing.csv lists the missing pairs."""
    summary = summary_of({("d1", "A"): 0.5, ("d2", "A"): 1.0, ("d1-copy", "A"): 0.75})
    layout = TableLayout(
        benchmark={"d1": None, "d2": None}, derived={"d1-copy": {"base": "d1", "kind": EXPANDED}}
    )
    missing = {
        ("d1", "B"): "ingest failed (log: results/logs/ingest/d1.log)",
        ("d2", "B"): "not made",
        ("d1-copy", "B"): "ingest failed (log: results/logs/ingest/d1.log)",
    }
    main, copies = result_tables(summary, METRIC, layout, missing)
    assert main.frame.index.tolist() == ["A", "B"] and main.frame.loc["B"].isna().all()
    assert main.notes == [
        f"B: no Average, as it has no {METRIC} on d1, d2.",
        "The Average is over the 2 datasets of the benchmark; datasets made from them are in "
        "their own tables, not in the Average.",
        "d1: missing for B: ingest failed (log: results/logs/ingest/d1.log)",
        "d2: missing for B: not made",
    ]
    assert copies.notes == [
        "d1: missing for B: ingest failed (log: results/logs/ingest/d1.log)",
        "d1-copy: missing for B: ingest failed (log: results/logs/ingest/d1.log)",
    ]
    write_tables(
        summary, [METRIC], layout, tmp_path / "results.md", tmp_path / "tables", missing=missing
    )
    text = (tmp_path / "results.md").read_text()
    assert text.startswith(
        "# irflow results\n\n**Partial results.** The run failed before it scored every dataset. "
        "These tables hold the (dataset, system) pairs that finished (3); the missing ones (3)"
    )
    assert "| B |  |  |  |" in text and "- d2: missing for B: not made" in text
    listed = pd.read_csv(tmp_path / "tables" / "missing.csv")
    assert listed.values.tolist() == [[*pair, why] for pair, why in sorted(missing.items())]


def test_the_plan_passes_which_datasets_are_derived_and_the_groups():
    config = {
        "datasets": {
            "scifact": {"source": {"type": "url", "url": "https://example.org/d.zip"}},
            "cqa-unix": {
                "source": {"type": "url", "url": "https://example.org/d.zip"},
                "group": "cqadupstack",
            },
        },
        "retrievers": {"bm25": {"type": "bm25"}},
        "models": {"m": {"id": "org/m"}},
        "curate": {"scifact-clean": {"dataset": "scifact"}},
        "positionalize": {
            "pos": {
                "dataset": "scifact",
                "tokenizer": "m",
                "lengths": [512],
                "positions": [0, 1.0],
                "fillers": "random",
            }
        },
    }
    plan = Plan(validate_config(config, SCHEMA), REPO)
    layout = plan.table_layout
    assert layout["benchmark"] == {"cqa-unix": "cqadupstack", "scifact": None}
    variants = sorted(plan.kinds["positionalize"].datasets)
    assert len(variants) == 2
    assert layout["derived"] == {
        "scifact-clean": {"base": "scifact", "kind": "curated copies"},
        **{name: {"base": "scifact", "kind": "positional variants"} for name in variants},
    }
    assert set(plan.datasets) == set(layout["benchmark"]) | set(layout["derived"])


def test_a_group_named_as_a_dataset_is_refused():
    config = {
        "datasets": {
            "a": {"source": {"type": "url", "url": "https://example.org/d.zip"}, "group": "b"},
            "b": {"source": {"type": "url", "url": "https://example.org/d.zip"}},
        },
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    with pytest.raises(ConfigError, match="config key 'datasets.a.group': 'b' is the name of"):
        validate_config(config, SCHEMA)


def test_the_default_report_shows_recall_as_beirs_table_9_does(tmp_path):
    """The default config's results.md shows trec_eval's Recall@100, as BEIR's Table 9 does
    but for its starred cells ("\\star shows the capped Recall@100 score", capped only where
    the catalog says so): one query with 500 relevant documents and a perfect top 100 reads
    0.2, not the capped 1.0 (recall_cap_100, still computed, shown when named)."""
    config = validate_config(
        minimal_config("d1"),
        SCHEMA,
    )
    relevant = [f"r{i:03d}" for i in range(500)]
    run = pd.DataFrame(
        [("q", doc, 500.0 - i) for i, doc in enumerate(relevant[:100])],
        columns=["query_id", "doc_id", "score"],
    )
    qrels = pd.DataFrame(
        [("q", doc, 1) for doc in relevant], columns=["query_id", "doc_id", "relevance"]
    )
    per_query = score_run(run, qrels, config["metrics"]).assign(dataset="d1", system="bm25")
    summary = build_summary(per_query)
    layout = TableLayout(benchmark={"d1": None}, derived={})
    write_tables(summary, config["report_metrics"], layout, tmp_path / "results.md", tmp_path)
    text = (tmp_path / "results.md").read_text()
    table = (
        "## Recall@100 (recall_100)\n\nRecall@100: the relevant documents in the top 100 / all the "
        "query's relevant documents.\n\n| system | d1 | Average |\n|---|---:|---:|\n"
    )
    assert f"{table}| bm25 | 0.2000 | 0.2000 |" in text
    assert "(recall_cap_100)" not in text
    recall = summary.set_index("metric")["value"]
    assert (recall["recall_cap_100"], recall["recall_100"]) == (1.0, 0.2)


def test_an_in_domain_dataset_is_shown_marked_and_left_out_of_the_average():
    """BEIR reports MS MARCO, on which its systems were trained, but leaves it out of the
    zero-shot comparison: A is far better on it (0.9 against 0.2) and would rank first
    (0.633 against 0.417); over the zero-shot datasets B does (0.525 against 0.5)."""
    summary = summary_of(
        {
            ("msmarco", "A"): 0.9,
            ("d1", "A"): 0.4,
            ("d2", "A"): 0.6,
            ("msmarco", "B"): 0.2,
            ("d1", "B"): 0.5,
            ("d2", "B"): 0.55,
        }
    )
    layout = TableLayout(benchmark={"msmarco": None, "d1": None, "d2": None}, in_domain=["msmarco"])
    (main,) = result_tables(summary, METRIC, layout)
    assert list(main.frame.columns) == ["d1", "d2", "msmarco ‡", "Average"]
    assert main.frame.index.tolist() == ["B", "A"]
    assert main.frame["Average"].tolist() == pytest.approx([0.525, 0.5])
    assert main.frame.loc["A", "msmarco ‡"] == 0.9
    assert "‡ msmarco: in-domain, not in the Average (datasets.<name>.in_domain)." in main.notes
    counted = TableLayout(benchmark=layout.benchmark)
    assert result_tables(summary, METRIC, counted)[0].frame.index.tolist() == ["A", "B"]


def plan_layout(datasets: dict) -> dict:
    config = {"datasets": datasets, "retrievers": {"bm25": {"type": "bm25"}}}
    return Plan(validate_config(expand_config(config), SCHEMA), REPO).table_layout


def test_ms_marco_is_in_domain_by_the_catalog_unless_the_config_says_otherwise():
    """The catalog marks MS MARCO in-domain: config/reproduce/bm25-ce.yaml's and a list of
    BEIR names leave it out of the Average; ``in_domain: false`` counts it, a non-boolean is
    refused naming the key, and a group's members are in-domain all or none."""
    shipped = yaml.safe_load((REPO / "config" / "reproduce" / "bm25-ce.yaml").read_text())
    assert Plan(validate_config(expand_config(shipped), SCHEMA), REPO).table_layout[
        "in_domain"
    ] == ["msmarco"]
    assert plan_layout({"beir": ["msmarco", "scifact"]})["in_domain"] == ["msmarco"]
    msmarco = {"source": {"type": "beir", "name": "msmarco"}}
    counted = {"beir": ["msmarco", "scifact"], "msmarco": msmarco | {"in_domain": False}}
    assert plan_layout(counted)["in_domain"] == []
    with pytest.raises(ConfigError, match="config key 'datasets.msmarco.in_domain'"):
        plan_layout({"msmarco": msmarco | {"in_domain": "sometimes"}})
    forum = {"source": {"type": "beir", "name": "cqadupstack-gis"}}
    with pytest.raises(ConfigError, match="in-domain all or none"):
        plan_layout({"beir": ["cqadupstack"], "cqadupstack-gis": forum | {"in_domain": True}})
