"""``recip_rank_cut_k``: the reciprocal rank of the first relevant document within the top k
(MRR@k), computed by pytrec_eval's ``recip_rank`` on the run cut to its top k."""

from collections import defaultdict

from irflow.evaluation.measures.base import Measure, pytrec_values, run_dict


def reciprocal_rank_at(ranked, qrels: dict, cutoffs: list[int]) -> dict[str, dict[str, float]]:
    values: dict[str, dict[str, float]] = defaultdict(dict)
    for k in cutoffs:
        cut = run_dict(ranked[ranked["rank"] <= k])
        for query_id, measured in pytrec_values(qrels, cut, {"recip_rank"}).items():
            values[query_id][f"recip_rank_cut_{k}"] = measured["recip_rank"]
    return values


MEASURE = Measure(
    "recip_rank_cut",
    reciprocal_rank_at,
    "MRR@{k}",
    "1 / the rank of the first relevant document in the top {k} (0 if none)",
)
