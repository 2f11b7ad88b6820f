"""``judged_k``: the share of the top k that carries a judgement for that query (denominator
k)."""

from collections import defaultdict

from irflow.evaluation.measures.base import Measure


def judged_share(ranked, qrels: dict, cutoffs: list[int]) -> dict[str, dict[str, float]]:
    values: dict[str, dict[str, float]] = defaultdict(dict)
    for query_id, group in ranked.groupby("query_id", sort=False):
        judgements = qrels.get(query_id, {})
        docs = group["doc_id"].tolist()
        for k in cutoffs:
            values[query_id][f"judged_{k}"] = sum(doc in judgements for doc in docs[:k]) / k
    return values


MEASURE = Measure(
    "judged", judged_share, "Judged@{k}", "the share of the top {k} judged for that query"
)
