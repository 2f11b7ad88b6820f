"""position: does a system's score depend on where its relevant text sits in the document?

The analysis of PosIR (§4.1, §5.2). Each query with one relevant judgement that carries a span is
placed by the span's relative position and its document's length; per dataset, system and
length bucket, the mean score of each position bin gives the Position Sensitivity Index
PSI = 1 − min / max over the bins, and the trend of score over position.

Conventions, those of PosIR's analysis script (ndcg_PSI_analysis.py):
- relative position = span centre / the document's length in characters, clipped to [0, 1]
  ("position": sum(pos_char_span) / 2, "total_length": pos_char_length; position /
  total_length, clipped). The length is the collection's where it gives one (the qrels'
  ``doc_chars``, PosIR's pos_char_length: a translated text need not have the length its span
  was counted on), else the text's; the queries where the two disagree are counted in the log;
- length buckets Q1, Q2, ... by the relevant document's token count (the qrels' ``doc_tokens``
  where the collection gives it, as PosIR's pos_token_length), closed on the right, the
  last one open: (0, 512], (512, 1024], (1024, 1536], (1536, ∞) for ``bucket_tokens`` 512 and
  4 ``buckets``;
- ``bins`` equal-width position bins, closed on the right as ``pd.cut`` makes them, the first
  one holding 0 as well: [0, .05], (.05, .1], ..., (.95, 1], so the end of a document, 1.0,
  falls into the last bin;
- PSI = 1 − min / max over the bins of a bucket that have queries (``min_count`` 1, the
  default); nDCG@10 by default;
- a bucket's score (``mean_ndcg``) is the plain mean of its non-empty bins' means, each bin
  weighing the same however many queries it holds (PosIR's nDCG@10(Qk): np.mean of the bin
  means); ``mean_ndcg_queries`` is the mean over the bucket's queries instead (a named other,
  not PosIR's bucket score);
- an overall PSI per dataset and system (bucket ``all``): every placed query binned by
  position alone, the buckets pooled. Its ``mean_ndcg`` is PosIR's overall nDCG@10 (Table 2),
  the mean over every scored query, those that no span places included (PosIR:
  np.mean([s["score"] for s in all_items]), taken before it drops unlocated spans).
Additions:
- with ``min_count`` above 1 a bin with fewer queries is left out of ``psi`` and the trend, and
  flagged; ``psi_every_bin`` keeps PosIR's value beside it. A bucket with fewer than two usable
  bins has no PSI, and the table says why;
- ``psi_low``, ``psi_high``: a percentile bootstrap interval of PSI (scipy), drawing queries
  with replacement, all rows of a query together (in variants one query sits at every
  position). A max and a min over noisy bin means: PSI of a small bucket is biased upwards;
- the trend: the slope of an ordinary least-squares line (scipy's linregress) through the
  usable bins' mean scores against their centres, as PosIR fits it, is the fitted change in
  score from the start of a document to its end. It is "flat" when that change is at most
  ``flat_below`` times the mean of the usable bins (a line drawn through noise), otherwise
  "primacy" when the score falls towards the end and "recency" when it rises.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from irflow.core.config import missing_key, register_check
from irflow.core.settings_types import Bootstrap1, PositionAnalysis
from irflow.data.tokens import encode, tokenizer_source
from irflow.evaluation.score import uncomputed_metrics

log = logging.getLogger(__name__)

GROUP = ["dataset", "system", "bucket"]


def relative_position(span_start, span_end, document_chars) -> np.ndarray:
    """Span centre over document length in characters, clipped to [0, 1]; NaN for an empty
    document (PosIR drops a total_length of 0)."""
    centre = (np.asarray(span_start, dtype=float) + np.asarray(span_end, dtype=float)) / 2
    chars = np.asarray(document_chars, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chars > 0, np.clip(centre / chars, 0, 1), np.nan)


def judged_positions(judgements: pd.DataFrame, texts: pd.Series) -> np.ndarray:
    """The relative position of each judgement's span (``texts``: the text of each doc_id):
    over the collection's length of the document (``doc_chars``) where the qrels give one, as
    PosIR divides by pos_char_length, else over the text's length. Where the two disagree (a
    translation, whose span counts its original) the count is logged."""
    own = judgements["doc_id"].map(texts.str.len()).astype(float)
    given = judgements.get("doc_chars", pd.Series(np.nan, judgements.index)).astype(float)
    differ = int((given.notna() & (given != own)).sum())
    if differ:
        log.warning(
            "%d of %d placed queries: the collection's document length in characters "
            "(doc_chars, PosIR's pos_char_length) differs from the text's; their positions "
            "divide by the collection's, as PosIR's analysis does",
            differ,
            len(judgements),
        )
    return relative_position(judgements["span_start"], judgements["span_end"], given.fillna(own))


def pooled_group(dataset: str, analysis: PositionAnalysis) -> str | None:
    """The ``pool`` of ``position_analysis`` that ``dataset`` is binned in (PosIR pools a
    language's domain datasets before binning), or None."""
    pools = [name for name, members in analysis.pool.items() if dataset in members.root]
    return pools[0] if pools else None


def bucket_labels(buckets: int) -> list[str]:
    return [f"Q{i}" for i in range(1, buckets + 1)]


def length_bucket(tokens, bucket_tokens: int = 512, buckets: int = 4) -> pd.Categorical:
    """Q1 for (0, bucket_tokens] tokens, Q2 for the next width, ...; the last bucket is open."""
    edges = [0, *(bucket_tokens * i for i in range(1, buckets)), np.inf]
    return pd.cut(np.asarray(tokens), edges, labels=bucket_labels(buckets), right=True)


def position_bin(relpos, bins: int = 20) -> np.ndarray:
    """The bin index (0 to bins − 1) of each relative position; NaN outside [0, 1]."""
    edges = np.linspace(0, 1, bins + 1)
    return pd.cut(np.asarray(relpos), edges, labels=False, include_lowest=True, right=True)


def span_positions(qrels: pd.DataFrame, documents: pd.DataFrame, tokenizer) -> pd.DataFrame:
    """query_id, relpos, doc_tokens for each query with exactly one relevant judgement, when
    that judgement has a span; ``documents`` (doc_id, text) holds at least those documents.

    The span counts characters of the document's text, as the contracts say, or of the text of
    ``doc_chars`` characters that the collection names (``judged_positions``). The length in
    tokens is the qrels' ``doc_tokens`` where the collection gives it (PosIR's
    pos_token_length, the English original's), else ``tokenizer``'s count of the text.
    """
    relevant = qrels[qrels["relevance"] > 0]
    single = relevant[~relevant["query_id"].duplicated(keep=False)]
    single = single.dropna(subset=["span_start", "span_end"])
    texts = documents.drop_duplicates("doc_id").set_index("doc_id")["text"]
    single = single[single["doc_id"].isin(texts.index)]
    given = single["doc_tokens"] if "doc_tokens" in single else pd.Series(np.nan, single.index)
    to_count = texts[texts.index.isin(single.loc[given.isna(), "doc_id"])]
    ids = encode(tokenizer, to_count.tolist())["input_ids"] if len(to_count) else []
    counted = pd.Series([len(i) for i in ids], index=to_count.index, dtype=float)
    if given.notna().any():
        log.info(
            "%d of %d documents' token lengths as the collection gives them (doc_tokens)",
            given.notna().sum(),
            len(given),
        )
    return pd.DataFrame(
        {
            "query_id": single["query_id"].to_numpy(),
            "relpos": judged_positions(single, texts),
            "doc_tokens": given.fillna(single["doc_id"].map(counted)).to_numpy(),
        }
    )


def _psi(means: np.ndarray, counts: np.ndarray, min_count: int) -> np.ndarray:
    """PSI over the last axis: 1 − min / max over the bins with at least ``min_count`` queries;
    NaN with fewer than two such bins or when they all score 0."""
    usable = counts >= min_count
    top = np.where(usable, means, -np.inf).max(axis=-1)
    low = np.where(usable, means, np.inf).min(axis=-1)
    enough = (usable.sum(axis=-1) >= 2) & (top > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(enough, 1 - low / top, np.nan)


def _psi_interval(
    group: pd.DataFrame, bins: int, min_count: int, interval: Bootstrap1
) -> tuple[float, float]:
    """A percentile bootstrap interval of PSI, resampling queries (all of a query's rows go
    together: a query placed at several positions is one draw)."""
    codes, _ = pd.factorize(group["query_id"])
    sums = np.zeros((codes.max() + 1, bins))
    counts = np.zeros_like(sums)
    np.add.at(sums, (codes, group["bin"].to_numpy()), group["value"].to_numpy())
    np.add.at(counts, (codes, group["bin"].to_numpy()), 1)

    def statistic(drawn, axis=-1):
        total, n = sums[drawn].sum(axis=-2), counts[drawn].sum(axis=-2)
        with np.errstate(divide="ignore", invalid="ignore"):
            return _psi(total / n, n, min_count)

    if len(sums) < 2:
        return np.nan, np.nan
    # Imported here: every Snakemake run imports this module (irflow.workflow.config), and
    # scipy.stats alone takes half a second to import.
    from scipy import stats

    result = stats.bootstrap(
        (np.arange(len(sums)),),
        statistic,
        vectorized=True,
        n_resamples=interval.resamples,
        confidence_level=interval.confidence,
        method="percentile",
        batch=100,
        rng=np.random.default_rng(interval.seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _trend(usable: pd.DataFrame, mean: float, flat_below: float) -> tuple[str | None, float]:
    """The fitted slope through the usable bins' means and what it says."""
    if len(usable) < 2:
        return None, np.nan
    from scipy import stats  # imported here: see _psi_interval

    centres = (usable["bin_start"] + usable["bin_end"]).to_numpy() / 2
    slope = stats.linregress(centres, usable["mean_ndcg"].to_numpy()).slope
    if abs(slope) <= flat_below * mean:
        return "flat", slope
    return ("primacy" if slope < 0 else "recency"), slope


def _bucket_summary(
    bucket: pd.DataFrame,
    rows: pd.DataFrame,
    min_count: int,
    flat_below: float,
    interval: Bootstrap1,
) -> dict:
    """PSI (with ``min_count`` and over every non-empty bin), its interval, the bucket's mean
    scores, slope and trend, or why there is no PSI."""
    filled = bucket[bucket["queries"] > 0]
    usable = bucket[bucket["queries"] >= min_count]
    means, counts = bucket["mean_ndcg"].to_numpy(), bucket["queries"].to_numpy()
    psi = float(_psi(np.nan_to_num(means), counts, min_count))
    reason = None
    if len(usable) < 2:
        reason = f"usable bins: {len(usable)}; PSI and the trend need 2"
    elif usable["mean_ndcg"].max() == 0:
        reason = "every usable bin scores 0"
    # PosIR's bucket score: the plain mean of its bin means, each bin weighing the same.
    mean = float(filled["mean_ndcg"].mean())
    trend, slope = _trend(usable, usable["mean_ndcg"].mean(), flat_below)
    low = high = np.nan
    if not np.isnan(psi) and interval.resamples > 0:
        low, high = _psi_interval(rows, len(bucket), min_count, interval)
    return {
        "mean_ndcg": mean,
        "mean_ndcg_queries": float(rows["value"].mean()),
        "psi": psi,
        "psi_low": low,
        "psi_high": high,
        "psi_every_bin": float(_psi(np.nan_to_num(means), counts, 1)),
        "trend": trend,
        "slope": slope,
        "reason": reason,
    }


OVERALL = "all"
NO_BOOTSTRAP = {"resamples": 0, "confidence": 0.95, "seed": 0}


def analyse(
    rows: pd.DataFrame,
    bins: int = 20,
    bucket_tokens: int = 512,
    buckets: int = 4,
    min_count: int = 1,
    flat_below: float = 0.1,
    *,
    interval: dict = NO_BOOTSTRAP,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``rows``: dataset, system, metric, query_id, value, relpos, doc_tokens, one per scored
    query; a query that no span places (relpos or doc_tokens null) counts in its dataset's
    overall score only. Returns the position_bins table (every bin of every bucket that has
    queries) and the psi table (one row per dataset, system and bucket, and one for the
    buckets pooled, bucket ``all``, PosIR's overall PSI and nDCG@10). ``interval``: the
    ``position_analysis.bootstrap`` block, the resamples (0: no interval), confidence and seed
    of PSI's interval, typed once, here (irflow.core.settings_types.Bootstrap1: a key it leaves
    out is the schema's default)."""
    bootstrap = Bootstrap1.model_validate(interval)
    # PosIR's overall nDCG@10: every scored query, placed or not.
    every_query = rows.groupby(["dataset", "system", "metric"])["value"].mean()
    frame = rows.assign(
        bucket=length_bucket(rows["doc_tokens"], bucket_tokens, buckets).astype(object),
        bin=position_bin(rows["relpos"], bins),
    ).dropna(subset=["bucket", "bin"])
    if len(frame) < len(rows):
        log.info(
            "%d of %d scored queries have no position: they count in the overall score "
            "(bucket %s) only, as in PosIR's overall nDCG@10",
            len(rows) - len(frame),
            len(rows),
            OVERALL,
        )
    frame = frame.astype({"bin": int})
    # PosIR's overall PSI bins every query of a dataset by position alone.
    frame = pd.concat([frame, frame.assign(bucket=OVERALL)], ignore_index=True)
    stats = frame.groupby([*GROUP, "metric", "bin"])["value"].agg(["mean", "count"])
    groups = stats.index.droplevel("bin").unique()
    every_bin = pd.MultiIndex.from_tuples(
        [(*group, b) for group in groups for b in range(bins)], names=stats.index.names
    )
    table = stats.reindex(every_bin).reset_index()
    table = table.rename(columns={"mean": "mean_ndcg", "count": "queries"})
    table["queries"] = table["queries"].fillna(0).astype(int)
    edges = np.linspace(0, 1, bins + 1)
    table["bin_start"], table["bin_end"] = edges[table["bin"]], edges[table["bin"] + 1]
    table["excluded"] = table["queries"].between(1, min_count - 1)
    per_bucket = table[table["bucket"] != OVERALL]
    position_bins = per_bucket[
        [*GROUP, "metric", "bin", "bin_start", "bin_end", "mean_ndcg", "queries", "excluded"]
    ]

    by_group = dict(list(frame.groupby([*GROUP, "metric"], sort=False)))
    summaries = []
    for key, bucket in table.groupby([*GROUP, "metric"], sort=True):
        summary = _bucket_summary(bucket, by_group[key], min_count, flat_below, bootstrap)
        dataset, system, bucket_name, metric = key
        if bucket_name == OVERALL:
            summary["mean_ndcg"] = float(every_query[(dataset, system, metric)])
        excluded = bucket.loc[bucket["excluded"], "bin"].tolist()
        if excluded:
            log.warning(
                "%s: bins %s have fewer than %d queries and are left out of PSI (%.4f; %.4f "
                "over every non-empty bin, as PosIR)",
                key,
                excluded,
                min_count,
                summary["psi"],
                summary["psi_every_bin"],
            )
        summaries.append(
            dict(zip([*GROUP, "metric"], key))
            | summary
            | {
                "bins_used": int((bucket["queries"] >= min_count).sum()),
                "bins_excluded": len(excluded),
                "queries": int(bucket["queries"].sum()),
            }
        )
    psi = pd.DataFrame(summaries, columns=PSI_COLUMNS)
    # Typed, so that a column with no value yet is still a string column in Parquet.
    psi = psi.astype({"trend": "string", "reason": "string"})
    return position_bins.reset_index(drop=True), psi


PSI_COLUMNS = [
    *GROUP,
    "metric",
    "mean_ndcg",
    "mean_ndcg_queries",
    "psi",
    "psi_low",
    "psi_high",
    "psi_every_bin",
    "bins_used",
    "bins_excluded",
    "trend",
    "slope",
    "queries",
    "reason",
]


@register_check
def position_analysis_problems(config: dict) -> list[str]:
    """``position_analysis``: known datasets, a tokenizer to count their tokens, each dataset in
    one pool at most."""
    problems = []
    analysis = PositionAnalysis.model_validate(config["position_analysis"])
    for i, dataset in enumerate(analysis.datasets):
        if dataset not in config["datasets"]:
            path = f"position_analysis.datasets.{i}"
            problems.append(missing_key(path, dataset, "datasets", config["datasets"]))
    if analysis.datasets and analysis.tokenizer is None:
        problems.append(
            "config key 'position_analysis.tokenizer': needed to count tokens of "
            "position_analysis.datasets; give a key of 'models', a Hugging Face id or a folder"
        )
    pooled = set()
    for name, members in analysis.pool.items():
        for i, dataset in enumerate(members.root):
            if dataset not in analysis.datasets:
                path = f"position_analysis.pool.{name}.{i}"
                known = analysis.datasets
                problems.append(missing_key(path, dataset, "position_analysis.datasets", known))
            elif dataset in pooled:
                problems.append(
                    f"config key 'position_analysis.pool.{name}.{i}': {dataset!r} is already "
                    "in another pool"
                )
            pooled.add(dataset)
    return problems


@register_check
def position_metric_problems(config: dict) -> list[str]:
    """``position_analysis.metric`` must be one that ``metrics`` computes."""
    metric = PositionAnalysis.model_validate(config["position_analysis"]).metric
    return uncomputed_metrics(config, [("position_analysis.metric", metric)])


def position_groups(config: dict, variants: dict[str, dict], datasets: list[str]) -> dict:
    """Per dataset analysed (``datasets``, the positional ``variants`` among them): the group its
    queries are pooled in (a variant's positionalize block, whose lengths and positions the
    buckets and bins tell apart), the tokenizer that counts its documents' tokens, and a
    variant's configured position. The ``position_analysis`` block is typed once, here
    (irflow.core.settings_types.PositionAnalysis)."""
    analysis = PositionAnalysis.model_validate(config["position_analysis"])
    groups = {}
    for dataset in datasets:
        spec = variants.get(dataset, {})
        groups[dataset] = {
            "group": spec.get("block") or pooled_group(dataset, analysis) or dataset,
            "tokenizer": tokenizer_source(
                analysis.tokenizer or spec["tokenizer"], config["models"]
            ),
            "position": spec.get("position"),
        }
    return groups
