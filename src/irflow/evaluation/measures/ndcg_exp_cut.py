"""``ndcg_exp_cut_k``: nDCG@k with the exponential gain 2^grade − 1 (Burges et al., 2005,
"Learning to rank using gradient descent").

Computed by trec_eval's own ``ndcg_cut`` (pytrec_eval) on qrels whose grades are mapped to
those gains, as ``m_ndcg_cut.c`` says to: "Gain values are the relevance values in the qrels
file. For now, if you want different gains, change the qrels file appropriately."
``ndcg_cut_k``, the default, keeps trec_eval's gain, the grade itself, as BEIR and MTEB report
it.
"""

from irflow.evaluation.measures.base import Measure, pytrec_values, run_dict


def exponential_gains(qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Qrels whose positive grades are their exponential gains, 2^grade − 1 (1 → 1, 2 → 3,
    3 → 7): trec_eval's nDCG, which takes the grade as the gain, then gives Burges et al.'s
    nDCG. Grades of 0 and below keep their value: trec_eval counts no gain for them."""
    return {
        query_id: {doc: 2**grade - 1 if grade > 0 else grade for doc, grade in docs.items()}
        for query_id, docs in qrels.items()
    }


def exponential_ndcg(ranked, qrels: dict, cutoffs: list[int]) -> dict[str, dict[str, float]]:
    spec = "ndcg_cut." + ",".join(map(str, cutoffs))
    measured = pytrec_values(exponential_gains(qrels), run_dict(ranked), {spec})
    return {
        query_id: {f"ndcg_exp_cut_{k}": values[f"ndcg_cut_{k}"] for k in cutoffs}
        for query_id, values in measured.items()
    }


MEASURE = Measure(
    "ndcg_exp_cut",
    exponential_ndcg,
    "nDCG@{k} (2^grade − 1)",
    "nDCG of the top {k} with the exponential gain 2^grade − 1 (Burges et al.)",
)
