"""benchmarks/scale/make_corpus.py: a small recombined corpus from the shared SciFact."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest
from conftest import REPO

from irflow.data.ingest import ingest

sys.path.insert(0, str(REPO / "benchmarks" / "scale"))
from make_corpus import make_corpus

DOCUMENTS = 3_000
QUERIES = 40


def build(folder: Path, shared_datasets: Path, seed: int = 0) -> Path:
    make_corpus(folder, DOCUMENTS, QUERIES, seed, [shared_datasets / "scifact"])
    return folder


def read_corpus(folder: Path) -> list[dict]:
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def read_qrels(folder: Path) -> list[list[str]]:
    lines = (folder / "qrels" / "test.tsv").read_text().splitlines()
    assert lines[0] == "query-id\tcorpus-id\tscore"
    return [line.split("\t") for line in lines[1:]]


@pytest.fixture(scope="module")
def generated(tmp_path_factory, shared_datasets) -> Path:
    return build(tmp_path_factory.mktemp("scale") / "corpus", shared_datasets)


def test_same_seed_gives_identical_bytes(generated, shared_datasets, tmp_path):
    again = build(tmp_path / "again", shared_datasets)
    for name in ("corpus.jsonl.gz", "queries.jsonl", "qrels/test.tsv", "sources.tsv"):
        assert (again / name).read_bytes() == (generated / name).read_bytes(), name


def test_another_seed_gives_another_corpus(generated, shared_datasets, tmp_path):
    other = build(tmp_path / "other", shared_datasets, seed=1)
    assert read_corpus(other) != read_corpus(generated)
    assert read_qrels(other) != read_qrels(generated)


def test_documents_are_unique_and_non_empty(generated):
    corpus = read_corpus(generated)
    assert [doc["_id"] for doc in corpus] == [f"d{i:07d}" for i in range(DOCUMENTS)]
    assert all(doc["text"].strip() for doc in corpus)
    # The window sampling makes exact duplicates (of text) practically impossible.
    assert len({doc["text"] for doc in corpus}) == DOCUMENTS


def test_qrels_name_existing_queries_and_documents(generated):
    doc_ids = {doc["_id"] for doc in read_corpus(generated)}
    queries = [json.loads(line) for line in (generated / "queries.jsonl").read_text().splitlines()]
    query_ids = [query["_id"] for query in queries]
    assert len(query_ids) == QUERIES == len(set(query_ids))
    qrels = read_qrels(generated)
    assert {query_id for query_id, _, _ in qrels} == set(query_ids)  # every query judged
    assert {doc_id for _, doc_id, _ in qrels} <= doc_ids
    assert all(int(grade) > 0 for _, _, grade in qrels)


def test_relevant_documents_hold_the_source_documents_sentences(generated, shared_datasets):
    """A planted document starts with the leading sentences of the source's relevant one."""
    with gzip.open(shared_datasets / "scifact" / "corpus.jsonl.gz", "rt") as f:
        source_docs = {(d := json.loads(line))["_id"]: d for line in f}
    source_qrels = [
        line.split("\t") for line in (shared_datasets / "scifact" / "qrels" / "test.tsv").open()
    ]
    mapping = [line.split("\t") for line in (generated / "sources.tsv").read_text().splitlines()]
    original = {query_id: source_id.strip() for query_id, _, source_id in mapping[1:]}
    corpus = {doc["_id"]: doc for doc in read_corpus(generated)}
    for query_id, doc_id, _ in read_qrels(generated):
        planted = corpus[doc_id]
        candidates = [source_docs[d] for q, d, _ in source_qrels if q == original[query_id]]
        assert any(
            planted["title"] == " ".join(c["title"].split())
            and " ".join(c["text"].split()).startswith(planted["text"])
            for c in candidates
        ), (query_id, doc_id)


def test_irflow_ingests_the_folder(generated, tmp_path):
    stats = ingest(
        generated / "corpus.jsonl.gz",
        generated / "queries.jsonl",
        generated / "qrels" / "test.tsv",
        tmp_path / "ingested",
    )
    assert (tmp_path / "ingested" / "corpus.parquet").exists()
    assert json.dumps(stats)  # statistics are plain JSON
    summary = json.loads((generated / "summary.json").read_text())
    assert summary["documents"] == DOCUMENTS and summary["queries"] == QUERIES
    assert 50 <= summary["mean_words"] <= 150
