"""plots: the figures of the report, each written as PNG and SVG so people can reuse them.

Every figure is always written, so the report's file list is fixed: when there is nothing to
draw (one system, no pair to test, fewer systems than a rank correlation needs, no bootstrap
configured) the figure says so in words instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from irflow.analyses.correlate import summarize_bootstrap
from irflow.analyses.position import OVERALL


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display on clusters and in CI), imported
    where a figure is drawn: the config check imports every module of irflow.analyses at each
    dry run (irflow.workflow.config), which should not pay for matplotlib or scipy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


def save(figure, path: Path) -> None:
    """Write ``path`` (PNG) and the same figure as SVG beside it."""
    plt = pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    figure.savefig(path.with_suffix(".svg"), bbox_inches="tight")
    plt.close(figure)


def note(title: str, message: str, path: Path) -> None:
    """A figure that says in words why there is nothing to draw."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 2.5))
    axis.set_axis_off()
    axis.set_title(title)
    axis.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=11)
    save(figure, path)


def confidence_intervals(per_query: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Mean and t-interval of each (dataset, system) over its queries."""
    from scipy import stats  # a job's library: see pyplot

    rows = []
    for (dataset, system), values in per_query.groupby(["dataset", "system"])["value"]:
        mean, sem = values.mean(), stats.sem(values) if len(values) > 1 else 0.0
        half = sem * stats.t.ppf((1 + level) / 2, len(values) - 1) if sem > 0 else 0.0
        rows.append(
            {
                "dataset": dataset,
                "system": system,
                "mean": mean,
                "low": mean - half,
                "high": mean + half,
            }
        )
    return pd.DataFrame(rows)


def bar_charts(per_query: pd.DataFrame, metric: str, path: Path) -> None:
    """One panel per dataset: each system's mean with its 95% confidence interval."""
    plt = pyplot()
    intervals = confidence_intervals(per_query[per_query["metric"] == metric])
    if intervals.empty:
        note(f"{metric} per system", f"no per-query scores for {metric}", path)
        return
    datasets = sorted(intervals["dataset"].unique())
    systems = sorted(intervals["system"].unique())
    figure, axes = plt.subplots(
        1,
        len(datasets),
        figsize=(2 + 1.2 * len(systems) * len(datasets), 4),
        squeeze=False,
        sharey=True,
    )
    colors = plt.cm.tab10(np.arange(len(systems)) % 10)
    for axis, dataset in zip(axes[0], datasets):
        rows = intervals[intervals["dataset"] == dataset].set_index("system").reindex(systems)
        errors = [rows["mean"] - rows["low"], rows["high"] - rows["mean"]]
        axis.bar(range(len(systems)), rows["mean"], yerr=errors, color=colors, capsize=3)
        axis.set_xticks(range(len(systems)), systems, rotation=45, ha="right")
        axis.set_title(dataset)
    axes[0][0].set_ylabel(f"{metric} (mean, 95% CI)")
    save(figure, path)


def _heatmap(axis, values: pd.DataFrame, labels: pd.DataFrame | None, vmin, vmax, cmap):
    numbers = values.to_numpy(dtype=float)
    image = axis.imshow(numbers, cmap=cmap, vmin=vmin, vmax=vmax)
    axis.set_xticks(range(values.shape[1]), values.columns, rotation=45, ha="right")
    axis.set_yticks(range(values.shape[0]), values.index)
    for (i, j), value in np.ndenumerate(numbers):
        text = (
            labels.iat[i, j] if labels is not None else ("" if np.isnan(value) else f"{value:.2f}")
        )
        axis.text(j, i, text, ha="center", va="center", fontsize=8)
    return image


def matrix(
    values: pd.DataFrame,
    title: str,
    path: Path,
    *,
    vmin: float = -1.0,
    vmax: float = 1.0,
    cmap: str = "RdBu",
    empty: str = "no values",
) -> None:
    """A heatmap of a table, each cell annotated with its value; ``empty`` says why when the
    table holds no number at all."""
    plt = pyplot()
    if not np.isfinite(values.to_numpy(dtype=float)).any():
        note(title, empty, path)
        return
    size = max(3.0, 0.7 * max(values.shape) + 2)
    figure, axis = plt.subplots(figsize=(size, size * 0.85))
    figure.colorbar(_heatmap(axis, values, None, vmin, vmax, cmap), ax=axis, shrink=0.8)
    axis.set_title(title)
    save(figure, path)


def row_minus_column(
    comparisons: pd.DataFrame, systems: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One dataset's comparisons as a systems x systems matrix of row − column (each pair's
    b_minus_a, negated in system_a's row), and its labels with a star where significant."""
    values = pd.DataFrame(np.nan, index=systems, columns=systems)
    labels = pd.DataFrame("", index=systems, columns=systems)
    for row in comparisons.itertuples():
        star = "*" if row.significant else ""
        for first, second, difference in (
            (row.system_b, row.system_a, row.b_minus_a),
            (row.system_a, row.system_b, -row.b_minus_a),
        ):
            values.loc[first, second] = difference
            labels.loc[first, second] = f"{difference:+.3f}{star}"
    return values, labels


def significance_matrices(comparisons: pd.DataFrame, metric: str, path: Path) -> None:
    """Per dataset, the difference row − column; a star where it is significant."""
    plt = pyplot()
    rows = comparisons[(comparisons["metric"] == metric) & (comparisons["family"] == "all pairs")]
    if rows.empty:
        note(
            f"Significance of differences in {metric}",
            "nothing to compare: no dataset has two systems",
            path,
        )
        return
    datasets = sorted(rows["dataset"].unique())
    systems = sorted(set(rows["system_a"]) | set(rows["system_b"]))
    size = 0.7 * len(systems) + 2
    figure, axes = plt.subplots(
        1, len(datasets), figsize=(size * len(datasets), size), squeeze=False
    )
    limit = max(rows["b_minus_a"].abs().max(), 1e-9)
    for axis, dataset in zip(axes[0], datasets):
        values, labels = row_minus_column(rows[rows["dataset"] == dataset], systems)
        image = _heatmap(axis, values, labels, -limit, limit, "RdBu")
        axis.set_title(dataset)
        axis.tick_params(axis="y", labelleft=axis is axes[0][0])
    figure.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label=f"{metric}: row − column")
    save(figure, path)


def latency_quality(points: pd.DataFrame, metric: str, path: Path) -> None:
    """Median query latency against quality: colour is the system, marker the dataset."""
    plt = pyplot()
    from matplotlib.lines import Line2D

    points = points.dropna(subset=["latency_median_ms", "value"])
    if points.empty:
        note(f"Latency and {metric}", "no system has both a latency and a score", path)
        return
    figure, axis = plt.subplots(figsize=(8, 5))
    systems, datasets = sorted(points["system"].unique()), sorted(points["dataset"].unique())
    colors = dict(zip(systems, plt.cm.tab10(np.arange(len(systems)) % 10)))
    # Markers repeat past ten datasets (position variants come in dozens) rather than fail.
    markers = {d: "osD^vP*Xph"[i % 10] for i, d in enumerate(datasets)}
    for row in points.itertuples():
        axis.scatter(
            row.latency_median_ms,
            row.value,
            color=colors[row.system],
            marker=markers[row.dataset],
            s=40,
        )
    handles = [Line2D([], [], color=colors[s], marker="o", ls="", label=s) for s in systems]
    handles += [Line2D([], [], color="gray", marker=markers[d], ls="", label=d) for d in datasets]
    axis.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    axis.set_xscale("log")
    axis.set_xlabel("median latency per query (ms, log scale)")
    axis.set_ylabel(metric)
    save(figure, path)


def bootstrap_histogram(draws: pd.DataFrame, path: Path, full: float = np.nan) -> None:
    """The subsampling draws' Spearman correlations, with their mean and 5th-95th percentiles,
    and ``full``, the correlation on every query, when given."""
    plt = pyplot()
    title = "Subsampling: Spearman correlation of system orderings"
    if draws.empty:
        note(title, "not configured (correlation.bootstrap)", path)
        return
    left, right = draws["left"].iloc[0], draws["right"].iloc[0]
    spearman = draws["spearman"].dropna()
    if spearman.empty:
        note(title, f"{left} vs {right}: too few systems for a rank correlation", path)
        return
    spread = summarize_bootstrap(draws)
    low, high = spread["spearman_p5"], spread["spearman_p95"]
    figure, axis = plt.subplots(figsize=(7, 4))
    # Bins centred on multiples of 0.05, so the common values (1.0, 0.8, 0.5) sit mid-bin.
    axis.hist(spearman, bins=41, range=(-1.025, 1.025), color="tab:blue", edgecolor="white")
    mean = spread["spearman_mean"]
    axis.axvline(mean, color="black", label=f"mean {mean:.3f}")
    if not np.isnan(full):
        axis.axvline(full, color="tab:red", linestyle="--", label=f"every query {full:.3f}")
    axis.axvspan(
        low, high, color="gray", alpha=0.2, label=f"5th-95th percentile [{low:.3f}, {high:.3f}]"
    )
    axis.set_xlim(-1.05, 1.05)
    axis.set_xlabel(f"Spearman: {left} (subsampled) vs {right}")
    axis.set_ylabel("draws")
    axis.legend(fontsize=8, loc="upper left")
    if draws["every_query"].all():
        axis.set_title(
            f"{title}\nevery draw holds every query of {left}: the draws are identical", fontsize=10
        )
    elif "seeds" in spread:
        # irflow.core.seeds: the mean ± sd over the seeds of each seed's mean.
        over = f"{spread['spearman_seeds_mean']:.3f} ± {spread['spearman_seeds_sd']:.3f}"
        axis.set_title(
            f"{title}\n{len(draws)} draws, {spread['seeds']} seeds: {over} over the seeds",
            fontsize=10,
        )
    else:
        axis.set_title(f"{title}\n{len(draws)} draws", fontsize=10)
    save(figure, path)


def significance_table(comparisons: pd.DataFrame) -> str:
    """HTML table of the comparisons, each pair once: b − a (positive when system b scores
    higher; a is the baseline wherever the pair holds it), d_z, and per family (all pairs,
    against the baseline) the randomization p after Holm as reported ("≤" at the floor) and
    whether it is significant; "–" for a family the pair is not in."""
    if comparisons.empty:
        return "<p>Nothing to compare: no dataset has two systems.</p>"
    pair = ["dataset", "metric", "system_a", "system_b"]
    table = comparisons.drop_duplicates(pair)[[*pair, "b_minus_a", "effect_size"]]
    for family, rows in comparisons.groupby("family", sort=True):
        tested = rows[[*pair, "randomization_p_holm_text", "significant"]].rename(
            columns={
                "randomization_p_holm_text": f"randomization p (Holm, {family})",
                "significant": f"significant ({family})",
            }
        )
        table = table.merge(tested, on=pair, how="left")
    columns = {
        "system_a": "system a",
        "system_b": "system b",
        "b_minus_a": "b − a",
        "effect_size": "d_z",
    }
    return (
        table.sort_values(pair)
        .rename(columns=columns)
        .to_html(index=False, float_format="{:+.4f}".format, na_rep="–")
    )


def position_curves(bins: pd.DataFrame, path: Path) -> None:
    """PosIR's Fig. 3: mean score against the relevant text's relative position, one line per
    system, one panel per dataset and length bucket; bins left out of PSI drawn hollow."""
    plt = pyplot()
    title = "Score by position of the relevant text"
    used = bins[bins["queries"] > 0]
    if used.empty:
        note(title, "no query with a single relevant span to place", path)
        return
    panels = list(used.groupby(["dataset", "bucket"]).groups)
    figure, axes = plt.subplots(
        1, len(panels), figsize=(4.5 * len(panels), 3.8), sharey=True, squeeze=False
    )
    metric = used["metric"].iloc[0]
    for axis, (dataset, bucket) in zip(axes[0], panels):
        panel = used[(used["dataset"] == dataset) & (used["bucket"] == bucket)]
        for system, line in panel.groupby("system"):
            centre = (line["bin_start"] + line["bin_end"]) / 2
            drawn = axis.plot(centre, line["mean_ndcg"], marker="o", label=system)[0]
            hollow = line["excluded"].to_numpy()
            axis.plot(
                centre[hollow], line["mean_ndcg"][hollow], "o", mfc="white", color=drawn.get_color()
            )
        queries = panel.groupby("system")["queries"].sum().max()
        axis.set_title(f"{dataset} {bucket} ({queries} queries)", fontsize=10)
        axis.set_xlim(-0.02, 1.02)
        axis.set_xlabel("relative position of the relevant text")
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"mean {metric}")
    axes[0][-1].legend(fontsize=8, loc="best")
    figure.suptitle(title)
    save(figure, path)


def psi_table(psi: pd.DataFrame) -> str:
    """HTML table: per dataset, length bucket and system, PSI with its bootstrap interval, the
    bucket's scores and trend, so that systems (one model read two ways, say) sit side by side;
    each dataset's buckets pooled (PosIR's overall PSI) close its rows. PSI over every non-empty
    bin, PosIR's, is a column of its own only where ``min_count`` made it differ."""
    if psi.empty:
        return "<p>No position analysis: no query with a single relevant span.</p>"
    columns = {
        "dataset": "dataset",
        "bucket": "bucket",
        "system": "system",
        "queries": "queries",
        "mean_ndcg": "PosIR's score (bins' mean; all: every query)",
        "mean_ndcg_queries": "mean score (over queries)",
        "psi": "PSI",
        "psi_low": "PSI interval low",
        "psi_high": "PSI interval high",
        "psi_every_bin": "PSI (every non-empty bin)",
        "trend": "trend",
        "bins_used": "bins used",
        "bins_excluded": "bins excluded",
        "reason": "note",
    }
    if psi["psi"].equals(psi["psi_every_bin"]):
        del columns["psi_every_bin"]
    overall = psi["bucket"] == OVERALL
    # Q1, Q2, ..., Q10 in numeric order, then the pooled row.
    order = psi["bucket"].str.lstrip("Q").where(~overall, np.inf).astype(float)
    table = psi.assign(_order=order).sort_values(["dataset", "_order", "system"])[list(columns)]
    table = table.astype({"bucket": object, "trend": object, "reason": object})
    table.loc[table["bucket"] == OVERALL, "bucket"] = f"{OVERALL} (buckets pooled)"
    table = table.fillna({"trend": "–", "reason": ""})
    return table.rename(columns=columns).to_html(
        index=False, float_format="{:.4f}".format, na_rep="–"
    )
