"""PosIR's position analysis: relative positions, buckets, bins, PSI and the trend."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_positionalize import word_tokenizer

from irflow.position import (
    analyse,
    length_bucket,
    position_bin,
    relative_position,
    span_positions,
)


def rows(cells: list[tuple[str, float, float]], tokens: int = 100) -> pd.DataFrame:
    """(bucket-free) scored queries: (query_id, relpos, value), all of one length."""
    return pd.DataFrame(
        {
            "dataset": "d",
            "system": "s",
            "metric": "ndcg_cut_10",
            "query_id": [c[0] for c in cells],
            "relpos": [c[1] for c in cells],
            "value": [c[2] for c in cells],
            "doc_tokens": tokens,
        }
    )


def test_relative_position_of_span_centres():
    starts, ends, chars = [0, 90, 100, 40, 0], [10, 100, 100, 60, 0], [100, 100, 100, 100, 0]
    assert np.allclose(relative_position(starts, ends, chars)[:4], [0.05, 0.95, 1.0, 0.5])
    assert np.isnan(relative_position(starts, ends, chars)[4])  # an empty document
    assert relative_position([0], [400], [100])[0] == 1.0  # clipped, as PosIR


def test_position_bins_are_closed_on_the_right():
    assert position_bin([0, 0.05, 0.0500001, 0.5, 0.999, 1.0]).tolist() == [0, 0, 1, 9, 19, 19]
    assert position_bin([0, 0.5, 1.0], bins=2).tolist() == [0, 0, 1]
    assert np.isnan(position_bin([1.5])[0])


def test_length_buckets_as_posir():
    tokens = [1, 512, 513, 1024, 1536, 1537, 100_000]
    assert list(length_bucket(tokens)) == ["Q1", "Q1", "Q2", "Q2", "Q3", "Q4", "Q4"]
    assert list(length_bucket([100, 101, 250], bucket_tokens=100, buckets=2)) == ["Q1", "Q2", "Q2"]


def test_psi_and_primacy_on_known_values():
    # Bin 0 holds 0.8 on average, bin 19 holds 0.4: PSI = 1 - 0.4 / 0.8.
    cells = [("a", 0.0, 0.7), ("b", 0.01, 0.9), ("c", 1.0, 0.4), ("d", 0.97, 0.4)]
    bins, psi = analyse(rows(cells), min_count=1)
    row = psi.iloc[0]
    assert row["psi"] == pytest.approx(0.5)
    assert row["trend"] == "primacy"
    assert row["slope"] == pytest.approx((0.4 - 0.8) / 0.95)  # between centres .025 and .975
    assert (row["bins_used"], row["bins_excluded"], row["queries"]) == (2, 0, 4)
    assert row["mean_ndcg"] == pytest.approx(0.6)  # over the bucket's 4 queries
    assert pd.isna(row["reason"])
    used = bins[bins["queries"] > 0]
    assert used["bin"].tolist() == [0, 19]
    assert used["mean_ndcg"].tolist() == pytest.approx([0.8, 0.4])
    assert used["bin_start"].tolist() == pytest.approx([0, 0.95])
    assert used["bin_end"].tolist() == pytest.approx([0.05, 1.0])


def test_empty_bins_are_listed_but_not_used():
    bins, psi = analyse(rows([("a", 0.0, 0.5), ("b", 1.0, 0.5)]), min_count=1)
    assert len(bins) == 20
    empty = bins[bins["queries"] == 0]
    assert len(empty) == 18 and empty["mean_ndcg"].isna().all() and not empty["excluded"].any()
    assert psi.iloc[0]["psi"] == 0 and psi.iloc[0]["trend"] == "flat"


def test_bins_under_min_count_are_excluded_and_reported():
    cells = [(f"a{i}", 0.0, 0.6) for i in range(3)] + [(f"b{i}", 0.5, 0.3) for i in range(3)]
    cells.append(("c", 1.0, 0.0))  # one query at the end: too few to count
    bins, psi = analyse(rows(cells), min_count=2)
    assert bins.loc[bins["excluded"], "bin"].tolist() == [19]
    row = psi.iloc[0]
    assert (row["bins_used"], row["bins_excluded"], row["queries"]) == (2, 1, 7)
    assert row["psi"] == pytest.approx(0.5)  # the excluded 0.0 does not make it 1


def test_a_bucket_with_one_usable_bin_has_no_psi():
    cells = [("a", 0.46, 0.7), ("b", 0.48, 0.3), ("c", 0.9, 1.0)]
    _, psi = analyse(rows(cells), min_count=2)
    row = psi.iloc[0]
    assert np.isnan(row["psi"]) and np.isnan(row["slope"]) and pd.isna(row["trend"])
    assert row["bins_used"] == 1 and row["bins_excluded"] == 1
    assert row["reason"] == "usable bins: 1; PSI and the trend need 2"


def test_psi_columns_keep_their_types_in_parquet(tmp_path):
    from irflow import contracts

    _, psi = analyse(rows([("a", 0.0, 0.5), ("b", 1.0, 0.4)]), min_count=1)
    contracts.write_frame(psi, tmp_path / "psi.parquet")
    schema = pd.read_parquet(tmp_path / "psi.parquet").dtypes
    assert str(schema["reason"]) == "string" and str(schema["trend"]) == "string"


def test_all_zero_scores_have_no_psi():
    _, psi = analyse(rows([("a", 0.0, 0.0), ("b", 1.0, 0.0)]), min_count=1)
    assert np.isnan(psi.iloc[0]["psi"]) and psi.iloc[0]["trend"] == "flat"
    assert psi.iloc[0]["reason"] == "every usable bin scores 0"


def test_trend_calls_recency_and_flat_by_slope_size():
    rising = [(f"q{i}", i / 4, 0.4 + 0.1 * i) for i in range(5)]
    assert analyse(rows(rising), min_count=1)[1].iloc[0]["trend"] == "recency"
    # A change of 5% of the mean from start to end is within the default 10%.
    gentle = [(f"q{i}", i / 4, 0.5 + 0.00625 * i) for i in range(5)]
    _, psi = analyse(rows(gentle), min_count=1)
    assert psi.iloc[0]["slope"] > 0 and psi.iloc[0]["trend"] == "flat"
    _, psi = analyse(rows(gentle), min_count=1, flat_below=0.01)
    assert psi.iloc[0]["trend"] == "recency"


def test_buckets_and_systems_are_separate():
    short = rows([("a", 0.0, 1.0), ("b", 1.0, 0.5)], tokens=512)
    long = rows([("a", 0.0, 0.2), ("b", 1.0, 0.8)], tokens=2048)
    other = short.assign(system="t", value=[0.5, 0.5])
    _, psi = analyse(pd.concat([short, long, other]), min_count=1)
    calls = {(r.system, r.bucket): (r.psi, r.trend) for r in psi.itertuples()}
    assert calls == {
        ("s", "Q1"): (pytest.approx(0.5), "primacy"),
        ("s", "Q4"): (pytest.approx(0.75), "recency"),
        ("t", "Q1"): (0.0, "flat"),
    }


def test_span_positions_from_qrels_and_documents():
    documents = pd.DataFrame(
        {"doc_id": ["h1", "h2", "h3"], "text": ["a b c d e f g h i j", "x y", "p q"]}
    )
    qrels = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q2", "q2", "q3"],
            "doc_id": ["h1", "h2", "h2", "h3", "h3"],
            "relevance": [1, 0, 1, 1, 1],
            "span_start": pd.array([16, None, 0, 0, None], dtype="Int64"),
            "span_end": pd.array([19, None, 1, 1, None], dtype="Int64"),
        }
    )
    # q2 has two relevant documents and q3 no span: neither can be placed.
    positions = span_positions(qrels, documents, word_tokenizer())
    assert positions["query_id"].tolist() == ["q1"]
    assert positions["relpos"].tolist() == pytest.approx([17.5 / 19])
    assert positions["doc_tokens"].tolist() == [10]
