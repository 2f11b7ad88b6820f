"""``hole_k``: BEIR's Hole@k, the share of the top k that no query of the split judged
(denominator k)."""

from collections import defaultdict

from irflow.evaluation.measures.base import Measure


def hole_share(ranked, qrels: dict, cutoffs: list[int]) -> dict[str, dict[str, float]]:
    judged_anywhere = {doc for docs in qrels.values() for doc in docs}
    values: dict[str, dict[str, float]] = defaultdict(dict)
    for query_id, group in ranked.groupby("query_id", sort=False):
        docs = group["doc_id"].tolist()
        for k in cutoffs:
            values[query_id][f"hole_{k}"] = sum(doc not in judged_anywhere for doc in docs[:k]) / k
    return values


MEASURE = Measure(
    "hole",
    hole_share,
    "Hole@{k}",
    "the share of the top {k} that no query of the split judged (BEIR's Hole@k)",
)
