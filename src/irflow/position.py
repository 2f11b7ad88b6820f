"""position: does a system's score depend on where its relevant text sits in the document?

The analysis of PosIR (§4.1, §5.2). Each query with one relevant judgement that carries a span is
placed by the span's relative position and its document's length; per dataset, system and
length bucket, the mean score of each position bin gives the Position Sensitivity Index
PSI = 1 − min / max over the bins, and the trend of score over position.

Conventions, those of PosIR's analysis script (ndcg_PSI_analysis.py):
- relative position = span centre / document characters, clipped to [0, 1];
- length buckets Q1, Q2, ... by the relevant document's token count, closed on the right, the
  last one open: (0, 512], (512, 1024], (1024, 1536], (1536, ∞) for ``bucket_tokens`` 512 and
  4 ``buckets``;
- ``bins`` equal-width position bins, closed on the right as ``pd.cut`` makes them, the first
  one holding 0 as well: [0, .05], (.05, .1], ..., (.95, 1], so the end of a document, 1.0,
  falls into the last bin;
- PSI over the bins of a bucket that have queries; nDCG@10 by default.
Additions:
- a bin with fewer than ``min_count`` queries is left out of PSI and the trend, and flagged
  (PosIR uses every non-empty bin: ``min_count`` 1); a bucket with fewer than two usable bins
  has no PSI, and the table says why;
- the trend: the slope of an ordinary least-squares line (scipy's linregress) through the
  usable bins' mean scores against their centres, as PosIR fits it, is the fitted change in
  score from the start of a document to its end. It is "flat" when that change is at most
  ``flat_below`` times the bucket's mean score (a line drawn through noise), otherwise
  "primacy" when the score falls towards the end and "recency" when it rises.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from scipy.stats import linregress

from irflow.positionalize import encode

log = logging.getLogger(__name__)

GROUP = ["dataset", "system", "bucket"]


def relative_position(span_start, span_end, document_chars) -> np.ndarray:
    """Span centre over document length in characters, clipped to [0, 1]; NaN for an empty
    document."""
    centre = (np.asarray(span_start, dtype=float) + np.asarray(span_end, dtype=float)) / 2
    chars = np.asarray(document_chars, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chars > 0, np.clip(centre / chars, 0, 1), np.nan)


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

    The span counts characters of the document's text, as the contracts say.
    """
    relevant = qrels[qrels["relevance"] > 0]
    single = relevant[~relevant["query_id"].duplicated(keep=False)]
    single = single.dropna(subset=["span_start", "span_end"])
    texts = documents.drop_duplicates("doc_id").set_index("doc_id")["text"]
    texts = texts[texts.index.isin(single["doc_id"])]
    tokens = pd.Series([len(ids) for ids in encode(tokenizer, texts.tolist())["input_ids"]])
    tokens.index = texts.index
    single = single[single["doc_id"].isin(texts.index)]
    return pd.DataFrame(
        {
            "query_id": single["query_id"].to_numpy(),
            "relpos": relative_position(
                single["span_start"], single["span_end"], texts[single["doc_id"]].str.len()
            ),
            "doc_tokens": tokens[single["doc_id"]].to_numpy(),
        }
    )


def _bucket_summary(usable: pd.DataFrame, flat_below: float) -> dict:
    """PSI, slope and trend from the usable bins of one bucket, or why there are none."""
    means, centres = usable["mean_ndcg"].to_numpy(), usable["bin_centre"].to_numpy()
    if len(means) < 2:
        reason = f"usable bins: {len(means)}; PSI and the trend need 2"
        return {"psi": np.nan, "trend": None, "slope": np.nan, "reason": reason}
    top = means.max()
    psi = 1 - means.min() / top if top > 0 else np.nan
    slope = linregress(centres, means).slope
    if abs(slope) <= flat_below * means.mean():
        trend = "flat"
    else:
        trend = "primacy" if slope < 0 else "recency"
    reason = None if top > 0 else "every usable bin scores 0"
    return {"psi": psi, "trend": trend, "slope": slope, "reason": reason}


def analyse(
    rows: pd.DataFrame,
    bins: int = 20,
    bucket_tokens: int = 512,
    buckets: int = 4,
    min_count: int = 5,
    flat_below: float = 0.1,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``rows``: dataset, system, metric, query_id, value, relpos, doc_tokens, one per scored
    query. Returns the position_bins table (every bin of every bucket that has queries) and
    the psi table (one row per dataset, system and bucket)."""
    frame = rows.assign(
        bucket=length_bucket(rows["doc_tokens"], bucket_tokens, buckets).astype(object),
        bin=position_bin(rows["relpos"], bins),
    ).dropna(subset=["bucket", "bin"])
    frame = frame.astype({"bin": int})
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
    position_bins = table[
        [*GROUP, "metric", "bin", "bin_start", "bin_end", "mean_ndcg", "queries", "excluded"]
    ]

    summaries = []
    for key, bucket in table.groupby([*GROUP, "metric"], sort=True):
        usable = bucket[bucket["queries"] >= min_count]
        summary = _bucket_summary(
            usable.assign(bin_centre=(usable["bin_start"] + usable["bin_end"]) / 2), flat_below
        )
        excluded = bucket.loc[bucket["excluded"], "bin"].tolist()
        if excluded:
            log.warning(
                "%s: bins %s have fewer than %d queries and are left out", key, excluded, min_count
            )
        queries = int(bucket["queries"].sum())
        summaries.append(
            dict(zip([*GROUP, "metric"], key))
            | summary
            | {
                "bins_used": len(usable),
                "bins_excluded": len(excluded),
                "queries": queries,
                # Over every query of the bucket: its score as a benchmark of its own.
                "mean_ndcg": (bucket["mean_ndcg"] * bucket["queries"]).sum() / queries,
            }
        )
    columns = [*GROUP, "metric", "mean_ndcg", "psi", "bins_used", "bins_excluded", "trend", "slope"]
    psi = pd.DataFrame(summaries, columns=[*columns, "queries", "reason"])
    # Typed, so that a column with no value yet is still a string column in Parquet.
    psi = psi.astype({"trend": "string", "reason": "string"})
    return position_bins.reset_index(drop=True), psi
