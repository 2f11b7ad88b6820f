"""score: pytrec_eval numbers, trec_eval tie-breaking, and irflow's own measures."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest
import pytrec_eval
from bm25_index import bm25_run
from conftest import schema_defaults

from irflow.data.ingest import ingest
from irflow.evaluation.score import metric_names, parse_measures, score_run

ALL = [
    "ndcg_cut.1,3,5,10,100,1000",
    "map",
    "map_cut.10,100,1000",
    "recall.10,100,1000",
    "P.1,10",
    "recip_rank_cut.10",
    "recall_cap.10,100,1000",
    "judged.10,100",
    "hole.10,100",
]


def frame(rows, columns):
    return pd.DataFrame(rows, columns=columns)


def values(per_query: pd.DataFrame) -> dict[tuple[str, str], float]:
    return {(q, m): v for q, m, v in per_query.itertuples(index=False)}


def random_case(seed: int):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(60)]
    qrels = [
        (f"q{q}", d, rng.choice([0, 1, 1, 2]))
        for q in range(12)
        for d in rng.sample(docs, rng.randint(1, 8))
    ]
    # Scores rounded to one decimal so that many ties occur.
    run = [(f"q{q}", d, round(rng.random(), 1)) for q in range(11) for d in rng.sample(docs, 40)]
    return frame(run, ["query_id", "doc_id", "score"]), frame(
        qrels, ["query_id", "doc_id", "relevance"]
    )


@pytest.mark.parametrize("seed", range(5))
def test_native_measures_equal_pytrec_eval(seed):
    run, qrels = random_case(seed)
    ours = values(score_run(run, qrels, ALL))
    qrels_dict, run_dict = {}, {}
    for q, d, r in qrels.itertuples(index=False):
        qrels_dict.setdefault(q, {})[d] = r
    for q, d, s in run.itertuples(index=False):
        run_dict.setdefault(q, {})[d] = s
    native, _ = parse_measures(ALL)
    direct = pytrec_eval.RelevanceEvaluator(qrels_dict, native).evaluate(run_dict)
    assert direct
    for query, measures in direct.items():
        for name, value in measures.items():
            assert ours[(query, name)] == pytest.approx(value, abs=1e-12), (query, name)


def test_query_without_results_scores_zero():
    run, qrels = random_case(0)  # q11 is judged but absent from the run
    per_query = score_run(run, qrels, ALL)
    assert set(per_query["query_id"]) == set(qrels["query_id"])
    q11 = per_query[per_query["query_id"] == "q11"]
    assert len(q11) > 20 and (q11["value"] == 0).all()


def test_query_without_results_gets_what_trec_eval_c_counts():
    run, qrels = random_case(0)  # q11 is judged but absent from the run
    counts = ["gm_map", "gm_bpref", "num_q", "num_rel", "num_ret", "num_rel_ret", "ndcg_cut.10"]
    got = values(score_run(run, qrels, counts))
    relevant = int((qrels[qrels["query_id"] == "q11"]["relevance"] >= 1).sum())
    assert relevant > 0
    assert got[("q11", "gm_map")] == got[("q11", "gm_bpref")] == math.log(1e-5)
    assert (got[("q11", "num_q")], got[("q11", "num_rel")]) == (1.0, relevant)
    assert (
        got[("q11", "num_ret")] == got[("q11", "num_rel_ret")] == got[("q11", "ndcg_cut_10")] == 0
    )


def test_ties_are_broken_as_trec_eval_does():
    # Three docs share a score: trec_eval orders them by doc id descending (d2, d1, d0).
    run = frame(
        [("q", "d1", 1.0), ("q", "d0", 1.0), ("q", "d2", 1.0)], ["query_id", "doc_id", "score"]
    )
    qrels = frame([("q", "d1", 1)], ["query_id", "doc_id", "relevance"])
    got = values(
        score_run(run, qrels, ["P.1", "recip_rank_cut.1,10", "recall_cap.1,2", "judged.1"])
    )
    assert got[("q", "P_1")] == 0.0  # pytrec_eval itself
    assert got[("q", "recip_rank_cut_10")] == 0.5
    assert got[("q", "recip_rank_cut_1")] == 0.0
    assert got[("q", "recall_cap_1")] == 0.0
    assert got[("q", "recall_cap_2")] == 1.0
    assert got[("q", "judged_1")] == 0.0


def test_irflow_measures_by_hand():
    run = frame([("q", f"d{i}", 10.0 - i) for i in range(10)], ["query_id", "doc_id", "score"])
    # Relevant: d0, d3 (grade 2), d20 (never retrieved); judged non-relevant: d1.
    # Another query judges d5, so d5 is not a BEIR "hole".
    qrels = frame(
        [("q", "d0", 1), ("q", "d3", 2), ("q", "d20", 1), ("q", "d1", 0), ("p", "d5", 1)],
        ["query_id", "doc_id", "relevance"],
    )
    got = values(
        score_run(run, qrels, ["recall_cap.2,5", "judged.2,5,6", "hole.6", "recip_rank_cut.10"])
    )
    assert got[("q", "recall_cap_2")] == 1 / 2  # d0 of min(2, 3)
    assert got[("q", "recall_cap_5")] == 2 / 3  # d0, d3 of min(5, 3)
    assert got[("q", "judged_2")] == 1.0  # d0, d1
    assert got[("q", "judged_5")] == 3 / 5  # d0, d1, d3
    assert got[("q", "judged_6")] == 3 / 6  # d5 is judged, but not for q
    assert got[("q", "hole_6")] == 2 / 6  # d2, d4: d5 is judged by another query
    assert got[("q", "recip_rank_cut_10")] == 1.0
    assert got[("p", "recall_cap_5")] == 0.0  # p has no results


def test_unknown_measure_is_named():
    with pytest.raises(ValueError, match="unknown measure 'ndgc_cut'"):
        parse_measures(["ndgc_cut.10"])


def test_capped_recall_is_beirs_and_recall_is_trec_evals():
    """BEIR's R_cap@k divides by min(k, relevant) ("⋆ shows the capped Recall@100", BEIR's
    Table 9); trec_eval's recall by every relevant document. The issue's case: 500 relevant
    documents and a perfect top 100."""
    relevant = [f"r{i:03d}" for i in range(500)]
    run = frame(
        [("q", doc, 500.0 - i) for i, doc in enumerate(relevant[:100])],
        ["query_id", "doc_id", "score"],
    )
    qrels = frame([("q", doc, 1) for doc in relevant], ["query_id", "doc_id", "relevance"])
    got = values(score_run(run, qrels, ["recall.100", "recall_cap.100"]))
    assert got[("q", "recall_cap_100")] == 1.0
    assert got[("q", "recall_100")] == 0.2


def test_exponential_gain_ndcg_by_hand():
    """nDCG@k = DCG@k / IDCG@k, DCG@k = sum over ranks i <= k of gain_i / log2(i + 1), the
    ideal over every judged relevant document, retrieved or not. trec_eval's gain is the
    grade; Burges et al.'s is 2^grade - 1. b and a tie: trec_eval ranks b (doc id descending)
    second, a third."""
    run = frame(
        [("q", "c", 0.9), ("q", "a", 0.5), ("q", "b", 0.5)], ["query_id", "doc_id", "score"]
    )
    grades = {"a": 2, "b": 1, "c": 0, "d": 3, "e": 1}  # d and e are never retrieved
    qrels = frame(
        [("q", doc, g) for doc, g in grades.items()] + [("p", "a", 2)],  # p: no results
        ["query_id", "doc_id", "relevance"],
    )
    got = values(score_run(run, qrels, ["ndcg_cut.1,3,10", "ndcg_exp_cut.1,3,10"]))
    log2 = math.log2
    # Ranked c (0), b (1), a (2); ideal d (3), a (2), b (1), e (1).
    linear_dcg = 1 / log2(3) + 2 / log2(4)
    linear_ideal_3 = 3 / log2(2) + 2 / log2(3) + 1 / log2(4)
    exp_dcg = 1 / log2(3) + 3 / log2(4)
    exp_ideal_3 = 7 / log2(2) + 3 / log2(3) + 1 / log2(4)
    expected = {
        "ndcg_cut_1": 0.0,
        "ndcg_cut_3": linear_dcg / linear_ideal_3,
        "ndcg_cut_10": linear_dcg / (linear_ideal_3 + 1 / log2(5)),
        "ndcg_exp_cut_1": 0.0,
        "ndcg_exp_cut_3": exp_dcg / exp_ideal_3,
        "ndcg_exp_cut_10": exp_dcg / (exp_ideal_3 + 1 / log2(5)),
    }
    for metric, value in expected.items():
        assert got[("q", metric)] == pytest.approx(value, abs=1e-12), metric
    assert got[("q", "ndcg_exp_cut_3")] == pytest.approx(0.226868, abs=1e-6)
    assert got[("q", "ndcg_cut_3")] == pytest.approx(0.342498, abs=1e-6)
    assert got[("p", "ndcg_exp_cut_10")] == 0.0  # as trec_eval -c counts a query without results
    assert metric_names(["ndcg_exp_cut.3,10"]) == ["ndcg_exp_cut_10", "ndcg_exp_cut_3"]


def test_exponential_gain_ndcg_equals_trec_evals_on_binary_judgements():
    """With grades 0 and 1 only, 2^grade - 1 is the grade: both nDCGs agree."""
    run, qrels = random_case(1)
    qrels["relevance"] = qrels["relevance"].clip(upper=1)
    got = values(score_run(run, qrels, ["ndcg_cut.5,10", "ndcg_exp_cut.5,10"]))
    for query in set(qrels["query_id"]):
        for k in (5, 10):
            assert got[(query, f"ndcg_exp_cut_{k}")] == got[(query, f"ndcg_cut_{k}")]


def test_nfcorpus_bm25_ndcg_10_by_both_gains(shared_datasets, tmp_path):
    """NFCorpus is graded (1 and 2): BM25's nDCG@10 is 0.3177 with trec_eval's gain and
    0.3192 with the exponential one (issue 38)."""
    folder = shared_datasets / "nfcorpus"
    ingest(
        folder / "corpus.jsonl.gz", folder / "queries.jsonl", folder / "qrels/test.tsv", tmp_path
    )
    bm25 = schema_defaults({"type": "bm25"})
    run, _ = bm25_run(tmp_path / "corpus.parquet", tmp_path / "queries.parquet", bm25, 10, False)
    qrels = pd.read_parquet(tmp_path / "qrels.parquet")
    means = score_run(run, qrels, ["ndcg_cut.10", "ndcg_exp_cut.10"]).groupby("metric")["value"]
    assert means.mean().round(4).to_dict() == {"ndcg_cut_10": 0.3177, "ndcg_exp_cut_10": 0.3192}
