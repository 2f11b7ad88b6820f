"""fuse: reciprocal rank and weighted fusion against hand-worked examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irflow.retrieval.fuse import fuse_runs, reciprocal_rank_fusion, weighted_fusion


def run_of(query_id: str, scored: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": query_id,
            "doc_id": list(scored),
            "score": [float(s) for s in scored.values()],
        }
    )


def scores_of(run: pd.DataFrame) -> dict[str, float]:
    return dict(zip(run["doc_id"], run["score"]))


def test_rrf_hand_worked_example():
    run_a = run_of("q", {"d1": 3.0, "d2": 2.0, "d3": 1.0})
    run_b = run_of("q", {"d3": 0.9, "d1": 0.5})
    fused = reciprocal_rank_fusion([run_a, run_b], k=60)
    assert fused["doc_id"].tolist() == ["d1", "d3", "d2"]
    assert fused["rank"].tolist() == [1, 2, 3]
    assert fused["rank"].dtype == "int32"
    assert fused["score"].dtype == "float64"
    assert scores_of(fused) == {"d1": 1 / 61 + 1 / 62, "d3": 1 / 63 + 1 / 61, "d2": 1 / 62}


def test_rrf_ranks_ties_inside_a_run_by_doc_id_descending():
    # trec_eval puts d2 before d1 on a tie, so d2 gets rank 1 whatever the row order.
    tied = run_of("q", {"d1": 1.0, "d2": 1.0})
    fused = reciprocal_rank_fusion([tied], k=10)
    assert fused["doc_id"].tolist() == ["d2", "d1"]
    assert scores_of(fused) == {"d2": 1 / 11, "d1": 1 / 12}


def test_rrf_keeps_queries_apart_and_cuts_to_top_k():
    runs = [
        pd.concat([run_of("q1", {"a": 3, "b": 2, "c": 1}), run_of("q2", {"x": 2, "y": 1})]),
        run_of("q1", {"c": 5, "a": 4}),
    ]
    fused = reciprocal_rank_fusion(runs, k=60, top_k=2)
    assert fused[["query_id", "doc_id", "rank"]].values.tolist() == [
        ["q1", "a", 1],
        ["q1", "c", 2],
        ["q2", "x", 1],
        ["q2", "y", 2],
    ]


def test_weighted_minmax_by_hand():
    run_a = run_of("q", {"d1": 10.0, "d2": 5.0, "d3": 0.0})  # -> 1.0, 0.5, 0.0
    run_b = run_of("q", {"d3": 0.8, "d2": 0.4})  # -> 1.0, 0.0; d1 missing adds 0
    fused = weighted_fusion([run_a, run_b], [0.3, 0.7])
    assert fused["doc_id"].tolist() == ["d3", "d1", "d2"]
    assert fused["rank"].tolist() == [1, 2, 3]
    assert scores_of(fused) == pytest.approx({"d3": 0.7, "d1": 0.3, "d2": 0.15})


def test_weighted_minmax_equal_scores_become_one():
    fused = weighted_fusion([run_of("q", {"d1": 2.0, "d2": 2.0})], [0.5])
    assert scores_of(fused) == {"d1": 0.5, "d2": 0.5}


def test_weighted_zscore_by_hand():
    scores = np.array([4.0, 2.0, 0.0])
    expected = (scores - scores.mean()) / scores.std()
    # q2 has a single score, so its standard deviation is 0 and it normalises to 0.0.
    run = pd.concat([run_of("q", dict(zip(["d1", "d2", "d3"], scores))), run_of("q2", {"x": 7})])
    fused = weighted_fusion([run], [2.0], normalization="zscore")
    assert scores_of(fused[fused["query_id"] == "q"]) == pytest.approx(
        dict(zip(["d1", "d2", "d3"], 2.0 * expected))
    )
    assert scores_of(fused[fused["query_id"] == "q2"]) == {"x": 0.0}


def test_weighted_none_sums_raw_scores_and_cuts_to_top_k():
    fused = weighted_fusion(
        [run_of("q", {"d1": 1.0, "d2": 4.0, "d3": 2.0}), run_of("q", {"d1": 10.0})],
        [1.0, 0.5],
        normalization="none",
        top_k=2,
    )
    assert fused["doc_id"].tolist() == ["d1", "d2"]
    assert fused["rank"].tolist() == [1, 2]
    assert scores_of(fused) == {"d1": 6.0, "d2": 4.0}


def test_weighted_rejects_weight_count_mismatch():
    with pytest.raises(ValueError, match="1 weights given for 2 runs"):
        weighted_fusion([run_of("q", {"d": 1}), run_of("q", {"d": 2})], [1.0])


def test_weighted_rejects_unknown_normalization():
    with pytest.raises(ValueError, match="minmax, zscore, none"):
        weighted_fusion([run_of("q", {"d": 1})], [1.0], normalization="softmax")


def test_a_fusion_entry_fuses_by_its_method():
    """The rule's settings (a ``fusion`` entry with its defaults, and the run's top_k) pick
    the method: rrf with its k; weighted with its weights, or equal ones where none are given."""
    run_a = run_of("q", {"d1": 3.0, "d2": 2.0, "d3": 1.0})
    run_b = run_of("q", {"d3": 0.9, "d1": 0.5})
    entry = {"runs": ["a", "b"], "k": 60, "weights": None, "normalization": "minmax", "top_k": 2}
    rrf = fuse_runs([run_a, run_b], entry | {"method": "rrf"})
    assert scores_of(rrf) == {"d1": 1 / 61 + 1 / 62, "d3": 1 / 63 + 1 / 61}
    equal = fuse_runs([run_a, run_b], entry | {"method": "weighted"})
    # minmax: a (d1 1, d2 0.5, d3 0), b (d3 1, d1 0)
    assert scores_of(equal) == {"d1": 1.0, "d3": 1.0}
    weighted = fuse_runs([run_a, run_b], entry | {"method": "weighted", "weights": [1.0, 3.0]})
    assert scores_of(weighted) == {"d3": 3.0, "d1": 1.0}
