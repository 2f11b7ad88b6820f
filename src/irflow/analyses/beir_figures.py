"""beir_figures: BEIR's Figure 3 and Figure 4 (and Table 10's violins) for the config's own
systems, when ``beir_figures.baseline`` names one of them.

Figure 3, against the baseline. BEIR (shared/references/beir.txt line 116): "Figure 4 shows, on
how many datasets a respective model is able to perform better or worse than BM25." (the
figure it means is captioned Figure 3, beir.txt line 157: "Comparison of zero-shot neural
retrieval performances with BM25."). Per system, on each of the benchmark's datasets (a
group, such as CQADupStack, as one: its members' mean, as in Table 2), its ``metric`` against
the baseline's: the difference in the metric's units and relative to the baseline, and on how
many datasets it is better, worse or equal.

Figure 4, the lengths of the top-ranked documents. BEIR (beir.txt line 159): "Distribution plots
[22] for top-10 retrieved document lengths (in words)", and beir.txt line 152: "On TREC-COVID,
TAS-B retrieves documents with a median length of mere 10 words versus ANCE with 160 words."
Per dataset and system, each of the top ``depth`` documents of each query's run, with its
length in words; and their median, quartiles and mean. A document's words are the
whitespace-separated words of its title and text: the title counts, since TAS-B's short
documents are titles alone, beir.txt line 578: "TAS-B retrieves lots of top hit documents
containing only a title and an empty abstract". So counted, the shared copies' mean document
lengths are within 0.7% of Table 1's (SciFact 214.63 against 213.63, NFCorpus 233.77 against
232.26, ArguAna 167.17 against 166.80; beir.txt lines 73, 57 and 65); BEIR does not say how
it split words.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from irflow.analyses.plots import note, pyplot, save
from irflow.core import contracts
from irflow.core.config import register_check, system_kinds
from irflow.core.settings_types import BeirFigures
from irflow.evaluation.tables import AVERAGE, TableLayout, benchmark_table, metric_values

# The outcome of a system on a dataset against the baseline.
OUTCOMES = ("better", "worse", "equal")


@register_check
def beir_figures_problems(config: dict) -> list[str]:
    """The baseline is one of the config's systems: retrievers, fusions or rerankings."""
    baseline = BeirFigures.model_validate(config.get("beir_figures") or {}).baseline
    systems = sorted(system_kinds(config))
    if baseline is None or baseline in systems:
        return []
    return [
        f"config key 'beir_figures.baseline': {baseline!r} is not a system of this config; its "
        f"systems: {', '.join(systems)}"
    ]


# --- Figure 3 ----------------------------------------------------------------------------------


def versus_baseline(
    summary: pd.DataFrame, layout: dict, metric: str, baseline: str
) -> pd.DataFrame:
    """One row per (system, dataset column of the main table) but the baseline: ``value``,
    the baseline's ``baseline_value``, ``difference`` (value − baseline, in the metric's
    units), ``relative`` (difference / baseline) and ``outcome`` (better, worse, equal). A
    dataset where either lacks the metric is left out."""
    table = benchmark_table(metric_values(summary, metric), TableLayout(**layout), metric).frame
    table = table.drop(columns=AVERAGE)
    if baseline not in table.index:
        raise ValueError(f"the baseline {baseline!r} has no {metric} in the summary")
    rows = []
    for system in sorted(table.index.drop(baseline)):
        for dataset in table.columns:
            value, base = table.at[system, dataset], table.at[baseline, dataset]
            if pd.isna(value) or pd.isna(base):
                continue
            difference = float(value - base)
            outcome = "better" if difference > 0 else "worse" if difference < 0 else "equal"
            rows.append(
                {
                    "system": system,
                    "dataset": dataset,
                    "metric": metric,
                    "value": float(value),
                    "baseline": baseline,
                    "baseline_value": float(base),
                    "difference": difference,
                    "relative": difference / base if base else np.nan,
                    "outcome": outcome,
                }
            )
    return pd.DataFrame(rows, columns=VERSUS_COLUMNS)


VERSUS_COLUMNS = [
    "system",
    "dataset",
    "metric",
    "value",
    "baseline",
    "baseline_value",
    "difference",
    "relative",
    "outcome",
]


WINS_COLUMNS = [
    "system",
    *OUTCOMES,
    "datasets",
    "mean_difference",
    "median_difference",
    "mean_relative",
]


def wins(versus: pd.DataFrame) -> pd.DataFrame:
    """Per system: on how many datasets it is better, worse or equal to the baseline, and the
    mean and median difference and relative difference over them (Figure 3's bars)."""
    if versus.empty:
        return pd.DataFrame(columns=WINS_COLUMNS)
    counts = (
        versus.groupby("system")["outcome"]
        .value_counts()
        .unstack(fill_value=0)
        .reindex(columns=list(OUTCOMES), fill_value=0)
    )
    by_system = versus.groupby("system")
    frame = counts.assign(
        datasets=by_system.size(),
        mean_difference=by_system["difference"].mean(),
        median_difference=by_system["difference"].median(),
        mean_relative=by_system["relative"].mean(),
    )
    frame = frame.reset_index().astype({outcome: "int64" for outcome in OUTCOMES})
    frame = frame[WINS_COLUMNS].rename_axis(columns=None)
    return frame.sort_values(["better", "mean_difference"], ascending=False, kind="stable")


def plot_wins(table: pd.DataFrame, baseline: str, metric: str, path: Path) -> None:
    """Figure 3's bars: per system, the datasets where it beats the baseline (right) and where
    it does worse (left)."""
    if table.empty:
        note("Against the baseline", f"no system besides {baseline} to compare", path)
        return
    plt = pyplot()
    table = table.iloc[::-1]
    figure, axes = plt.subplots(figsize=(7, 0.45 * len(table) + 1.2))
    axes.barh(table["system"], table["better"], color="tab:green", label=f"better than {baseline}")
    axes.barh(table["system"], -table["worse"], color="tab:red", label=f"worse than {baseline}")
    axes.axvline(0, color="black", linewidth=0.8)
    axes.set_xlabel(f"datasets ({metric}; left: worse, right: better)")
    axes.set_title(f"Against {baseline} (BEIR Figure 3)")
    axes.legend(loc="lower right", fontsize="small")
    save(figure, path)


# --- Figure 4 ----------------------------------------------------------------------------------


def word_lengths(corpus: pd.DataFrame) -> pd.Series:
    """Each document's length in words (its title's and text's whitespace-separated words), by
    ``doc_id``."""
    titles = corpus["title"].fillna("").astype(str)
    texts = corpus["text"].fillna("").astype(str)
    lengths = (titles + " " + texts).str.split().str.len()
    return pd.Series(lengths.to_numpy(dtype="int64"), index=corpus["doc_id"], name="words")


def top_lengths(run: pd.DataFrame, lengths: pd.Series, depth: int) -> pd.DataFrame:
    """The run's hits ranked ``depth`` or better (``query_id``, ``rank``, ``doc_id``), each with
    its document's length in ``words``."""
    top = run.loc[run["rank"] <= depth, ["query_id", "rank", "doc_id"]]
    top = top.sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)
    return top.assign(words=lengths.reindex(top["doc_id"]).to_numpy())


def length_summary(hits: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and system: the top documents' count and the median, quartiles and mean of
    their lengths in words (BEIR's "median length of mere 10 words")."""
    grouped = hits.groupby(["dataset", "system"])["words"]
    return pd.DataFrame(
        {
            "hits": grouped.size(),
            "median_words": grouped.median(),
            "q1_words": grouped.quantile(0.25),
            "q3_words": grouped.quantile(0.75),
            "mean_words": grouped.mean(),
        }
    ).reset_index()


def plot_lengths(hits: pd.DataFrame, depth: int, path: Path) -> None:
    """Figure 4's distributions: per dataset, a violin of each system's top-``depth`` lengths
    (words, log scale), its median marked."""
    if hits.empty:
        note("Top document lengths", "no retrieved documents", path)
        return
    plt = pyplot()
    datasets = sorted(hits["dataset"].unique())
    systems = sorted(hits["system"].unique())
    figure, axes = plt.subplots(
        len(datasets), 1, figsize=(7, 2.2 * len(datasets) + 0.6), squeeze=False
    )
    for axis, dataset in zip(axes[:, 0], datasets):
        mine = hits[hits["dataset"] == dataset]
        data = [np.maximum(mine.loc[mine["system"] == s, "words"].to_numpy(), 1) for s in systems]
        shown = [i for i, values in enumerate(data) if len(values)]
        axis.violinplot([data[i] for i in shown], positions=shown, showmedians=True)
        axis.set_yscale("log")
        axis.set_xticks(range(len(systems)), systems, rotation=20, fontsize="small")
        axis.set_ylabel("words")
        axis.set_title(dataset, fontsize="medium")
    figure.suptitle(f"Lengths of the top-{depth} documents (BEIR Figure 4)")
    figure.tight_layout()
    save(figure, path)


def markdown(wins_table: pd.DataFrame, lengths: pd.DataFrame, baseline: str, metric: str) -> str:
    """Both tables as Markdown (results/beir_figures/beir_figures.md)."""
    lines = [
        f"## Against {baseline} ({metric}; BEIR Figure 3)",
        "",
        "| system | better | worse | equal | mean difference | mean relative |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {row.system} | {row.better} | {row.worse} | {row.equal} | "
        f"{row.mean_difference:+.4f} | {row.mean_relative:+.1%} |"
        for row in wins_table.itertuples()
    ]
    lines += [
        "",
        "## Lengths of the top documents, in words (BEIR Figure 4)",
        "",
        "| dataset | system | hits | median | q1 | q3 | mean |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {row.dataset} | {row.system} | {row.hits} | {row.median_words:g} | "
        f"{row.q1_words:g} | {row.q3_words:g} | {row.mean_words:.1f} |"
        for row in lengths.itertuples()
    ]
    return "\n".join(lines) + "\n"


def write_figures(
    summary: Path, runs: dict, corpora: dict, layout: dict, settings: dict, out
) -> None:
    """Every output of the beir_figures job (rules/analyses/beir_figures.smk): ``runs``, each
    (dataset, system)'s run file; ``corpora``, each dataset's filtered corpus; ``out``, the
    job's named outputs (``versus``, ``wins``, ``hits``, ``lengths``, ``markdown``,
    ``wins_plot``, ``lengths_plot``). ``settings``, the ``beir_figures`` block, is typed once,
    here (irflow.core.settings_types.BeirFigures)."""
    figures = BeirFigures.model_validate(settings)
    baseline, metric, depth = figures.baseline, figures.metric, figures.depth
    versus = versus_baseline(contracts.read_frame(summary), layout, metric, baseline)
    won = wins(versus)
    hits = []
    for dataset, corpus in corpora.items():
        lengths = word_lengths(contracts.read_frame(corpus))
        for (of, system), run in runs.items():
            if of == dataset:
                top = top_lengths(contracts.read_frame(run), lengths, depth)
                hits.append(top.assign(dataset=dataset, system=system))
    hits = pd.concat(hits, ignore_index=True)[HIT_COLUMNS]
    summarised = length_summary(hits)
    for name, frame in (("versus", versus), ("wins", won), ("hits", hits), ("lengths", summarised)):
        contracts.write_frame(frame, out[name])
    Path(out["markdown"]).write_text(markdown(won, summarised, baseline, metric))
    plot_wins(won, baseline, metric, Path(out["wins_plot"]))
    plot_lengths(hits, depth, Path(out["lengths_plot"]))


HIT_COLUMNS = ["dataset", "system", "query_id", "rank", "doc_id", "words"]
