"""Runs: trec_eval order, self-match removal, TREC export and repeated documents."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from irflow.core import contracts
from irflow.core.errors import InputError
from irflow.retrieval.runs import (
    build_run,
    byte_order_codes,
    read_run,
    short_queries,
    trec_order,
    write_run,
)


def rows_run(query_ids, doc_ids, hits, top_k, remove_self_matches):
    return build_run(
        pa.array(query_ids, pa.string()),
        pa.array(doc_ids, pa.string()),
        [(np.asarray(rows, dtype=np.int64), np.asarray(scores)) for rows, scores in hits],
        top_k,
        remove_self_matches,
    )


def ids_run(query_ids, doc_ids_per_query, scores_per_query, top_k, remove_self_matches):
    """``build_run`` over hits given as doc ids: rows of the distinct ids in first-seen order."""
    doc_ids = list(dict.fromkeys(doc for docs in doc_ids_per_query for doc in docs))
    row = {doc: i for i, doc in enumerate(doc_ids)}
    hits = [
        ([row[doc] for doc in docs], scores)
        for docs, scores in zip(doc_ids_per_query, scores_per_query)
    ]
    return rows_run(query_ids, doc_ids, hits, top_k, remove_self_matches)


def test_trec_order_breaks_ties_by_doc_id_descending():
    run = pd.DataFrame(
        {
            "query_id": ["q", "q", "q", "p"],
            "doc_id": ["a", "c", "b", "z"],
            "score": [1.0, 1.0, 2.0, 0.5],
        }
    )
    ordered = trec_order(run)
    assert ordered[["query_id", "doc_id", "rank"]].values.tolist() == [
        ["p", "z", 1],
        ["q", "b", 1],
        ["q", "c", 2],
        ["q", "a", 3],
    ]


def test_self_matches_are_removed_and_counted_before_cutting_to_k():
    run, removed = ids_run(
        ["q1", "q2"],
        [["q1", "d1", "d2"], ["d3", "d4", "d5"]],
        [[9, 8, 7], [3, 2, 1]],
        top_k=2,
        remove_self_matches=True,
    )
    assert removed == 1
    assert run[run["query_id"] == "q1"]["doc_id"].tolist() == ["d1", "d2"]
    assert run[run["query_id"] == "q2"]["doc_id"].tolist() == ["d3", "d4"]


def test_self_matches_stay_when_not_asked_to_remove():
    run, removed = ids_run(["q1"], [["q1", "d1"]], [[9, 8]], top_k=5, remove_self_matches=False)
    assert removed == 0 and run["doc_id"].tolist() == ["q1", "d1"]


def test_run_files_round_trip_with_exact_scores(tmp_path):
    scores = [0.1 + 0.2, 1 / 3]
    run, _ = ids_run(["q"], [["a", "b"]], [scores], top_k=10, remove_self_matches=False)
    write_run(run, tmp_path / "r.parquet", {"system": "s"}, tmp_path / "r.trec", "s")
    back = pd.read_parquet(tmp_path / "r.parquet")
    assert back["score"].tolist() == sorted(scores, reverse=True)
    assert contracts.read_lineage(tmp_path / "r.parquet") == {"system": "s"}
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert lines[0].split() == ["q", "Q0", "b", "1", repr(1 / 3), "s"]
    assert float(lines[1].split()[4]) == 0.1 + 0.2


def test_trec_scores_read_back_as_the_parquet_scores(tmp_path):
    rng = np.random.default_rng(0)
    scores = rng.standard_normal(2000) * np.exp(rng.uniform(-30, 30, 2000))
    scores[:3] = [97.0, 0.0, 1e-5]
    run, _ = ids_run(
        ["q"], [[f"d{i}" for i in range(2000)]], [scores], top_k=2000, remove_self_matches=False
    )
    write_run(run, tmp_path / "r.parquet", {}, tmp_path / "r.trec", "s")
    fields = [line.split() for line in (tmp_path / "r.trec").read_text().splitlines()]
    assert [float(f[4]) for f in fields] == pd.read_parquet(tmp_path / "r.parquet")[
        "score"
    ].tolist()
    assert [int(f[3]) for f in fields] == list(range(1, 2001))
    assert {(f[1], f[5]) for f in fields} == {("Q0", "s")}


@pytest.mark.parametrize("doc_id", ["two words", "tab\there", 'say "x"'])
def test_an_id_a_trec_line_cannot_hold_is_refused_before_anything_is_written(tmp_path, doc_id):
    run, _ = ids_run(["q"], [["a", doc_id]], [[2.0, 1.0]], top_k=10, remove_self_matches=False)
    with pytest.raises(InputError, match=r"r\.trec: doc_id .* holds whitespace or a double"):
        write_run(run, tmp_path / "r.parquet", {}, tmp_path / "r.trec", "s")
    assert not (tmp_path / "r.parquet").exists() and not (tmp_path / "r.trec").exists()


def test_ties_follow_byte_order_of_non_ascii_ids():
    # trec_eval compares ids with strcmp: UTF-8 bytes, "é" (0xC3 0xA9) after "z" (0x7A).
    run = pd.DataFrame({"query_id": "q", "doc_id": ["z", "é", "a", "Z"], "score": 1.0})
    assert trec_order(run)["doc_id"].tolist() == ["é", "z", "a", "Z"]


def test_a_run_repeating_a_document_for_a_query_is_not_written(tmp_path):
    # A corpus (or embeddings file) holding an id twice makes a retriever return it twice.
    run, _ = ids_run(
        ["q1", "q2"],
        [["d1", "d2"], ["d1", "d7", "d1", "d7"]],
        [[2.0, 1.0], [4.0, 3.0, 2.0, 1.0]],
        top_k=10,
        remove_self_matches=False,
    )
    path = tmp_path / "r.parquet"
    with pytest.raises(
        InputError,
        match=r"r\.parquet: document 'd1' is listed more than once for query 'q2' \(2 repeated",
    ):
        write_run(run, path, {}, tmp_path / "r.trec", "s")
    assert not path.exists() and not (tmp_path / "r.trec").exists()


def test_reading_a_run_file_that_repeats_a_document_fails_naming_file_and_pair(tmp_path):
    path = tmp_path / "external.parquet"
    rows = [("q", "a", 3.0, 1), ("q", "b", 2.0, 2), ("p", "a", 2.0, 1), ("q", "a", 1.0, 3)]
    table = pa.Table.from_pylist(
        [dict(zip(contracts.RUN.names, row)) for row in rows], contracts.RUN
    )
    contracts.write_table(table, path)
    with pytest.raises(
        InputError, match=r"external\.parquet: document 'a' is listed more than once for query 'q'"
    ):
        read_run(path)
    contracts.write_table(table.slice(0, 3), path)
    assert read_run(path)["doc_id"].tolist() == ["a", "b", "a"]


def test_runs_from_corpus_rows_cut_ties_by_byte_order_of_non_ascii_ids():
    doc_ids = ["z", "é", "a", "Z", "b"]
    run, removed = rows_run(["q"], doc_ids, [([0, 1, 2, 3, 4], [1, 1, 1, 1, 2])], 4, False)
    assert removed == 0
    assert run["doc_id"].tolist() == ["b", "é", "z", "a"]  # "Z" (0x5A) is cut at the tie
    assert run["rank"].tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("remove_self_matches", [False, True])
def test_runs_are_in_trec_order_cut_to_k(remove_self_matches):
    # Many ties, ids that sort differently by code point and by position, queries out of
    # order, a query that is also a document, one with no hits, one id held by two documents.
    rng = np.random.default_rng(0)
    doc_ids = ["d10", "d9", "é1", "Z", "q2", "d1", "ä", "d9"]
    query_ids = ["q2", "q10", "q1", "Q"]
    hits, sizes = [], (8, 6, 0, 5)
    for size in sizes:
        rows = np.sort(rng.choice(len(doc_ids), size=size, replace=False))
        hits.append((rows, rng.integers(0, 3, size=size).astype(np.float32) / 3))
    for top_k in (1, 3, 10):
        got, got_removed = rows_run(query_ids, doc_ids, hits, top_k, remove_self_matches)
        candidates = pd.DataFrame(
            {
                "query_id": np.repeat(np.asarray(query_ids, dtype=object), sizes),
                "doc_id": np.concatenate([np.asarray(doc_ids, dtype=object)[r] for r, _ in hits]),
                "score": np.concatenate([scores for _, scores in hits]).astype(np.float64),
            }
        )
        self_match = candidates["query_id"] == candidates["doc_id"]
        if remove_self_matches:
            candidates = candidates[~self_match]
        expected = trec_order(candidates)
        expected = expected[expected["rank"] <= top_k].reset_index(drop=True)
        expected_removed = int(self_match.sum()) if remove_self_matches else 0
        pd.testing.assert_frame_equal(got, expected)
        assert got_removed == expected_removed


def test_runs_from_corpus_rows_rank_queries_sharing_an_id_as_one_list():
    run, _ = rows_run(
        ["q", "p", "q"], ["a", "b", "c"], [([0], [1]), ([1], [1]), ([2], [2])], 5, False
    )
    assert run[["query_id", "doc_id", "rank"]].values.tolist() == [
        ["p", "b", 1],
        ["q", "c", 1],
        ["q", "a", 2],
    ]


def test_byte_order_codes_number_distinct_ids_in_utf8_byte_order():
    codes = byte_order_codes(pa.array(["z", "é", "a", "Z", "a"]))
    assert codes.tolist() == [2, 3, 1, 0, 1]


def test_short_queries_are_those_below_top_k_or_the_corpus_size():
    run = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q3", "q3"], "doc_id": "x"})
    queries, docs = pa.array(["q1", "q2", "q3", "q4"]), pa.array(["d1", "d2", "d3", "q3"])
    # q4 is absent: 0 documents.
    assert short_queries(run, queries, docs, 3, remove_self=False) == {"q2": 1, "q3": 2, "q4": 0}
    # q3's own id is a document: with self-matches removed it can have at most 3 of 4.
    assert short_queries(run, queries, docs, 10, remove_self=True) == {
        "q1": 3,
        "q2": 1,
        "q3": 2,
        "q4": 0,
    }
    assert short_queries(run, queries, docs, 2, remove_self=True) == {"q2": 1, "q4": 0}
