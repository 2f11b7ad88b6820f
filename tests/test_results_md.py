"""results.md read on its own (issue 51, items 1-3): each table under the name a paper prints,
trec_eval's id beside it, with a legend; each system against the baseline with its Holm p;
each published value once, with its sources together and the tolerance of its verdict.

results.md is written here by the aggregate job's own function (irflow.evaluation.results)
from per-query scores of all-MiniLM-L6-v2 and BM25 on SciFact whose means are the values that
config/reference/published.yaml holds for them, and from the significance table that the
significance job's own function makes of them."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, SCHEMA

from irflow.core import contracts
from irflow.evaluation import published, significance
from irflow.evaluation.aggregate import collect_per_query
from irflow.evaluation.published import load_published, source_text
from irflow.evaluation.results import ResultFiles, write_results
from irflow.evaluation.tables import TableLayout, html_tables, result_tables
from irflow.workflow.config import expand_config, validate_config
from irflow.workflow.run_inputs import Plan

PUBLISHED = REPO / "config" / "reference" / "published.yaml"
ENTRIES = load_published(PUBLISHED)
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
REPORT_METRICS = ["ndcg_cut_10", "recall_cap_100", "map"]  # the default before issue 48
QUERIES = 40


def published_value(metric: str, default: float | None = None, **system) -> float:
    """SciFact's reproduced value of ``metric`` for the published system with ``system``'s
    keys (its first source's), or ``default`` where none is published."""
    return next(
        (
            entry["value"]
            for entry in ENTRIES
            if entry["dataset"] == "scifact"
            and entry["metric"] == metric
            and entry["differs"] is None
            and all(entry["system"].get(key) == value for key, value in system.items())
        ),
        default,
    )


@pytest.fixture
def results(tmp_path):
    """results.md of BM25 and MiniLM on SciFact, the baseline BM25; and the config."""
    config = validate_config(
        expand_config(
            {
                "datasets": {"scifact": {"source": {"type": "beir", "name": "scifact"}}},
                "retrievers": {
                    "bm25": {"type": "bm25"},
                    "all-MiniLM-L6-v2": {"type": "dense", "model": "minilm"},
                },
                "models": {"minilm": {"id": str(tmp_path), "hub_id": MINILM}},
                "significance": {"baseline": "bm25", "permutations": 999},
            }
        ),
        SCHEMA,
    )
    plan = Plan(config, REPO)
    rng = np.random.default_rng(0)
    systems = {
        "bm25": {"family": "bm25", "variant": "bm25s"},
        "all-MiniLM-L6-v2": {"model": MINILM},
    }
    scores = []
    for system, identity in systems.items():
        means = {
            metric: published_value(metric, 0.6, **identity) for metric in ("ndcg_cut_10", "map")
        }
        recall = published_value("recall_100", 0.9, **identity)
        means |= {"recall_100": recall, "recall_cap_100": min(1.0, recall + 0.01)}
        rows = []
        for metric, mean in means.items():
            noise = rng.normal(0, 0.05, QUERIES)
            rows += [
                (f"q{i}", metric, mean + value)
                for i, value in enumerate(noise - noise.mean())  # the mean exactly
            ]
        path = tmp_path / "scores" / f"{system}.parquet"
        path.parent.mkdir(exist_ok=True)
        frame = pd.DataFrame(rows, columns=["query_id", "metric", "value"])
        contracts.write_frame(frame, path, contracts.PER_QUERY)
        scores.append(("scifact", system, path))
    tests = significance.every_comparison(collect_per_query(scores), config["significance"])
    files = ResultFiles.in_folder(tmp_path / "results")
    files.markdown.parent.mkdir()
    write_results(
        scores,
        PUBLISHED,
        files,
        REPORT_METRICS,
        TableLayout(**plan.table_layout),
        plan.published_identities,
        depth=config["top_k"],
        tests=(tests, config["significance"]),
    )
    return files.markdown.read_text(encoding="utf-8"), tests


def section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_each_table_is_named_as_a_paper_names_it_with_a_legend(results):
    """Before: headings were trec_eval ids ("## ndcg_cut_10", "## map") with no legend, and
    one dataset's Average was said to be over "the 1 datasets"."""
    text, _ = results
    assert "\n## nDCG@10 (ndcg_cut_10)\n\nnDCG@10: normalised discounted cumulative gain " in text
    assert "\n## capped Recall@100 (recall_cap_100)\n\ncapped Recall@100: the relevant " in text
    assert "\n## MAP@1000 (map)\n\nMAP@1000: average precision: " in text
    legend = text.split("\n## ", 1)[0]
    assert "each cell the measure's mean over the dataset's judged queries" in legend
    assert "The Average is the mean over the benchmark's 1 dataset (scifact)" in legend
    assert "datasets" not in legend.split("The Average")[1].split("(scifact)")[0]


def test_each_system_against_the_baseline_a_win_positive_with_its_holm_p(results):
    """Before: results.md had no significance at all."""
    text, tests = results
    table = section(text, "## Against the baseline, bm25")
    against = tests[tests["family"] == "against bm25"].iloc[0]
    assert (against["system_a"], against["system_b"]) == ("bm25", "all-MiniLM-L6-v2")
    header = "| system | dataset | nDCG@10 − bm25 | p (Holm) | significant |"
    row = (
        f"| all-MiniLM-L6-v2 | scifact | {against['b_minus_a']:+.4f} | "
        f"{against['randomization_p_holm_text']} | "
        f"{'yes' if against['significant'] else 'no'} |"
    )
    assert f"### nDCG@10 (ndcg_cut_10)\n\n{header}\n|---|---|---:|---:|---|\n{row}\n" in table
    # MiniLM is below BM25 on SciFact: its difference is negative, as a loss reads.
    minilm = published_value("ndcg_cut_10", model=MINILM)
    bm25 = published_value("ndcg_cut_10", family="bm25", variant="bm25s")
    assert against["b_minus_a"] == pytest.approx(minilm - bm25)
    assert "a win is positive" in table and "below 0.05" in table
    # The same pair, all pairs: the same sign (before, the opposite one, the pair in name order).
    pair = tests[tests["family"] == "all pairs"].iloc[0]
    assert (pair["system_a"], pair["system_b"], pair["b_minus_a"]) == (
        "bm25",
        "all-MiniLM-L6-v2",
        against["b_minus_a"],
    )


def test_each_published_value_once_with_its_sources_and_its_tolerance(results):
    """Before: the verdict column had no header, "within tolerance" never showed the
    tolerance, each MiniLM value was on two rows (MTEB's results and the MTEB paper publish
    the same number), and the section compared recall_100 under a table of recall_cap_100."""
    text, _ = results
    table = section(text, "## Against published results")
    assert (
        "| dataset | system | metric | irflow | published | Δ | verdict (tolerance) | "
        "published system | sources |\n"
    ) in table
    minilm = [line for line in table.splitlines() if line.startswith("| scifact | all-MiniLM")]
    assert [line.split(" | ")[2] for line in minilm] == ["nDCG@10 (ndcg_cut_10)", "MAP@1000 (map)"]
    ndcg = [
        entry
        for entry in ENTRIES
        if entry["dataset"] == "scifact"
        and entry["metric"] == "ndcg_cut_10"
        and entry["system"].get("model") == MINILM
    ]
    assert len(ndcg) == 2 and ndcg[0]["value"] == ndcg[1]["value"]
    sources = "; ".join(source_text(entry["source"]) for entry in ndcg)
    row = minilm[0].split(" | ")
    assert row[3:7] == [f"{ndcg[0]['value']:.4f}"] * 2 + ["+0.0000", "within (± 1.5e-05)"]
    assert row[8] == f"{sources} |"
    # recall_100, not a measure of the tables, is named below the table, not compared in it.
    assert "Recall@100 (recall_100)" not in table
    assert "Published values of measures the tables do not show (recall_100 (" in table


def test_the_report_shows_the_same_names_and_tables(results, tmp_path):
    """The report's results and significance tables (scripts/plots.py) carry the same
    names, legend, baseline table and published section as results.md."""
    _, tests = results
    summary = contracts.read_frame(tmp_path / "results" / "summary.parquet")
    comparison = contracts.read_frame(tmp_path / "results" / "published.parquet")
    layout = TableLayout(benchmark={"scifact": None})
    report = html_tables(
        {metric: result_tables(summary, metric, layout) for metric in REPORT_METRICS},
        layout,
        1000,
    ) + published.html(comparison, REPORT_METRICS, 1000)
    assert "<h3>nDCG@10 (ndcg_cut_10)</h3><p>nDCG@10: normalised" in report
    assert "<h3>MAP@1000 (map)</h3>" in report and "benchmark&#x27;s 1 dataset (scifact)" in report
    [shown] = pd.read_html(io.StringIO(report.split("Against published results", 1)[1]))
    assert "verdict (tolerance)" in shown.columns
    verdicts = shown["verdict (tolerance)"].tolist()
    assert verdicts[:3] == ["within (± 1.5e-05)"] * 2 + ["within (± 0.0005)"]  # MiniLM, BM25
    against = significance.html(tests, "bm25", 0.05, 1000)
    [table] = pd.read_html(io.StringIO(against))
    assert table.columns.tolist() == [
        "system",
        "dataset",
        "nDCG@10 − bm25",
        "p (Holm)",
        "significant",
    ]
    row = tests[tests["family"] == "against bm25"].iloc[0]
    assert table.iloc[0]["nDCG@10 − bm25"] == pytest.approx(row["b_minus_a"], abs=5e-5)


def test_without_a_baseline_every_pair_is_shown_once(results):
    """With ``significance.baseline`` null, the section shows all pairs, each once, the
    difference system − against."""
    _, tests = results
    pairs = tests[tests["family"] == "all pairs"]
    text = significance.markdown(pairs, None, 0.05, 1000)
    assert text.startswith("## Significance of every pair\n\nEvery pair of systems")
    header = "| system | against | dataset | nDCG@10: system − against | p (Holm) | significant |"
    [pair] = pairs.itertuples()
    row = f"| {pair.system_b} | {pair.system_a} | scifact | {pair.b_minus_a:+.4f} |"
    assert f"{header}\n|---|---|---|---:|---:|---|\n{row}" in text
