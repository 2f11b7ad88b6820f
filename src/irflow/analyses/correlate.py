"""correlate: do two evaluations rank the systems the same way?

Rank correlations (Spearman's rho, Kendall's tau-b, both from scipy) between system scores:
across datasets, across metrics, against published numbers (e.g. MTEB), and between groups
of datasets ("benchmarks"), plus AIR-Bench's check of how stable that agreement is when one
side is a subsample of its queries (named "bootstrap" in the config and the results). BEIR's
weighted Jaccard similarity of the corpora's unigram distributions (appendix F) says how alike
the datasets' vocabularies are, which helps to read the correlations.

Unless said otherwise a system's score over several datasets is the plain mean of its
per-dataset scores, and a system missing any of those datasets is left out of that
correlation rather than compared on a different set of datasets.
"""

from __future__ import annotations

import logging
import math
import re
import sys
import unicodedata
import warnings
from collections import Counter
from collections.abc import Iterable
from functools import cache
from itertools import permutations
from pathlib import Path

import numpy as np
import pandas as pd

from irflow.core.config import missing_key, register_check
from irflow.core.errors import ConfigError
from irflow.core.seeds import mean_sd, seed_list
from irflow.core.settings_types import Correlation
from irflow.evaluation.published import matches, reference_scores
from irflow.evaluation.tables import metric_values

BOOTSTRAP_COLUMNS = [
    "draw",
    "sampled_queries",
    "whole_datasets",
    "every_query",
    "spearman",
    "kendall",
    "seed",
]
PAIR_COLUMNS = ["left", "right", "systems", "spearman", "spearman_p", "kendall", "kendall_p"]
REFERENCE_COLUMNS = ["system", "benchmark", "score"]
MIN_SYSTEMS = 3

log = logging.getLogger(__name__)


def rank_correlation(a: pd.Series, b: pd.Series) -> dict:
    """Spearman and Kendall (tau-b) on the systems both Series score (index = system).

    Fewer than three systems, or a side that scores them all the same, gives NaN values.
    """
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    result = {
        "systems": len(both),
        "spearman": np.nan,
        "spearman_p": np.nan,
        "kendall": np.nan,
        "kendall_p": np.nan,
    }
    if len(both) < MIN_SYSTEMS:
        return result
    from scipy import stats  # a job's library: the config check imports this module

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        spearman = stats.spearmanr(both["a"], both["b"])
        kendall = stats.kendalltau(both["a"], both["b"], variant="b")
    result["spearman"] = float(spearman.statistic)
    result["spearman_p"] = float(spearman.pvalue)
    result["kendall"] = float(kendall.statistic)
    result["kendall_p"] = float(kendall.pvalue)
    return result


def _group_mean(table: pd.DataFrame, columns: list[str]) -> pd.Series:
    """Mean over ``columns``; NaN (so left out) for a system missing any of them."""
    return table[columns].mean(axis=1, skipna=False)


def _pairwise(table: pd.DataFrame) -> pd.DataFrame:
    """Every ordered pair of two columns, so it pivots into a symmetric matrix; no column with
    itself, which says nothing (1, or NaN under three systems)."""
    names = sorted(table.columns)
    rows = [
        {"left": left, "right": right} | rank_correlation(table[left], table[right])
        for left, right in permutations(names, 2)
    ]
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def between_datasets(summary: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Do the datasets agree on which systems are better (BEIR's question)?"""
    return _pairwise(metric_values(summary, metric))


def between_metrics(summary: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Do the metrics agree, on one dataset or on the mean over datasets?"""
    if dataset is not None:
        selected = summary[summary["dataset"] == dataset]
        if selected.empty:
            known = ", ".join(sorted(summary["dataset"].unique()))
            raise ValueError(f"dataset {dataset!r} has no scores; datasets: {known}")
        return _pairwise(selected.pivot(index="system", columns="metric", values="value"))
    per_dataset = summary.pivot(index=["system", "metric"], columns="dataset", values="value")
    means = per_dataset.mean(axis=1, skipna=False).unstack("metric")
    return _pairwise(means)


def load_reference(path: str | Path) -> pd.DataFrame:
    """Published scores (``system, benchmark, score``), checked so errors name the file line."""
    reference = pd.read_csv(path, dtype={"system": str, "benchmark": str})
    for column in REFERENCE_COLUMNS:
        if column not in reference.columns:
            found = ", ".join(map(str, reference.columns))
            raise ValueError(f"{path}: missing column {column!r} (found: {found})")
    reference = reference[REFERENCE_COLUMNS].copy()
    # Line numbers as an editor shows them: the header is line 1.
    lines = reference.index + 2
    duplicated = reference.duplicated(["system", "benchmark"], keep="first")
    if duplicated.any():
        line = lines[duplicated.to_numpy()][0]
        row = reference[duplicated].iloc[0]
        raise ValueError(
            f"{path}, line {line}: duplicate score for system {row['system']!r} "
            f"on benchmark {row['benchmark']!r}"
        )
    scores = pd.to_numeric(reference["score"], errors="coerce")
    bad = scores.isna()
    if bad.any():
        line = lines[bad.to_numpy()][0]
        raise ValueError(f"{path}, line {line}: score {reference['score'][bad].iloc[0]!r}")
    reference["score"] = scores.astype(float)
    return reference


def against_reference(summary: pd.DataFrame, reference: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Does irflow rank the systems as the published numbers do, per benchmark and on average?

    A benchmark is a dataset name. The ``(mean)`` row compares means over the benchmarks
    both sides have.
    """
    ours = metric_values(summary, metric)
    theirs = reference.pivot(index="system", columns="benchmark", values="score")
    common = sorted(set(ours.columns) & set(theirs.columns))
    if not common:
        raise ValueError(
            f"no benchmark of the reference ({', '.join(sorted(theirs.columns))}) "
            f"is an irflow dataset ({', '.join(sorted(ours.columns))})"
        )
    rows = [{"benchmark": name} | rank_correlation(ours[name], theirs[name]) for name in common]
    rows.append(
        {"benchmark": "(mean)"}
        | rank_correlation(_group_mean(ours, common), _group_mean(theirs, common))
    )
    return pd.DataFrame(rows, columns=["benchmark", *PAIR_COLUMNS[2:]])


def between_benchmarks(
    summary: pd.DataFrame, groups: dict[str, list[str]], metric: str
) -> pd.DataFrame:
    """Do groups of datasets agree? A system's group score is its mean over the group.

    Every ordered pair of two groups, like between_datasets.
    """
    table = metric_values(summary, metric)
    for name, datasets in groups.items():
        missing = sorted(set(datasets) - set(table.columns))
        if missing or not datasets:
            raise ValueError(
                f"benchmark {name!r}: no {metric} scores for datasets {missing or datasets}"
            )
    means = pd.DataFrame({name: _group_mean(table, list(ds)) for name, ds in groups.items()})
    return _pairwise(means)


def between_buckets(
    psi: pd.DataFrame,
    summary: pd.DataFrame,
    references: dict[str, list[str]],
    published: pd.Series | None = None,
) -> pd.DataFrame:
    """PosIR's Table 2: does each length bucket rank the systems as a short-document benchmark
    does? ``psi`` gives each (dataset, bucket)'s systems PosIR's score of it (``mean_ndcg``):
    for a length bucket the mean of its bins' means (nDCG@10(Qk)), for bucket ``all`` the mean
    over every scored query, those no span places included (the overall nDCG@10);
    ``references`` names, per psi dataset, the datasets of ``summary`` to compare it with (for
    a positionalize block, the dataset it was built from), each scored by the same metric as
    the buckets. ``published`` (``published_ranking``, named by its ``name``), each system's
    published score of that metric, is an outside ranking every bucket is also compared with,
    as PosIR compares each bucket with MMTEB: "We then compute Spearman correlations between
    MMTEB and the average performance of models within each length bucket" (posir.txt, line
    67). Rows: left "<dataset> <bucket>", right the reference."""
    rows = []
    for (dataset, bucket, metric), group in psi.groupby(["dataset", "bucket", "metric"]):
        buckets = group.set_index("system")["mean_ndcg"]
        scores = metric_values(summary, metric)
        for reference in references.get(dataset, []):
            if reference not in scores.columns:
                raise ValueError(f"reference {reference!r} of {dataset!r} has no {metric} scores")
            rows.append(
                {"left": f"{dataset} {bucket}", "right": reference, "metric": metric}
                | rank_correlation(buckets, scores[reference])
            )
        if published is not None:
            rows.append(
                {"left": f"{dataset} {bucket}", "right": published.name, "metric": metric}
                | rank_correlation(buckets, published)
            )
    return pd.DataFrame(rows, columns=[*PAIR_COLUMNS, "metric"])


def published_ranking(
    entries: list[dict], identities: dict[str, dict], datasets: list[str], metric: str
) -> pd.Series:
    """Each system's published ``metric`` averaged over ``datasets`` (entries of
    config/reference/published.yaml, matched to ``identities`` as the published table matches
    them: a reproduction's value where there is one, else the first listed; none scored on
    other judgements), whether or not the run has those datasets; named "published (<the
    datasets>)". NaN for a system that lacks any of them, so that a correlation leaves it out
    rather than rank it on fewer datasets. A dataset with no published ``metric`` at all is a
    ConfigError naming its key, ``position_analysis.published``."""
    rows = [
        {
            "system": system,
            "dataset": entry["dataset"],
            "metric": entry["metric"],
            "published": float(entry["value"]),
            "reproduction": entry["differs"] is None,
        }
        for entry in entries
        if entry["dataset"] in datasets and entry["metric"] == metric
        for system, identity in identities.items()
        if not entry.get("judgements") and matches(identity, entry["system"])
    ]
    known = {entry["dataset"] for entry in entries if entry["metric"] == metric}
    for at, dataset in enumerate(datasets):
        if dataset not in known:
            raise ConfigError(
                f"config key 'position_analysis.published.{at}': no published {metric} of "
                f"dataset {dataset!r} in config/reference/published.yaml"
            )
    columns = ["system", "dataset", "metric", "published", "reproduction"]
    scores = reference_scores(pd.DataFrame(rows, columns=columns), metric)
    table = scores.pivot(index="system", columns="benchmark", values="score")
    table = table.reindex(index=sorted(identities), columns=datasets)
    lacking = table.index[table.isna().any(axis=1)].tolist()
    if lacking:
        log.info("no published %s on every one of %s: %s", metric, datasets, lacking)
    return table.mean(axis=1, skipna=False).rename(f"published ({', '.join(datasets)})")


def bootstrap_correlation(
    per_query: pd.DataFrame,
    metric: str,
    left: list[str],
    right: list[str],
    *,
    resamples: int = 30,
    sample_size: int = 2000,
    seed: int | list[int] = 0,
) -> pd.DataFrame:
    """Would the left group rank systems as the right one does from a subsample of its queries?

    AIR-Bench's check, by subsampling (without replacement, so not a bootstrap in the strict
    sense). Each draw takes ``sample_size`` queries of every left dataset (all of them when it
    has fewer), scores each system on each dataset by its mean over the drawn queries (a query
    a system lacks scores 0), and averages over the datasets, as every group score in irflow
    is a macro mean: pooling the queries instead would let a large dataset outvote a small
    one. That ordering is correlated with the right group's full scores (the mean over its
    datasets of the per-dataset means).

    ``sampled_queries`` is the draw's total over the left datasets; ``whole_datasets`` counts
    those it holds whole (their means are the same in every draw). ``every_query`` is True
    when it holds them all: every draw is then the full group, all draws are identical, and a
    warning is logged. ``seed``: one seed, or a list of them (irflow.core.seeds), each making
    its ``resamples`` draws from a generator of its own, the rows keeping their ``seed``.
    """
    selected = per_query[per_query["metric"] == metric]
    for side, datasets in (("left", left), ("right", right)):
        missing = sorted(set(datasets) - set(selected["dataset"]))
        if missing or not datasets:
            raise ValueError(f"{side} group: no {metric} scores for datasets {missing or datasets}")
    right_table = (
        selected[selected["dataset"].isin(right)]
        .groupby(["system", "dataset"])["value"]
        .mean()
        .unstack("dataset")
    )
    right_scores = _group_mean(right_table, list(right))
    systems = sorted(selected["system"].unique())
    # Queries x systems per left dataset; a system with no scores on a dataset stays NaN, so
    # its macro mean is NaN and it is left out, as _group_mean leaves it out.
    left_values = [
        selected[selected["dataset"] == dataset]
        .pivot(index="query_id", columns="system", values="value")
        .sort_index()
        .fillna(0.0)
        .reindex(columns=systems)
        .to_numpy(dtype=float)
        for dataset in left
    ]
    takes = [min(sample_size, len(values)) for values in left_values]
    whole = [
        dataset for dataset, take, values in zip(left, takes, left_values) if take == len(values)
    ]
    if len(whole) == len(left):
        log.warning(
            "subsampling: sample_size %d holds every query of %s; all %d draws are identical",
            sample_size,
            ", ".join(left),
            resamples,
        )
    elif whole:
        log.warning(
            "subsampling: sample_size %d holds every query of %s; their means never vary",
            sample_size,
            ", ".join(whole),
        )
    rows = []
    for each in seed_list(seed):
        rng = np.random.default_rng(each)
        for draw in range(resamples):
            dataset_means = [
                values[rng.choice(len(values), size=take, replace=False)].mean(axis=0)
                for values, take in zip(left_values, takes)
            ]
            left_scores = pd.Series(np.mean(dataset_means, axis=0), index=systems)
            correlation = rank_correlation(left_scores, right_scores)
            rows.append(
                {
                    "draw": draw,
                    "sampled_queries": sum(takes),
                    "whole_datasets": len(whole),
                    "every_query": len(whole) == len(left),
                    "spearman": correlation["spearman"],
                    "kendall": correlation["kendall"],
                    "seed": each,
                }
            )
    return pd.DataFrame(rows, columns=BOOTSTRAP_COLUMNS)


def summarize_bootstrap(draws: pd.DataFrame) -> dict:
    """Spread of the bootstrap correlations: mean, std (ddof=1), min, 5th/95th percentile over
    every draw. Draws under several seeds also give, per correlation, the mean and standard
    deviation over the seeds of each seed's mean (``spearman_seeds_mean``, ``_seeds_sd``,
    irflow.core.seeds.mean_sd) and ``seeds``, how many."""
    summary: dict = {"draws": len(draws)}
    seeds = draws["seed"].nunique() if "seed" in draws else 1
    for column in ("spearman", "kendall"):
        values = draws[column].dropna()
        summary[f"{column}_mean"] = float(values.mean())
        summary[f"{column}_std"] = float(values.std(ddof=1))
        summary[f"{column}_min"] = float(values.min())
        summary[f"{column}_p5"] = float(values.quantile(0.05))
        summary[f"{column}_p95"] = float(values.quantile(0.95))
        if seeds > 1:
            means = draws.groupby("seed")[column].mean().tolist()
            summary[f"{column}_seeds_mean"], summary[f"{column}_seeds_sd"] = mean_sd(means)
            summary["seeds"] = seeds
    return summary


def weighted_jaccard(counts_a: Counter, counts_b: Counter) -> float:
    """BEIR (appendix F): sum of min over sum of max of the two unigram probabilities,
    J(S, T) = sum_k min(S_k, T_k) / sum_k max(S_k, T_k), the sum "over all unique words" k of
    the two datasets, S_k being word k's normalised frequency in S.

    Normalising first makes corpora of different sizes comparable. NaN if either is empty.
    """
    total_a, total_b = sum(counts_a.values()), sum(counts_b.values())
    if total_a <= 0 or total_b <= 0:
        return float("nan")
    smaller, larger = [], []
    for word in counts_a.keys() | counts_b.keys():
        p_a, p_b = counts_a.get(word, 0) / total_a, counts_b.get(word, 0) / total_b
        smaller.append(min(p_a, p_b))
        larger.append(max(p_a, p_b))
    return math.fsum(smaller) / math.fsum(larger)


@cache
def _token_pattern() -> re.Pattern:
    """``\\w`` plus combining marks, which Python's ``\\w`` lacks.

    Without the marks, vowelled Arabic (kasra, fatha, ...) or Devanagari vowel signs would
    split every word into letters.
    """
    marks = [
        code
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in ("Mn", "Mc", "Me")
    ]
    ranges, start = [], marks[0]
    for previous, code in zip(marks, [*marks[1:], None]):
        if code != previous + 1:
            ranges.append(f"{chr(start)}-{chr(previous)}" if previous > start else chr(start))
            start = code
    return re.compile(r"[\w" + "".join(ranges) + "]+")


def similarity_stopwords(words: str) -> frozenset[str]:
    """The words that ``correlation.similarity_words`` leaves out of the unigram counts.

    all_words (BEIR's, the default): none, since appendix F sums "over all unique words".
    without_english_stopwords (irflow's variant): bm25s' English list, the one BM25 drops, so
    that the similarity reads the content words (SciFact-NFCorpus 0.4525, against BEIR's 0.5507).
    """
    if words == "all_words":
        return frozenset()
    if words == "without_english_stopwords":
        from bm25s.stopwords import STOPWORDS_EN

        return frozenset(STOPWORDS_EN)
    raise ValueError(f"unknown similarity_words {words!r}")


def unigram_counts(texts: Iterable[str], stopwords: frozenset[str] = frozenset()) -> Counter:
    """Lowercased word tokens (any script) and how often they occur, stopwords left out."""
    pattern = _token_pattern()
    counts: Counter = Counter()
    for text in texts:
        counts.update(pattern.findall(text.lower()))
    for word in stopwords:
        counts.pop(word.lower(), None)
    return counts


def corpus_similarity(counts: dict[str, Counter]) -> pd.DataFrame:
    """Datasets x datasets weighted Jaccard similarity (symmetric, diagonal 1)."""
    names = sorted(counts)
    matrix = pd.DataFrame(1.0, index=names, columns=names)
    for i, left in enumerate(names):
        for right in names[i + 1 :]:
            similarity = weighted_jaccard(counts[left], counts[right])
            matrix.loc[left, right] = matrix.loc[right, left] = similarity
    return matrix


@register_check
def correlation_problems(config: dict) -> list[str]:
    """``correlation``: benchmarks of known datasets, a bootstrap between two of them."""
    problems = []
    correlation = Correlation.model_validate(config["correlation"])
    # Generated datasets and their quality-controlled copies are compared with real ones.
    comparable = set(config["datasets"]) | set(config["generate"])
    comparable |= set(config["quality_control"]["generated"])
    for group, datasets in correlation.benchmarks.items():
        for dataset in datasets.root:
            if dataset not in comparable:
                path = f"correlation.benchmarks.{group}"
                problems.append(missing_key(path, dataset, "datasets", comparable))
    if correlation.bootstrap is not None:
        bootstrap = correlation.bootstrap
        for side, group in (("left", bootstrap.left), ("right", bootstrap.right)):
            if group not in correlation.benchmarks:
                path = f"correlation.bootstrap.{side}"
                known = correlation.benchmarks
                problems.append(missing_key(path, group, "correlation.benchmarks", known))
    return problems
