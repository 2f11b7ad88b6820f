"""significance: are two systems' per-query scores really different, or is it noise?

Every pair of systems is compared per (dataset, metric) on the same queries, with a paired
t-test and a paired randomization (permutation) test, both two-sided and both from scipy.
One call is one kind of comparison (all pairs, or every system against a baseline); its
p-values are Holm–Bonferroni adjusted within each family, i.e. one dataset and one metric,
because that is the set of claims a reader of one results table makes at once.

``b_minus_a`` is ``mean_b - mean_a``: positive when system_b scores higher. Wherever a pair holds
the baseline, system_a is the baseline, in both kinds of comparison, so a system that beats it
shows a positive ``b_minus_a`` and a pair has the same sign in both (before, all pairs were in
name order, and the same pair showed opposite signs in the two).
``effect_size`` (Cohen's d_z) and ``t_statistic`` are of the paired differences b - a, so the
three have the same sign.

A randomization p-value cannot go below its floor: scipy counts the observed difference as one
of the permutations, so a difference that no sampled permutation reaches gets
2 / (permutations + 1), however small the true p is. Such a p is an upper bound and is shown
as "≤" (``randomization_p_holm_text``), with the floor; after Holm it is the floor times the
family size. When 2**queries is no more than ``permutations`` scipy enumerates every sign
flip instead: that p-value is exact and has no floor (NaN).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from irflow.core import contracts
from irflow.core.config import missing_key, register_check, system_kinds
from irflow.core.settings_types import Significance
from irflow.evaluation.measures import metric_name
from irflow.evaluation.tables import markdown_rows, signed

# The table's columns but its family (all pairs, or against the baseline), which the script adds.
COLUMNS = [name for name in contracts.SIGNIFICANCE.names if name != "family"]

# Upper bound on the elements of one resampling batch, so large query sets don't need GBs.
_BATCH_ELEMENTS = 10_000_000


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the input order.

    Controls the family-wise error rate without assuming independence, and is uniformly more
    powerful than Bonferroni. NaN p-values stay NaN and don't count towards the family size.
    """
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    valid = ~np.isnan(p)
    m = int(valid.sum())
    order = np.argsort(p[valid], kind="stable")
    stepped = p[valid][order] * (m - np.arange(m))
    stepped = np.minimum(np.maximum.accumulate(stepped), 1.0)
    unsorted = np.empty(m)
    unsorted[order] = stepped
    adjusted[valid] = unsorted
    return adjusted


def sampled_floor(permutations: int) -> float:
    """The smallest two-sided p of a randomization test on sampled permutations.

    scipy's p is 2 (permutations at least as extreme + 1) / (permutations + 1).
    """
    return min(1.0, 2 / (permutations + 1))


def randomization_floor(queries: int, permutations: int) -> float:
    """sampled_floor, or NaN when scipy runs the exact test instead (every one of the
    2**queries sign flips, when that is no more than ``permutations``): that p is exact."""
    if 2**queries <= permutations:
        return float("nan")
    return sampled_floor(permutations)


def _is_at_floor(p_value: float, floor: float) -> bool:
    # scipy divides (0 + 1) / (permutations + 1) before doubling: allow for the rounding.
    return bool(p_value <= floor * (1 + 1e-9))


def _p_text(p_value: float) -> str:
    return f"{p_value:.4f}" if p_value >= 0.0001 else f"{p_value:.1e}"


def holm_text(p_holm: float, at_floor: bool, permutations: int, family_size: int) -> str:
    """A Holm-adjusted randomization p as a reader should see it: with "≤" and the floor when
    it is only an upper bound, e.g. "≤ 0.0020 (floor 0.0010 for 2000 permutations, × 2
    comparisons by Holm)"."""
    if np.isnan(p_holm):
        return "–"
    if not at_floor:
        return _p_text(p_holm)
    floor = _p_text(sampled_floor(permutations))
    comparisons = f", × {family_size} comparisons by Holm" if family_size > 1 else ""
    return f"≤ {_p_text(p_holm)} (floor {floor} for {permutations} permutations{comparisons})"


def _mean_difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(a, axis=axis) - np.mean(b, axis=axis)


def _cohens_dz(diff: np.ndarray) -> float:
    """Mean paired difference in units of its spread.

    A constant non-zero shift has no spread: d_z is then +-inf, which is what it means.
    """
    spread = diff.std(ddof=1)
    if spread == 0:
        return float(np.copysign(np.inf, diff.mean()))
    return float(diff.mean() / spread)


def compare_pair(a: np.ndarray, b: np.ndarray, *, permutations: int, seed: int) -> dict:
    """Both tests on aligned per-query values; unadjusted, with the randomization p's floor.

    No difference at all is p = 1 (scipy's t-test gives NaN for zero variance); a single
    query that differs can't be tested and gives NaN.
    """
    diff = b - a
    n = len(diff)
    result = {
        "queries": n,
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "b_minus_a": float(b.mean() - a.mean()),
        "randomization_p_floor": randomization_floor(n, permutations),
    }
    if not diff.any():
        return result | {
            "t_statistic": 0.0,
            "t_p_value": 1.0,
            "randomization_p_value": 1.0,
            "effect_size": 0.0,
        }
    if n < 2:
        return result | dict.fromkeys(
            ["t_statistic", "t_p_value", "randomization_p_value", "effect_size"], float("nan")
        )
    from scipy import stats  # a job's library: the config check imports this module

    t = stats.ttest_rel(b, a)
    randomization = stats.permutation_test(
        (b, a),
        _mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=permutations,
        batch=max(1, _BATCH_ELEMENTS // n),
        alternative="two-sided",
        rng=seed,
    )
    return result | {
        "t_statistic": float(t.statistic),
        "t_p_value": float(t.pvalue),
        "randomization_p_value": float(randomization.pvalue),
        "effect_size": _cohens_dz(diff),
    }


def _pairs(systems: list[str], baseline: str | None, first: str | None) -> list[tuple[str, str]]:
    if baseline is None:
        return [(b, a) if b == first else (a, b) for a, b in combinations(sorted(systems), 2)]
    if baseline not in systems:
        return []
    return [(baseline, other) for other in sorted(systems) if other != baseline]


def paired_comparisons(
    per_query: pd.DataFrame,
    *,
    permutations: int = 10000,
    seed: int = 0,
    baseline: str | None = None,
    first: str | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """One row per (dataset, metric, system pair); see the module docstring for the columns.

    Pairs are every system_a < system_b, but with ``first`` as system_a in every pair it is
    in, or (baseline, other) when ``baseline`` is given (datasets the baseline was not run on
    are skipped). Queries are the union of the pair's
    query ids; a query one system lacks scores 0 for it, as score.py scores a query the run
    returned nothing for. ``significant`` is randomization_p_holm < alpha.
    ``randomization_p_at_floor``: the p is at its floor, so the true p is at most that.
    ``randomization_p_holm_at_floor``: the Holm p rests on such a p, so it is an upper bound.
    """
    if baseline is not None and baseline not in set(per_query["system"]):
        known = ", ".join(sorted(per_query["system"].unique()))
        raise ValueError(f"baseline system {baseline!r} has no scores; systems: {known}")
    rows = []
    for (dataset, metric), family in per_query.groupby(["dataset", "metric"], sort=True):
        table = family.pivot(index="query_id", columns="system", values="value")
        family_rows = []
        for system_a, system_b in _pairs(list(table.columns), baseline, first):
            pair = table[[system_a, system_b]].dropna(how="all").fillna(0.0)
            a = pair[system_a].to_numpy(dtype=float)
            b = pair[system_b].to_numpy(dtype=float)
            result = compare_pair(a, b, permutations=permutations, seed=seed)
            family_rows.append(
                {"dataset": dataset, "metric": metric, "system_a": system_a, "system_b": system_b}
                | result
            )
        if not family_rows:
            continue
        t_holm = holm([row["t_p_value"] for row in family_rows])
        p_values = [row["randomization_p_value"] for row in family_rows]
        floored = [
            _is_at_floor(row["randomization_p_value"], row["randomization_p_floor"])
            for row in family_rows
        ]
        randomization_holm = holm(p_values)
        # Holm is monotone in every p, and a floored p's true value lies in [0, floor]: an
        # adjusted p that drops when the floored p's are set to 0 is only an upper bound.
        lowest_holm = holm([0.0 if at_floor else p for p, at_floor in zip(p_values, floored)])
        family_size = int(np.count_nonzero(~np.isnan(p_values)))
        for row, t_adjusted, r_adjusted, at_floor, r_lowest in zip(
            family_rows, t_holm, randomization_holm, floored, lowest_holm
        ):
            row["t_p_holm"] = float(t_adjusted)
            row["randomization_p_holm"] = float(r_adjusted)
            row["randomization_p_at_floor"] = at_floor
            row["randomization_p_holm_at_floor"] = bool(r_adjusted > r_lowest)
            row["randomization_p_holm_text"] = holm_text(
                float(r_adjusted), row["randomization_p_holm_at_floor"], permutations, family_size
            )
            row["significant"] = bool(r_adjusted < alpha)
        rows.extend(family_rows)
    floats = dict.fromkeys(COLUMNS[5 : COLUMNS.index("randomization_p_floor") + 1], "float64")
    flags = dict.fromkeys(
        ["randomization_p_at_floor", "randomization_p_holm_at_floor", "significant"], "bool"
    )
    types = {"queries": "int64", "randomization_p_holm_text": "str"} | floats | flags
    return pd.DataFrame(rows, columns=COLUMNS).astype(types)


def every_comparison(per_query: pd.DataFrame, settings: dict) -> pd.DataFrame:
    """The significance table: for each of the ``metrics`` of ``settings`` (config
    ``significance``, typed once here: irflow.core.settings_types.Significance), all pairs,
    and each system against the baseline where there is one, each as its ``family``; the
    baseline is system_a in every pair that holds it, in both, so that a pair reads with one
    sign."""
    significance = Significance.model_validate(settings)
    per_query = per_query[per_query["metric"].isin(significance.metrics)]
    options = significance.model_dump(include={"permutations", "seed", "alpha"})
    baseline = significance.baseline
    everything = paired_comparisons(per_query, first=baseline, **options)
    families = [everything.assign(family="all pairs")]
    if baseline is not None:
        against = paired_comparisons(per_query, baseline=baseline, **options)
        families.append(against.assign(family=f"against {baseline}"))
    return pd.concat(families, ignore_index=True)


@register_check
def baseline_problems(config: dict) -> list[str]:
    """``significance.baseline``: a system the config defines, or null."""
    baseline, systems = config["significance"]["baseline"], system_kinds(config)
    if baseline is None or baseline in systems:
        return []
    return [missing_key("significance.baseline", baseline, "systems", systems)]


def against_baseline(
    comparisons: pd.DataFrame, metric: str, baseline: str | None, depth: int | None = None
) -> pd.DataFrame:
    """The table that answers "is A better than B?" for ``metric``: each system against
    ``baseline`` on each dataset (every pair where there is no baseline), its difference read
    so that a win is positive (system − baseline, ``b_minus_a``), the Holm-corrected
    randomization p as reported ("≤" at the floor) and whether it is significant."""
    family = "all pairs" if baseline is None else f"against {baseline}"
    rows = comparisons[(comparisons["family"] == family) & (comparisons["metric"] == metric)]
    rows = rows.sort_values(["system_b", "system_a", "dataset"])
    title = metric_name(metric, depth).title
    difference = f"{title} − {baseline}" if baseline else f"{title}: system − against"
    shown = pd.DataFrame(
        {
            "system": rows["system_b"],
            "against": rows["system_a"],
            "dataset": rows["dataset"],
            difference: rows["b_minus_a"].map(signed),
            "p (Holm)": rows["randomization_p_holm_text"],
            "significant": rows["significant"].map({True: "yes", False: "no"}),
        }
    )
    return (shown if baseline is None else shown.drop(columns="against")).reset_index(drop=True)


def _explanation(baseline: str | None, alpha: float) -> str:
    test = (
        "the paired randomization test's two-sided p after Holm's correction over the "
        f"{{}} on that dataset and measure, and whether it is below {alpha:g} (a p at the "
        "test's floor shows as ≤, docs/metrics.md). Every pair, with the t-test: "
        "results/significance.parquet (the database's significance view)."
    )
    if baseline is None:
        return (
            "Every pair of systems on each dataset: the difference system − against (a win of "
            f"the system is positive), {test.format('pairs')} Set significance.baseline to "
            "compare each system with one."
        )
    return (
        f"Each system against the baseline, {baseline}, on each dataset: its difference "
        f"from it (system − {baseline}: a win is positive), "
        f"{test.format(f'systems compared with {baseline}')}"
    )


def _section_title(baseline: str | None) -> str:
    return "Significance of every pair" if baseline is None else f"Against the baseline, {baseline}"


def markdown(
    comparisons: pd.DataFrame, baseline: str | None, alpha: float, depth: int | None = None
) -> str:
    """results.md's section: ``against_baseline`` for each metric tested."""
    if comparisons.empty:
        return ""
    lines = [f"## {_section_title(baseline)}", "", _explanation(baseline, alpha), ""]
    for metric in sorted(comparisons["metric"].unique()):
        table = against_baseline(comparisons, metric, baseline, depth)
        lines += [f"### {metric_name(metric, depth).label}", ""]
        lines += [*markdown_rows(table, list(table.columns[-3:-1])), ""]  # difference and p
    return "\n".join(lines) + "\n"


def html(
    comparisons: pd.DataFrame, baseline: str | None, alpha: float, depth: int | None = None
) -> str:
    """The report's table of the same rows as results.md's section."""
    if comparisons.empty:
        return ""
    parts = [f"<h3>{_section_title(baseline)}</h3><p>{_explanation(baseline, alpha)}</p>"]
    for metric in sorted(comparisons["metric"].unique()):
        table = against_baseline(comparisons, metric, baseline, depth)
        parts.append(f"<h4>{metric_name(metric, depth).label}</h4>")
        parts.append(table.to_html(index=False))
    return "".join(parts)
