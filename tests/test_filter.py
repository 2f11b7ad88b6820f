"""filter: which documents go, why, and that judged documents are never dropped silently."""

from __future__ import annotations

import pyarrow.parquet as pq
from conftest import write_beir

from irflow.filter import run_filter
from irflow.ingest import ingest

CORPUS = [
    {"_id": "a", "title": "", "text": "   "},  # empty
    {"_id": "b", "title": "T", "text": "one two three"},
    {"_id": "c", "title": "T", "text": "one two three"},  # duplicate of b
    {"_id": "d", "title": "", "text": "w " * 50},  # long
    {"_id": "e", "title": "", "text": ""},  # empty but judged
    {"_id": "f", "title": "T", "text": "one two three"},  # duplicate, judged
]
QUERIES = [{"_id": "q1", "text": "one"}, {"_id": "q2", "text": "two"}, {"_id": "q3", "text": "x"}]
QRELS = [("q1", "e", 1), ("q1", "f", 1), ("q2", "b", 0)]
RULES = {
    "drop_empty": True,
    "drop_duplicates": True,
    "min_words": None,
    "max_words": 20,
    "judged": "flag",
}


def filtered(tmp_path, **rules):
    folder = write_beir(tmp_path / "raw", CORPUS, QUERIES, QRELS)
    data = tmp_path / "data"
    ingest(folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / "test.tsv", data)
    out = tmp_path / "out"
    counts = run_filter(
        data / "corpus.parquet",
        data / "queries.parquet",
        data / "qrels.parquet",
        RULES | rules,
        out / "corpus.parquet",
        out / "queries.parquet",
        out / "audit.parquet",
    )
    corpus = pq.read_table(out / "corpus.parquet").column("doc_id").to_pylist()
    audit = {row["doc_id"]: row for row in pq.read_table(out / "audit.parquet").to_pylist()}
    queries = pq.read_table(out / "queries.parquet").column("query_id").to_pylist()
    return corpus, audit, queries, counts


def test_drops_are_audited_and_judged_documents_flagged(tmp_path):
    corpus, audit, _, counts = filtered(tmp_path)
    assert corpus == ["b", "e", "f"]
    assert {k: (v["action"], v["reason"], v["judged"]) for k, v in audit.items()} == {
        "a": ("drop", "empty", False),
        "c": ("drop", "exact duplicate", False),
        "d": ("drop", "longer than 20 words", False),
        "e": ("flag", "empty", True),
        "f": ("flag", "exact duplicate", True),
    }
    assert counts | {"rules": None} == {
        "documents_in": 6,
        "documents_out": 3,
        "dropped": 3,
        "flagged": 2,
        "queries_scored": 2,
        "rules": None,
    }


def test_judged_documents_can_be_dropped_explicitly(tmp_path):
    corpus, audit, _, _ = filtered(tmp_path, judged="drop")
    assert corpus == ["b"]
    assert audit["e"]["action"] == "drop" and audit["e"]["judged"]


def test_rules_can_be_switched_off(tmp_path):
    corpus, audit, _, _ = filtered(
        tmp_path, drop_empty=False, drop_duplicates=False, max_words=None, min_words=2
    )
    assert corpus == ["b", "c", "d", "e", "f"]
    assert audit["a"]["reason"] == "shorter than 2 words"


def test_only_judged_queries_are_scored(tmp_path):
    _, _, queries, _ = filtered(tmp_path)
    assert queries == ["q1", "q2"]  # q2's only judgement is grade 0: still judged
