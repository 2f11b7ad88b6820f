from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from irflow.evaluation.significance import COLUMNS, holm, paired_comparisons

PERMUTATIONS = 2000


def per_query_frame(systems: dict[str, list[float]], dataset="d1", metric="ndcg_cut_10"):
    """Per-query rows for systems scored on queries q0, q1, ... of one dataset and metric."""
    return pd.DataFrame(
        [
            (dataset, system, f"q{i}", metric, float(value))
            for system, values in systems.items()
            for i, value in enumerate(values)
        ],
        columns=["dataset", "system", "query_id", "metric", "value"],
    )


def noisy_pair(shift: float, queries: int = 50, seed: int = 1):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.2, 0.6, queries)
    b = a + shift + rng.normal(0, 0.1, queries)
    return a, b


def test_identical_runs_are_not_significant():
    a = np.random.default_rng(0).uniform(0, 1, 30)
    result = paired_comparisons(per_query_frame({"a": a, "b": a}), permutations=PERMUTATIONS)
    assert list(result.columns) == COLUMNS
    row = result.iloc[0]
    assert row["b_minus_a"] == 0
    assert row["t_statistic"] == 0
    assert row["t_p_value"] == 1.0
    assert row["randomization_p_value"] == 1.0
    assert row["t_p_holm"] == 1.0 and row["randomization_p_holm"] == 1.0
    assert row["effect_size"] == 0
    assert not row["significant"]


def test_a_win_by_system_b_reads_positive():
    """b scores higher: b_minus_a, the t statistic and d_z are all positive (before, the
    column was ``difference``, a − b, and a win read negative)."""
    a, b = noisy_pair(0.3)
    result = paired_comparisons(per_query_frame({"a": a, "b": b}), permutations=PERMUTATIONS)
    row = result.iloc[0]
    assert (row["system_a"], row["system_b"], row["queries"]) == ("a", "b", 50)
    assert row["b_minus_a"] == pytest.approx(b.mean() - a.mean())
    assert row["b_minus_a"] > 0.25 and row["effect_size"] > 0 and row["t_statistic"] > 0
    assert row["randomization_p_holm"] < 0.05
    assert row["significant"]
    diff = b - a
    assert row["effect_size"] == pytest.approx(diff.mean() / diff.std(ddof=1))


def test_a_win_over_the_baseline_reads_positive():
    """Against a baseline, system_a is the baseline: a system that beats it shows a positive
    b_minus_a, one that loses to it a negative one."""
    base, better = noisy_pair(0.1)
    worse = base - 0.1 + np.random.default_rng(3).normal(0, 0.02, len(base))
    frame = per_query_frame({"base": base, "better": better, "worse": worse})
    rows = paired_comparisons(frame, permutations=PERMUTATIONS, baseline="base")
    rows = rows.set_index("system_b")
    assert set(rows["system_a"]) == {"base"}
    assert rows.loc["better", "b_minus_a"] == pytest.approx(better.mean() - base.mean())
    assert rows.loc["better", "b_minus_a"] > 0 and rows.loc["better", "effect_size"] > 0
    assert rows.loc["worse", "b_minus_a"] == pytest.approx(worse.mean() - base.mean())
    assert rows.loc["worse", "b_minus_a"] < 0 and rows.loc["worse", "effect_size"] < 0
    assert rows.loc["worse", "t_statistic"] < 0


def test_t_test_matches_scipy():
    a, b = noisy_pair(0.02)
    row = paired_comparisons(per_query_frame({"a": a, "b": b}), permutations=PERMUTATIONS).iloc[0]
    expected = stats.ttest_rel(b, a)
    assert row["t_statistic"] == pytest.approx(expected.statistic)
    assert row["t_p_value"] == pytest.approx(expected.pvalue)


def test_randomization_p_value_is_seeded():
    a, b = noisy_pair(0.02)
    frame = per_query_frame({"a": a, "b": b})

    def p_value(seed):
        return paired_comparisons(frame, permutations=PERMUTATIONS, seed=seed).iloc[0][
            "randomization_p_value"
        ]

    assert p_value(3) == p_value(3)
    assert p_value(3) != p_value(4)
    # Both tests ask the same question; on 50 queries they roughly agree.
    t_p = paired_comparisons(frame, permutations=PERMUTATIONS).iloc[0]["t_p_value"]
    assert p_value(3) == pytest.approx(t_p, abs=0.05)


def test_missing_query_counts_as_zero():
    frame = pd.concat(
        [
            per_query_frame({"a": [1.0, 1.0, 1.0], "b": [1.0, 1.0]}),
            # Only system c has q9: not part of the a-b comparison at all.
            pd.DataFrame(
                [("d1", "c", "q9", "ndcg_cut_10", 0.5)],
                columns=["dataset", "system", "query_id", "metric", "value"],
            ),
        ]
    )
    result = paired_comparisons(frame, permutations=PERMUTATIONS).set_index(
        ["system_a", "system_b"]
    )
    row = result.loc[("a", "b")]
    assert row["queries"] == 3
    assert row["mean_b"] == pytest.approx(2 / 3)
    assert row["b_minus_a"] == pytest.approx(-1 / 3)
    assert result.loc[("a", "c"), "queries"] == 4


def test_holm_hand_worked():
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])


def test_holm_is_monotone_clipped_and_skips_nan():
    p = np.random.default_rng(0).uniform(0, 0.5, 20)
    adjusted = holm(p)
    order = np.argsort(p)
    assert np.all(np.diff(adjusted[order]) >= 0)
    assert np.all(adjusted >= p) and np.all(adjusted <= 1.0)
    assert holm([0.6, 0.7])[0] == 1.0
    np.testing.assert_allclose(holm([0.01, np.nan, 0.04]), [0.02, np.nan, 0.04])
    assert holm([]).shape == (0,)


def test_baseline_mode_only_compares_against_baseline():
    a, b = noisy_pair(0.1)
    c = b + 0.05 + np.random.default_rng(2).normal(0, 0.01, len(b))
    frame = per_query_frame({"a": a, "b": b, "c": c, "d": a})
    everything = paired_comparisons(frame, permutations=PERMUTATIONS)
    assert list(zip(everything["system_a"], everything["system_b"])) == [
        ("a", "b"),
        ("a", "c"),
        ("a", "d"),
        ("b", "c"),
        ("b", "d"),
        ("c", "d"),
    ]
    against_c = paired_comparisons(frame, permutations=PERMUTATIONS, baseline="c")
    assert list(zip(against_c["system_a"], against_c["system_b"])) == [
        ("c", "a"),
        ("c", "b"),
        ("c", "d"),
    ]
    assert against_c.iloc[1]["b_minus_a"] == pytest.approx(b.mean() - c.mean())
    with pytest.raises(ValueError, match="baseline system 'x'"):
        paired_comparisons(frame, baseline="x")


def test_holm_is_within_dataset_and_metric():
    a, b = noisy_pair(0.03, seed=5)
    c = b + np.random.default_rng(6).normal(0, 0.05, len(b))
    frame = pd.concat(
        [
            per_query_frame({"a": a, "b": b, "c": c}, dataset="d1", metric="m1"),
            per_query_frame({"a": a, "b": b}, dataset="d1", metric="m2"),
            per_query_frame({"a": a, "b": b}, dataset="d2", metric="m1"),
        ]
    )
    result = paired_comparisons(frame, permutations=PERMUTATIONS)
    for (dataset, metric), family in result.groupby(["dataset", "metric"]):
        assert len(family) == (3 if (dataset, metric) == ("d1", "m1") else 1)
        np.testing.assert_allclose(family["t_p_holm"], holm(family["t_p_value"]))
        np.testing.assert_allclose(
            family["randomization_p_holm"], holm(family["randomization_p_value"])
        )
    single = result[result["dataset"] == "d2"].iloc[0]
    assert single["t_p_holm"] == single["t_p_value"]
    d1 = result[(result["dataset"] == "d1") & (result["metric"] == "m1")]
    assert (d1["t_p_holm"] > d1["t_p_value"]).any()


def test_p_at_the_permutation_floor_is_reported_as_at_most_the_floor():
    """No permutation reaches a clear difference: scipy's p is then 2 / (permutations + 1)
    however small the true p, and after Holm that floor times the family size."""
    a, b = noisy_pair(0.3)
    noise = np.random.default_rng(7).normal(0, 0.1, len(a) // 2)
    c = a + np.concatenate([noise, -noise])  # no difference from a on average
    rows = paired_comparisons(
        per_query_frame({"a": a, "b": b, "c": c}), permutations=199, seed=0
    ).set_index(["system_a", "system_b"])
    assert set(rows.reset_index().columns) == set(COLUMNS)
    floor = 2 / 200
    assert rows["randomization_p_floor"].tolist() == pytest.approx([floor] * 3)
    for pair in [("a", "b"), ("b", "c")]:
        row = rows.loc[pair]
        assert row["randomization_p_value"] == pytest.approx(floor)
        assert row["randomization_p_at_floor"] and row["randomization_p_holm_at_floor"]
        assert row["randomization_p_holm"] == pytest.approx(3 * floor)
        assert row["randomization_p_holm_text"] == (
            "≤ 0.0300 (floor 0.0100 for 199 permutations, × 3 comparisons by Holm)"
        )
    unclear = rows.loc[("a", "c")]
    assert unclear["randomization_p_value"] > 0.05
    assert not unclear["randomization_p_at_floor"]
    assert not unclear["randomization_p_holm_at_floor"]
    assert unclear["randomization_p_holm_text"] == f"{unclear['randomization_p_holm']:.4f}"

    alone = paired_comparisons(per_query_frame({"a": a, "b": b}), permutations=1999).iloc[0]
    assert alone["randomization_p_holm"] == pytest.approx(2 / 2000)
    assert alone["randomization_p_holm_text"] == "≤ 0.0010 (floor 0.0010 for 1999 permutations)"


def test_exact_test_has_no_floor():
    """With 2**queries sign flips no more than the permutations, scipy enumerates them all:
    the p is exact (2 / 2**5 here), not a bound."""
    a = np.array([0.9, 0.8, 0.7, 0.95, 0.85])
    b = a - np.array([0.5, 0.4, 0.6, 0.45, 0.55])
    row = paired_comparisons(per_query_frame({"a": a, "b": b}), permutations=100).iloc[0]
    assert row["randomization_p_value"] == pytest.approx(2 / 2**5)
    assert np.isnan(row["randomization_p_floor"])
    assert not row["randomization_p_at_floor"] and not row["randomization_p_holm_at_floor"]
    assert row["randomization_p_holm_text"] == "0.0625"


def test_one_system_or_one_query_gives_no_test():
    one_system = paired_comparisons(per_query_frame({"a": [0.5, 0.7]}), permutations=100)
    assert one_system.empty and list(one_system.columns) == COLUMNS
    one_query = paired_comparisons(per_query_frame({"a": [0.5], "b": [0.7]}), permutations=100)
    row = one_query.iloc[0]
    assert row["queries"] == 1 and row["b_minus_a"] == pytest.approx(0.2)
    assert np.isnan(row["randomization_p_holm"]) and np.isnan(row["randomization_p_floor"])
    assert row["randomization_p_holm_text"] == "–" and not row["significant"]
