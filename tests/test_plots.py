"""plots: every figure is written as PNG and SVG and shows what it should."""

from __future__ import annotations

import io

import matplotlib
import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from irflow.analyses.correlate import between_datasets, bootstrap_correlation
from irflow.analyses.plots import (
    bar_charts,
    bootstrap_histogram,
    confidence_intervals,
    latency_quality,
    matrix,
    position_curves,
    psi_table,
    row_minus_column,
    significance_matrices,
    significance_table,
)
from irflow.analyses.position import analyse
from irflow.evaluation.significance import paired_comparisons


@pytest.fixture
def per_query():
    rng = np.random.default_rng(0)
    rows = [
        (dataset, system, f"q{i}", "ndcg_cut_10", float(rng.random()))
        for dataset in ("a", "b")
        for system in ("bm25", "dense")
        for i in range(20)
    ]
    return pd.DataFrame(rows, columns=["dataset", "system", "query_id", "metric", "value"])


def written(path):
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 100 and image.shape[1] > 100
    assert image.std() > 0  # not a blank canvas
    assert path.with_suffix(".svg").read_text().startswith("<?xml")


def test_confidence_intervals_contain_the_mean(per_query):
    intervals = confidence_intervals(per_query)
    assert len(intervals) == 4
    assert ((intervals["low"] < intervals["mean"]) & (intervals["mean"] < intervals["high"])).all()
    constant = per_query.assign(value=0.5)
    flat = confidence_intervals(constant)
    assert (flat["low"] == 0.5).all() and (flat["high"] == 0.5).all()


def test_every_figure_is_drawn(per_query, tmp_path):
    bar_charts(per_query, "ndcg_cut_10", tmp_path / "bars.png")
    written(tmp_path / "bars.png")
    matrix(
        pd.DataFrame([[1.0, 0.2], [0.2, 1.0]], index=["a", "b"], columns=["a", "b"]),
        "m",
        tmp_path / "matrix.png",
    )
    written(tmp_path / "matrix.png")
    comparisons = pd.DataFrame(
        {
            "dataset": ["a", "b"],
            "metric": "ndcg_cut_10",
            "family": "all pairs",
            "system_a": "bm25",
            "system_b": "dense",
            "b_minus_a": [0.1, -0.05],
            "significant": [True, False],
        }
    )
    significance_matrices(comparisons, "ndcg_cut_10", tmp_path / "significance.png")
    written(tmp_path / "significance.png")
    points = pd.DataFrame(
        {
            "dataset": ["a", "a"],
            "system": ["bm25", "dense"],
            "latency_median_ms": [0.5, 12.0],
            "value": [0.6, 0.65],
        }
    )
    latency_quality(points, "ndcg_cut_10", tmp_path / "latency.png")
    written(tmp_path / "latency.png")


def test_significance_reads_which_way_it_goes():
    """dense beats bm25 by 0.3 on average: the table's b − a is +0.3 for the pair
    (bm25, dense), and the matrix's row − column is +0.3 in dense's row."""
    bm25 = np.linspace(0.1, 0.5, 20)
    spread = np.tile([0.01, -0.01], 10)
    per_query = pd.DataFrame(
        {
            "dataset": "scifact",
            "system": ["bm25"] * 20 + ["dense"] * 20,
            "query_id": [f"q{i}" for i in range(20)] * 2,
            "metric": "ndcg_cut_10",
            "value": np.concatenate([bm25, bm25 + 0.3 + spread]),
        }
    )
    comparisons = paired_comparisons(per_query, permutations=100).assign(family="all pairs")
    html = significance_table(comparisons)
    assert "<th>b − a</th>" in html and "<td>+0.3000</td>" in html
    values, labels = row_minus_column(comparisons, ["bm25", "dense"])
    assert values.loc["dense", "bm25"] == pytest.approx(0.3)
    assert values.loc["bm25", "dense"] == pytest.approx(-0.3)
    assert labels.loc["dense", "bm25"] == "+0.300*"


def svg_text(path) -> str:
    """The figure's SVG, its words kept as text (matplotlib draws them as paths by default)."""
    return path.with_suffix(".svg").read_text()


@pytest.fixture
def text_in_svg():
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        yield


def one_system(queries: int = 1) -> pd.DataFrame:
    """The most common first run: one system on one dataset (here with one judged query)."""
    return pd.DataFrame(
        {
            "dataset": "scifact",
            "system": "bm25",
            "query_id": [f"q{i}" for i in range(queries)],
            "metric": "ndcg_cut_10",
            "value": np.linspace(0.2, 0.8, queries),
        }
    )


def test_one_system_one_dataset_one_query_still_draws_every_figure(tmp_path, text_in_svg):
    per_query = one_system()
    summary = per_query.groupby(["dataset", "system", "metric"], as_index=False)["value"].mean()
    comparisons = paired_comparisons(per_query, permutations=100).assign(family="all pairs")
    assert comparisons.empty  # one system: no pair

    bar_charts(per_query, "ndcg_cut_10", tmp_path / "quality.png")
    written(tmp_path / "quality.png")
    # Before: plt.subplots(1, 0) raised "Number of columns must be a positive integer, not 0".
    significance_matrices(comparisons, "ndcg_cut_10", tmp_path / "significance.png")
    written(tmp_path / "significance.png")
    assert "nothing to compare" in svg_text(tmp_path / "significance.png")

    correlations = between_datasets(summary, "ndcg_cut_10")
    table = correlations.pivot(index="left", columns="right", values="spearman")
    assert table.empty  # one dataset: no pair, and no scifact~scifact row of NaN
    matrix(table, "Spearman", tmp_path / "correlation.png", empty="needs 3 systems; this run has 1")
    written(tmp_path / "correlation.png")
    assert "needs 3 systems; this run has 1" in svg_text(tmp_path / "correlation.png")

    points = pd.DataFrame(
        {"dataset": ["scifact"], "system": ["bm25"], "latency_median_ms": [0.3], "value": [0.7]}
    )
    latency_quality(points, "ndcg_cut_10", tmp_path / "latency.png")
    written(tmp_path / "latency.png")

    draws = bootstrap_correlation(per_query, "ndcg_cut_10", ["scifact"], ["scifact"], resamples=3)
    assert draws["spearman"].isna().all()
    bootstrap_histogram(draws.assign(left="g1", right="g2"), tmp_path / "bootstrap.png")
    written(tmp_path / "bootstrap.png")
    assert "too few systems" in svg_text(tmp_path / "bootstrap.png")
    assert "Nothing to compare" in significance_table(comparisons)


def test_empty_tables_give_a_figure_that_says_so(tmp_path, text_in_svg):
    """The script reads these back from Parquet; an empty table must not break a figure."""
    empty_comparisons = pd.DataFrame(
        columns=["dataset", "metric", "family", "system_a", "system_b", "difference", "significant"]
    )
    significance_matrices(empty_comparisons, "ndcg_cut_10", tmp_path / "significance.png")
    written(tmp_path / "significance.png")
    matrix(pd.DataFrame(), "Spearman", tmp_path / "empty.png", empty="no correlations")
    assert "no correlations" in svg_text(tmp_path / "empty.png")
    no_points = pd.DataFrame(columns=["dataset", "system", "latency_median_ms", "value"])
    latency_quality(no_points, "ndcg_cut_10", tmp_path / "latency.png")
    assert "no system has both" in svg_text(tmp_path / "latency.png")
    bar_charts(one_system().assign(metric="map"), "ndcg_cut_10", tmp_path / "bars.png")
    assert "no per-query scores for ndcg_cut_10" in svg_text(tmp_path / "bars.png")
    no_draws = pd.DataFrame(columns=["draw", "spearman", "every_query", "left", "right"])
    bootstrap_histogram(no_draws, tmp_path / "bootstrap.png")
    written(tmp_path / "bootstrap.png")
    assert "not configured (correlation.bootstrap)" in svg_text(tmp_path / "bootstrap.png")


def test_latency_plot_has_a_marker_for_every_one_of_many_datasets(tmp_path, text_in_svg):
    # Position variants make dozens of datasets; the ten markers repeat.
    points = pd.DataFrame(
        {
            "dataset": [f"scifact@L512@p{i}" for i in range(12)],
            "system": "bm25",
            "latency_median_ms": np.linspace(1, 12, 12),
            "value": np.linspace(0.1, 0.6, 12),
        }
    )
    latency_quality(points, "ndcg_cut_10", tmp_path / "latency.png")
    legend = svg_text(tmp_path / "latency.png")
    assert all(f"scifact@L512@p{i}" in legend for i in range(12))


def bootstrap_draws(spearman: list[float], every_query: bool) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "draw": range(len(spearman)),
            "spearman": spearman,
            "kendall": spearman,
            "every_query": every_query,
            "left": "beir",
            "right": "partial",
        }
    )


def test_bootstrap_histogram_shows_the_draws(tmp_path, text_in_svg):
    draws = bootstrap_draws([0.5, 1.0, 1.0, 0.8], False)
    bootstrap_histogram(draws, tmp_path / "b.png", full=0.9)
    written(tmp_path / "b.png")
    svg = svg_text(tmp_path / "b.png")
    assert "4 draws" in svg and "mean 0.825" in svg and "every query 0.900" in svg
    assert "5th-95th percentile [0.545, 1.000]" in svg
    assert "beir (subsampled) vs partial" in svg and "identical" not in svg
    bootstrap_histogram(bootstrap_draws([0.5] * 4, True), tmp_path / "same.png")
    assert "every draw holds every query of beir: the draws are identical" in svg_text(
        tmp_path / "same.png"
    )


def test_bootstrap_histogram_of_several_seeds_gives_the_mean_and_sd_over_them(
    tmp_path, text_in_svg
):
    """Seeds 0 and 1, each seed's mean Spearman 0.75 and 0.9: 0.825 ± 0.106 (ddof 1) over the
    seeds, in the title. (Before: the draws only, "4 draws".)"""
    draws = bootstrap_draws([0.5, 1.0, 1.0, 0.8], False).assign(seed=[0, 0, 1, 1])
    bootstrap_histogram(draws, tmp_path / "b.png")
    means = draws.groupby("seed")["spearman"].mean().to_numpy()
    spread = f"{means.mean():.3f} ± {np.std(means, ddof=1):.3f}"
    assert spread == "0.825 ± 0.106"
    assert f"4 draws, 2 seeds: {spread} over the seeds" in svg_text(tmp_path / "b.png")


def test_significance_table_shows_a_floored_p_as_at_most(per_query):
    bm25 = per_query[per_query["system"] == "bm25"]
    noise = np.random.default_rng(3).normal(0, 0.01, len(bm25))
    systems = [
        bm25,
        bm25.assign(system="better", value=bm25["value"] + 0.5 + noise[::-1]),
        bm25.assign(system="noisy", value=bm25["value"] + noise),
    ]
    comparisons = paired_comparisons(pd.concat(systems), permutations=199, seed=0)
    html = significance_table(comparisons.assign(family="all pairs"))
    # Per dataset, both pairs with "better" are at the floor 2 / 200, times 3 pairs by Holm.
    assert html.count("≤ 0.0300 (floor 0.0100 for 199 permutations, × 3 comparisons by Holm)") == 4
    unbounded = comparisons[comparisons["system_a"] == "bm25"]["randomization_p_holm"]
    for p_value in unbounded:
        assert f"<td>{p_value:.4f}</td>" in html
    assert "randomization p (Holm, all pairs)" in html


def test_the_report_shows_each_pair_once_with_one_sign(per_query):
    """The report's significance table, both families (issue 51: "all pairs" showed a pair
    +0.0311 and "against bm25" the same pair −0.0311, on two rows): one row per pair, the
    baseline as system a, each family's Holm p and verdict side by side, "–" for the family
    a pair is not in."""
    rng = np.random.default_rng(5)
    bm25 = per_query[per_query["system"] == "bm25"]
    systems = [
        bm25,
        bm25.assign(system="all-MiniLM", value=bm25["value"] - 0.03 + rng.normal(0, 0.01, 40)),
        bm25.assign(system="splade", value=bm25["value"] + 0.2 + rng.normal(0, 0.01, 40)),
    ]
    frame = pd.concat(systems)
    everything = paired_comparisons(frame, permutations=199, first="bm25")
    against = paired_comparisons(frame, permutations=199, baseline="bm25")
    comparisons = pd.concat(
        [everything.assign(family="all pairs"), against.assign(family="against bm25")]
    )
    table = pd.read_html(io.StringIO(significance_table(comparisons)))[0]
    assert len(table) == 2 * 3  # two datasets, three pairs each, each once
    assert list(table.columns) == [
        "dataset",
        "metric",
        "system a",
        "system b",
        "b − a",
        "d_z",
        "randomization p (Holm, against bm25)",
        "significant (against bm25)",
        "randomization p (Holm, all pairs)",
        "significant (all pairs)",
    ]
    pairs = set(zip(table["system a"], table["system b"]))
    assert pairs == {("bm25", "all-MiniLM"), ("bm25", "splade"), ("all-MiniLM", "splade")}
    minilm = table[table["system b"] == "all-MiniLM"]
    expected = against[against["system_b"] == "all-MiniLM"]["b_minus_a"]
    assert [float(d) for d in minilm["b − a"]] == pytest.approx(expected.tolist(), abs=5e-5)
    assert (minilm["b − a"].astype(float) < 0).all()
    neither = table[table["system a"] == "all-MiniLM"]
    assert (neither["randomization p (Holm, against bm25)"] == "–").all()


def test_position_curves_one_panel_per_bucket_and_the_psi_table(tmp_path, text_in_svg):
    # dense loses 0.8 over a short document and 0.4 over a long one; bm25 is flat. Each bin
    # holds five queries spread +-0.04 around its mean, so the bootstrap has something to draw.
    rows = pd.DataFrame(
        [
            ("pos", system, "ndcg_cut_10", f"q{i}-{p}-{tokens}", value, p, tokens)
            for system, decay in (("dense", {300: 0.8, 900: 0.4}), ("bm25", {300: 0, 900: 0}))
            for tokens in (300, 900)
            for p in (0.0, 0.5, 1.0)
            for i in range(5)
            for value in [0.9 - decay[tokens] * p + 0.02 * (i - 2)]
        ],
        columns=["dataset", "system", "metric", "query_id", "value", "relpos", "doc_tokens"],
    )
    bins, psi = analyse(rows, interval={"resamples": 200, "confidence": 0.95, "seed": 0})
    position_curves(bins, tmp_path / "position.png")
    written(tmp_path / "position.png")
    text = svg_text(tmp_path / "position.png")
    assert "pos Q1 (15 queries)" in text and "pos Q2 (15 queries)" in text
    html = psi_table(psi)
    assert "&lt;NA&gt;" not in html
    table = pd.read_html(io.StringIO(html), flavor="lxml")[0]
    # 2 systems x (2 buckets + the buckets pooled, last).
    assert table[["bucket", "system"]].values.tolist() == [
        ["Q1", "bm25"],
        ["Q1", "dense"],
        ["Q2", "bm25"],
        ["Q2", "dense"],
        ["all (buckets pooled)", "bm25"],
        ["all (buckets pooled)", "dense"],
    ]
    dense = table[table["system"] == "dense"].set_index("bucket")
    # Bin means 0.9/0.5/0.1 and 0.9/0.7/0.5; pooled 0.9/0.6/0.3: PSI 1 - 0.3/0.9, not a bucket's.
    assert dense["PSI"].tolist() == pytest.approx(
        [1 - 0.1 / 0.9, 1 - 0.5 / 0.9, 1 - 0.3 / 0.9], abs=5e-5
    )
    assert dense["queries"].tolist() == [15, 15, 30]
    for column in ("PosIR's score (bins' mean; all: every query)", "mean score (over queries)"):
        assert dense[column].tolist() == pytest.approx([0.5, 0.7, 0.6], abs=5e-5)
    assert dense["trend"].tolist() == ["primacy"] * 3
    assert (table.loc[table["system"] == "bm25", "trend"] == "flat").all()
    # The interval is the analysis' own, around PSI.
    by_bucket = psi[psi["system"] == "dense"].set_index("bucket")
    for bucket, shown in (("Q1", "Q1"), ("Q2", "Q2"), ("all", "all (buckets pooled)")):
        low, high = by_bucket.loc[bucket, ["psi_low", "psi_high"]]
        assert dense.loc[shown, "PSI interval low"] == pytest.approx(low, abs=5e-5)
        assert dense.loc[shown, "PSI interval high"] == pytest.approx(high, abs=5e-5)
        assert low < by_bucket.loc[bucket, "psi"] < high
    # With min_count 1 PSI is PosIR's already: no second PSI column.
    assert "PSI (every non-empty bin)" not in table.columns
    strict = psi_table(analyse(rows.iloc[1:], min_count=5)[1])
    strict_table = pd.read_html(io.StringIO(strict), flavor="lxml")[0].set_index(
        ["bucket", "system"]
    )
    # dense Q1 lost its first query at position 0 (0.86): that bin, now 4 queries averaging
    # 0.91, is left out of PSI (1 - 0.1/0.5) and kept in PosIR's (1 - 0.1/0.91).
    dense_q1 = strict_table.loc[("Q1", "dense")]
    assert dense_q1["bins excluded"] == 1
    assert dense_q1["PSI"] == pytest.approx(0.8, abs=5e-5)
    assert dense_q1["PSI (every non-empty bin)"] == pytest.approx(1 - 0.1 / 0.91, abs=5e-5)
    position_curves(bins.iloc[0:0], tmp_path / "none.png")
    assert "no query with a single relevant span" in svg_text(tmp_path / "none.png")
    assert "No position analysis" in psi_table(psi.iloc[0:0])
