"""plots: every figure is written as PNG and SVG and shows what it should."""

from __future__ import annotations

import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from irflow.plots import (
    bar_charts,
    confidence_intervals,
    latency_quality,
    matrix,
    significance_matrices,
)


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
            "difference": [0.1, -0.05],
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
