"""query_types: the position analysis per query type, as PosIR's Table 6 sorts its queries.

PosIR's heuristic (Appendix A.2.1): "we adopt a keyword-based heuristic that categorizes
queries according to their leading interrogative terms (e.g., what), with non-interrogative
queries grouped as claim" (posir.txt, line 184); its Table 6 has the types WHAT, HOW, WHY,
WHICH, WHEN, WHERE, WHO, CLAIM and OTHERS (posir.txt, lines 189-197), and OTHERS "mainly
includes yes/no questions—typically those starting with auxiliary verbs (e.g., do/does/did,
can, will) or be verbs (e.g., is/are)—as well as other infrequent or implicit question forms
that do not match predefined interrogative patterns" (posir.txt, line 184).

Where the paper does not say, irflow chooses (docs/position.md says why):
- the leading term is the query's first word (its first run of letters, lowercased, so
  "What's" reads "what"); an interrogative later in the query ("In which year ...") does not
  make it that type, as "leading" says;
- whom and whose are WHO, the same question word declined;
- a query whose first word is an auxiliary or a form of be (``AUXILIARIES``: do, does, did,
  can, could, will, would, shall, should, may, might, must, is, are, was, were, am, has, have,
  had) is OTHERS, as the footnote lists them;
- any other query is OTHERS when it holds a question mark (an implicit question: "In which
  year ...?", "Vitamin D and flu?") and CLAIM when it does not (a declarative statement);
- English only: PosIR's Chinese patterns are not given, so a Chinese query is CLAIM, or OTHERS
  with a question mark (either width).

Per dataset, system and type, the position analysis (irflow.analyses.position.analyse) of that
type's queries alone: PSI per length bucket and over the buckets pooled (bucket ``all``, whose
``mean_ndcg`` is the mean score over every scored query of the type, PosIR's overall nDCG@10),
with the type's share of the dataset's scored queries (Table 6's percentage, as a fraction).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from irflow.analyses.position import OVERALL, PSI_COLUMNS, analyse

# Table 6's rows, in its order.
QUERY_TYPES = ("what", "how", "why", "which", "when", "where", "who", "claim", "others")
INTERROGATIVES = {word: word for word in QUERY_TYPES[:7]} | {"whom": "who", "whose": "who"}
AUXILIARIES = frozenset(
    "do does did can could will would shall should may might must is are was were am has have "
    "had".split()
)
FIRST_WORD = re.compile(r"[^\W\d_]+")
TYPE_COLUMNS = ["dataset", "system", "metric", "query_type", "scored_queries", "share"]


def query_type(text: str) -> str:
    """The query's type by PosIR's Table 6 heuristic (see the module's docstring)."""
    first = FIRST_WORD.search(text.lower())
    word = first.group() if first else ""
    if word in INTERROGATIVES:
        return INTERROGATIVES[word]
    if word in AUXILIARIES or "?" in text or "？" in text:
        return "others"
    return "claim"


def by_query_type(rows: pd.DataFrame, **settings) -> pd.DataFrame:
    """``rows``: analyse's rows with a ``query_type`` column; ``settings``: analyse's (bins,
    buckets, interval, ...). The psi table of each type's queries alone, with ``query_type``,
    ``scored_queries`` (the type's scored queries, placed or not) and ``share`` (their fraction
    of the dataset's scored queries). A type none of whose queries a span places has its bucket
    ``all`` row only: its mean score, no PSI, and why."""
    keys = ["dataset", "system", "metric"]
    scored = rows.groupby([*keys, "query_type"]).size().rename("scored_queries")
    share = (scored / rows.groupby(keys).size()).rename("share")
    means = rows.groupby([*keys, "query_type"])["value"].mean()
    tables = []
    for name in QUERY_TYPES:
        typed = rows[rows["query_type"] == name].drop(columns="query_type")
        if typed.empty:
            continue
        _, psi = analyse(typed, **settings)
        tables.append(psi.assign(query_type=name))
    empty = pd.DataFrame(columns=[*PSI_COLUMNS, "query_type"])
    table = pd.concat(tables, ignore_index=True) if tables else empty
    # A type with no placed query: its overall row, the mean over its scored queries.
    present = set(zip(*(table[column] for column in [*keys, "query_type"])))
    unplaced = [key for key in means.index if key not in present]
    if unplaced:
        placed = [table] if len(table) else []
        table = pd.concat([*placed, _unplaced_rows(unplaced, means)], ignore_index=True)
    table = table.merge(pd.concat([scored, share], axis=1).reset_index(), on=[*keys, "query_type"])
    order = table["query_type"].map({name: at for at, name in enumerate(QUERY_TYPES)})
    table = table.assign(_order=order).sort_values(
        ["dataset", "metric", "_order", "system", "bucket"], kind="stable"
    )
    columns = [*TYPE_COLUMNS, *(c for c in PSI_COLUMNS if c not in keys)]
    return table[columns].astype({"trend": "string", "reason": "string"}).reset_index(drop=True)


def _unplaced_rows(keys: list[tuple], means: pd.Series) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(zip(["dataset", "system", "metric", "query_type"], key))
            | {
                "bucket": OVERALL,
                "mean_ndcg": float(means[key]),
                "mean_ndcg_queries": np.nan,
                "psi": np.nan,
                "bins_used": 0,
                "bins_excluded": 0,
                "queries": 0,
                "reason": "no query of this type has a placed span",
            }
            for key in keys
        ]
    )


def query_types_table(types: pd.DataFrame) -> str:
    """HTML table: per dataset, query type (Table 6's order) and system, the type's scored
    queries and share, its mean score and its PSI over the buckets pooled (bucket ``all``)
    with the interval and trend; the per-bucket rows are in the Parquet file."""
    if types.empty:
        return "<p>No query-type breakdown: no scored query.</p>"
    columns = {
        "dataset": "dataset",
        "query_type": "query type",
        "system": "system",
        "scored_queries": "queries",
        "share": "share",
        "mean_ndcg": "mean score",
        "queries": "placed queries",
        "psi": "PSI",
        "psi_low": "PSI interval low",
        "psi_high": "PSI interval high",
        "trend": "trend",
        "reason": "note",
    }
    overall = types[types["bucket"] == OVERALL][list(columns)]
    overall = overall.astype({"trend": object, "reason": object}).fillna(
        {"trend": "–", "reason": ""}
    )
    return overall.rename(columns=columns).to_html(
        index=False, float_format="{:.4f}".format, na_rep="–"
    )
