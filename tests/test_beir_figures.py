"""BEIR's Figure 3 (wins over BM25) and Figure 4 (top-10 document lengths) as an analysis
(issue 48, item 9): irflow.analyses.beir_figures and rules/analyses/beir_figures.smk."""

from __future__ import annotations

import gzip
import json
import re

import pandas as pd
import pytest
from conftest import (
    REPO,
    SCHEMA,
    TINY_CORPUS,
    TINY_QRELS,
    TINY_QUERIES,
    _require,
    snakemake,
    write_beir,
)
from pydantic import ValidationError

from irflow.analyses import beir_figures
from irflow.core import contracts
from irflow.core.errors import ConfigError
from irflow.workflow.config import expand_config, validate_config

BEIR = REPO.parent / "shared" / "references" / "beir.txt"
# Where this work quotes BEIR: "beir.txt line N" (with ": " or "): "), then the quote.
QUOTING = [
    REPO / "src" / "irflow" / "analyses" / "beir_figures.py",
    REPO / "src" / "irflow" / "workflow" / "families" / "dense.py",
    REPO / "docs" / "beir-figures.md",
    REPO / "docs" / "retrievers.md",
]
QUOTE = re.compile(r'beir\.txt,? line (\d+)\)?:?\s*"([^"]+)"')


def test_each_quote_of_beir_is_on_the_line_it_names():
    lines = _require(BEIR, "BEIR's text").read_text(encoding="utf-8").splitlines()
    found = []
    for path in QUOTING:
        text = " ".join(path.read_text(encoding="utf-8").split())
        for number, quote in QUOTE.findall(text):
            line = " ".join(lines[int(number) - 1].split())
            assert quote.rstrip(".") in line, (path.name, number, quote)
            found.append((path.name, int(number)))
    assert {number for _, number in found} >= {108, 116, 152, 157, 159, 578}, found


def summary_of(values: dict[str, dict[str, float]]) -> pd.DataFrame:
    rows = [
        {"dataset": d, "system": s, "metric": "ndcg_cut_10", "value": v, "queries": 5}
        for s, by_dataset in values.items()
        for d, v in by_dataset.items()
    ]
    return pd.DataFrame(rows)


LAYOUT = {
    "benchmark": {"scifact": None, "nfcorpus": None, "cqa-a": "cqa", "cqa-b": "cqa"},
    "derived": {"scifact@L100": {"base": "scifact", "kind": "positional variants"}},
}


def test_wins_count_the_datasets_each_system_beats_the_baseline_on_a_group_once():
    summary = summary_of(
        {
            "bm25": {
                "scifact": 0.6,
                "nfcorpus": 0.3,
                "cqa-a": 0.2,
                "cqa-b": 0.4,
                "scifact@L100": 0.1,
            },
            "dense": {
                "scifact": 0.7,
                "nfcorpus": 0.2,
                "cqa-a": 0.5,
                "cqa-b": 0.3,
                "scifact@L100": 0.9,
            },
            "same": {
                "scifact": 0.6,
                "nfcorpus": 0.3,
                "cqa-a": 0.4,
                "cqa-b": 0.2,
                "scifact@L100": 0.0,
            },
        }
    )
    versus = beir_figures.versus_baseline(summary, LAYOUT, "ndcg_cut_10", "bm25")
    dense = versus[versus["system"] == "dense"].set_index("dataset")
    # The derived dataset is left out; the group is its members' mean (0.4 against 0.3).
    assert sorted(dense.index) == ["cqa", "nfcorpus", "scifact"]
    assert dense.loc["cqa", "difference"] == pytest.approx(0.1)
    assert dense.loc["cqa", "relative"] == pytest.approx(0.1 / 0.3)
    assert dense.loc["nfcorpus", "outcome"] == "worse"
    wins = beir_figures.wins(versus).set_index("system")
    assert wins.loc["dense", ["better", "worse", "equal", "datasets"]].tolist() == [2, 1, 0, 3]
    assert wins.loc["dense", "mean_difference"] == pytest.approx((0.1 - 0.1 + 0.1) / 3)
    assert wins.loc["same", ["better", "worse", "equal"]].tolist() == [0, 0, 3]
    assert list(wins.index) == ["dense", "same"]
    table = beir_figures.markdown(wins.reset_index(), pd.DataFrame(), "bm25", "ndcg_cut_10")
    # Relative: (0.1 / 0.6 - 0.1 / 0.3 + 0.1 / 0.3) / 3 = +5.6%.
    assert "| dense | 2 | 1 | 0 | +0.0333 | +5.6% |" in table


def test_top_lengths_count_the_words_of_title_and_text_of_the_top_depth_hits():
    corpus = pd.DataFrame(TINY_CORPUS).rename(columns={"_id": "doc_id"})
    lengths = beir_figures.word_lengths(corpus)
    assert lengths.to_dict() == {"d1": 8, "d2": 6, "d3": 12, "d4": 6}
    run = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q1", "q2", "q2"],
            "doc_id": ["d1", "d3", "d2", "d3", "d4"],
            "score": [3.0, 2.0, 1.0, 2.0, 1.0],
            "rank": [1, 2, 3, 1, 2],
        }
    )
    top = beir_figures.top_lengths(run, lengths, depth=2)
    assert top[["query_id", "doc_id", "words"]].values.tolist() == [
        ["q1", "d1", 8],
        ["q1", "d3", 12],
        ["q2", "d3", 12],
        ["q2", "d4", 6],
    ]
    summary = beir_figures.length_summary(top.assign(dataset="tiny", system="s"))
    row = summary.iloc[0]
    assert (row["hits"], row["median_words"], row["mean_words"]) == (4, 10.0, 9.5)
    assert (row["q1_words"], row["q3_words"]) == (7.5, 12.0)


def test_words_so_counted_are_within_0_7_percent_of_beir_table_1(shared_datasets):
    """Table 1's average document lengths (beir.txt lines 73, 57, 65) against the shared
    copies, counted as irflow counts them."""
    table_1 = {"scifact": 213.63, "nfcorpus": 232.26, "arguana": 166.80}
    lines = BEIR.read_text(encoding="utf-8").splitlines()
    for number, (name, average) in zip((73, 57, 65), table_1.items()):
        assert lines[number - 1].endswith(f"{average:.2f}"), (number, lines[number - 1])
        with gzip.open(shared_datasets / name / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
            corpus = pd.DataFrame(json.loads(line) for line in f).rename(columns={"_id": "doc_id"})
        mean = beir_figures.word_lengths(corpus).mean()
        assert abs(mean / average - 1) < 0.007, (name, mean)


def test_the_figures_are_drawn_as_png_and_svg(tmp_path):
    wins = pd.DataFrame({"system": ["a", "b"], "better": [3, 1], "worse": [1, 3], "equal": [0, 0]})
    beir_figures.plot_wins(wins, "bm25", "ndcg_cut_10", tmp_path / "wins.png")
    hits = pd.DataFrame(
        {
            "dataset": ["x"] * 4 + ["y"] * 2,
            "system": ["a", "a", "b", "b", "a", "b"],
            "words": [10, 12, 150, 170, 0, 40],
        }
    )
    beir_figures.plot_lengths(hits, 10, tmp_path / "lengths.png")
    for name in ("wins", "lengths"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
        assert (tmp_path / f"{name}.svg").read_text().lstrip().startswith("<?xml")


def test_a_baseline_that_is_no_system_is_refused_naming_the_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = {
        "datasets": {"tiny": {"source": {"type": "path", "path": "tiny"}}},
        "retrievers": {"bm25": {"type": "bm25"}},
        "beir_figures": {"baseline": "bm52"},
    }
    with pytest.raises(ConfigError) as error:
        validate_config(expand_config(config), SCHEMA)
    assert (
        "config key 'beir_figures.baseline': 'bm52' is not a system of this config; its "
        "systems: bm25"
    ) in str(error.value)


def test_the_dry_run_plans_the_figures_from_every_run_and_corpus(tmp_path):
    """With a baseline, one job reads the summary, each base dataset's filtered corpus and
    each system's run, and its tables are database views; without one, no job."""
    write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = {
        "datasets": {"tiny": {"source": {"type": "path", "path": "tiny"}}},
        "retrievers": {"bm25": {"type": "bm25"}, "bm25-b": {"type": "bm25", "b": 0.5}},
    }
    outputs = {}
    for baseline in ("bm25", None):
        block = {"beir_figures": {"baseline": baseline}}
        done = snakemake(tmp_path, "--dry-run", config=config | block, cores="1")
        outputs[baseline] = done.stdout
    job = re.search(r"rule beir_figures:\n(.*?)\n\n", outputs["bm25"], re.S)
    assert job, outputs["bm25"]
    inputs = re.search(r"input: (.+)", job.group(1)).group(1).split(", ")
    assert set(inputs) >= {
        "results/summary.parquet",
        "results/runs/tiny/bm25.parquet",
        "results/runs/tiny/bm25-b.parquet",
        "results/datasets/tiny/filtered/corpus.parquet",
    }
    database = re.search(r"rule database:\n(.*?)\n\n", outputs["bm25"], re.S).group(1)
    assert "results/beir_figures/wins.parquet" in database
    assert "results/beir_figures/top_hits.parquet" in database
    assert "rule beir_figures:" not in outputs[None]


def figures_job(tmp_path, settings: dict) -> dict:
    """The beir_figures job's outputs for ``settings`` (its params' block), from a summary, two
    runs of one dataset and its corpus."""
    corpus = pd.DataFrame(TINY_CORPUS).rename(columns={"_id": "doc_id"})
    contracts.write_frame(corpus.assign(title=corpus["title"]), tmp_path / "corpus.parquet")
    summary = summary_of({"bm25": {"tiny": 0.5}, "dense": {"tiny": 0.75}})
    summary["queries"] = summary["queries"].astype("int64")
    summary["seed"] = pd.array([None] * len(summary), dtype="Int64")  # made under one seed
    contracts.write_frame(summary, tmp_path / "summary.parquet", contracts.SUMMARY)
    runs = {}
    for system, order in (("bm25", ["d1", "d2", "d3"]), ("dense", ["d3", "d4"])):
        run = pd.DataFrame(
            {
                "query_id": ["q1"] * len(order),
                "doc_id": order,
                "score": [float(-i) for i in range(len(order))],
                "rank": list(range(1, len(order) + 1)),
            }
        ).astype({"rank": "int32"})
        contracts.write_frame(run, tmp_path / f"{system}.parquet", contracts.RUN)
        runs[("tiny", system)] = tmp_path / f"{system}.parquet"
    names = ("versus", "wins", "hits", "lengths")
    out = {name: tmp_path / "out" / f"{name}.parquet" for name in names} | {
        "markdown": tmp_path / "out" / "beir_figures.md",
        "wins_plot": tmp_path / "plots" / "wins.png",
        "lengths_plot": tmp_path / "plots" / "lengths.png",
    }
    (tmp_path / "out").mkdir()
    beir_figures.write_figures(
        tmp_path / "summary.parquet",
        runs,
        {"tiny": tmp_path / "corpus.parquet"},
        {"benchmark": {"tiny": None}, "derived": {}},
        settings,
        out,
    )
    return out


def test_the_job_writes_every_table_figure_and_the_markdown(tmp_path):
    """What the beir_figures job writes, from a summary, two runs per dataset and corpora."""
    out = figures_job(tmp_path, {"baseline": "bm25", "metric": "ndcg_cut_10", "depth": 2})
    wins = contracts.read_frame(out["wins"])
    assert wins.to_dict("records") == [
        {
            "system": "dense",
            "better": 1,
            "worse": 0,
            "equal": 0,
            "datasets": 1,
            "mean_difference": 0.25,
            "median_difference": 0.25,
            "mean_relative": 0.5,
        }
    ]
    hits = contracts.read_frame(out["hits"])
    assert hits[["system", "doc_id", "words"]].values.tolist() == [
        ["bm25", "d1", 8],
        ["bm25", "d2", 6],
        ["dense", "d3", 12],
        ["dense", "d4", 6],
    ]
    lengths = contracts.read_frame(out["lengths"]).set_index("system")
    assert lengths["median_words"].to_dict() == {"bm25": 7.0, "dense": 9.0}
    assert "| tiny | dense | 2 | 9 | 7.5 | 10.5 | 9.0 |" in out["markdown"].read_text()
    assert out["wins_plot"].is_file() and out["lengths_plot"].with_suffix(".svg").is_file()


def test_the_jobs_block_is_typed_with_the_schemas_defaults(tmp_path):
    """The beir_figures job types its block once (irflow.core.settings_types.BeirFigures): a
    block naming only its baseline compares Table 2's nDCG@10 and counts the top 10 documents
    (the dict's reading stopped at the missing key); a key the schema lacks is refused,
    naming it."""
    out = figures_job(tmp_path, {"baseline": "bm25"})
    assert contracts.read_frame(out["wins"])[["system", "better"]].values.tolist() == [["dense", 1]]
    hits = contracts.read_frame(out["hits"])
    assert hits.groupby("system")["doc_id"].count().to_dict() == {"bm25": 3, "dense": 2}
    with pytest.raises(ValidationError, match="dept"):
        beir_figures.write_figures(tmp_path, {}, {}, {}, {"baseline": "bm25", "dept": 2}, {})
