"""Runs: trec_eval order, self-match removal, TREC export and repeated documents."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from irflow import contracts
from irflow.errors import InputError
from irflow.runs import build_run, read_run, trec_order, write_run


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
    run, removed = build_run(
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
    run, removed = build_run(["q1"], [["q1", "d1"]], [[9, 8]], top_k=5, remove_self_matches=False)
    assert removed == 0 and run["doc_id"].tolist() == ["q1", "d1"]


def test_run_files_round_trip_with_exact_scores(tmp_path):
    scores = [0.1 + 0.2, 1 / 3]
    run, _ = build_run(["q"], [["a", "b"]], [scores], top_k=10, remove_self_matches=False)
    write_run(run, tmp_path / "r.parquet", {"system": "s"}, tmp_path / "r.trec", "s")
    back = pd.read_parquet(tmp_path / "r.parquet")
    assert back["score"].tolist() == sorted(scores, reverse=True)
    assert contracts.read_lineage(tmp_path / "r.parquet") == {"system": "s"}
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert lines[0].split() == ["q", "Q0", "b", "1", repr(1 / 3), "s"]
    assert float(lines[1].split()[4]) == 0.1 + 0.2


def test_ties_follow_byte_order_of_non_ascii_ids():
    # trec_eval compares ids with strcmp: UTF-8 bytes, "é" (0xC3 0xA9) after "z" (0x7A).
    run = pd.DataFrame({"query_id": "q", "doc_id": ["z", "é", "a", "Z"], "score": 1.0})
    assert trec_order(run)["doc_id"].tolist() == ["é", "z", "a", "Z"]


def test_a_run_repeating_a_document_for_a_query_is_not_written(tmp_path):
    # A corpus (or embeddings file) holding an id twice makes a retriever return it twice.
    run, _ = build_run(
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
