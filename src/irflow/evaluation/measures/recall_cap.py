"""``recall_cap_k``: BEIR's capped recall, the relevant documents in the top k / min(k,
relevant documents).

BEIR's Table 9: "Scores denote Recall@100. ⋆ shows the capped Recall@100"; BEIR's own code
(``beir.retrieval.custom_metrics.recall_cap``, "R_cap@k") divides by ``denominator =
min(len(query_relevant_docs), k)``. A query with 500 relevant documents and a perfect top 100
has 1.0, where trec_eval's ``recall_100`` has 0.2.
"""

from collections import defaultdict

from irflow.evaluation.measures.base import RELEVANCE_LEVEL, Measure


def capped_recall(ranked, qrels: dict, cutoffs: list[int]) -> dict[str, dict[str, float]]:
    values: dict[str, dict[str, float]] = defaultdict(dict)
    for query_id, group in ranked.groupby("query_id", sort=False):
        judgements = qrels.get(query_id, {})
        relevant = {doc for doc, grade in judgements.items() if grade >= RELEVANCE_LEVEL}
        docs = group["doc_id"].tolist()
        for k in cutoffs:
            hits = sum(doc in relevant for doc in docs[:k])
            values[query_id][f"recall_cap_{k}"] = hits / min(k, len(relevant)) if relevant else 0.0
    return values


MEASURE = Measure(
    "recall_cap",
    capped_recall,
    "capped Recall@{k}",
    "the relevant documents in the top {k} / min({k}, the query's relevant documents), "
    "BEIR's capped recall",
)
