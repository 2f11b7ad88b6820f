"""Progress of each long step as log lines (irflow.core.progress), on the real code path with
IRFLOW_PROGRESS_SECONDS=0 (a line per update): BM25's indexing and search over SciFact, faiss'
IVF training, a bi-encoder's and a late-interaction model's reranking. Each line names the
step and gives the count done of the total and the rate; the results are those the step gives
without them."""

from __future__ import annotations

import gzip
import json
import logging
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from bm25_index import indexed
from conftest import TINY_CORPUS, index_spec, minilm_spec, schema_defaults
from tiny_models import build_tiny_colbert

from irflow.core import contracts
from irflow.core.progress import SECONDS_VARIABLE
from irflow.encoding.models import Encoder
from irflow.retrieval.bm25 import BM25Retriever
from irflow.retrieval.index import index_file
from irflow.retrieval.late_interaction import MaxSimScorer, TokenEncoder
from irflow.retrieval.rerank import rerank
from irflow.retrieval.scorers import BiEncoderScorer

SCIFACT_DOCUMENTS = 5183
BM25 = {"type": "bm25"}
DOCUMENTS = {d["_id"]: contracts.document_text(d["title"], d["text"]) for d in TINY_CORPUS}
QUERIES = {"q1": "why do cats purr", "q2": "what is the sun", "q3": "dogs and fish"}


@pytest.fixture(autouse=True)
def every_update_logged(monkeypatch, caplog):
    monkeypatch.setenv(SECONDS_VARIABLE, "0")
    caplog.set_level(logging.INFO)


def progress(caplog, desc: str, unit: str) -> list[tuple[int, int]]:
    """(done, total) of each of ``desc``'s progress lines; each after the first has a rate."""
    found = []
    for record in caplog.records:
        line = record.getMessage()
        if match := re.fullmatch(
            rf"{re.escape(desc)}: (\d+)/(\d+) {unit} \(\d+ %\) in \S+, +(\S+){unit}/s, \S+ left",
            line,
        ):
            done, total, rate = match.groups()
            assert rate == "?" if not found else float(rate) > 0, line
            found.append((int(done), int(total)))
    return found


@pytest.fixture(scope="module")
def scifact_tables(shared_datasets, tmp_path_factory):
    """SciFact's corpus and test queries as corpus and queries tables."""
    folder = tmp_path_factory.mktemp("scifact")
    shared = shared_datasets / "scifact"
    with gzip.open(shared / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        corpus = [json.loads(line) for line in lines]
    tested = set(pd.read_csv(shared / "qrels" / "test.tsv", sep="\t", dtype=str)["query-id"])
    with (shared / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = [q for q in map(json.loads, lines) if q["_id"] in tested]
    corpus_path, queries_path = folder / "corpus.parquet", folder / "queries.parquet"
    rows = [{"doc_id": d["_id"], "title": d["title"], "text": d["text"]} for d in corpus]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus_path)
    rows = [{"query_id": q["_id"], "text": q["text"]} for q in queries]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.QUERIES), queries_path)
    return corpus_path, queries_path


def test_bm25_indexing_and_search_log_their_progress(scifact_tables, caplog):
    """On main: no line (bm25s' own bars are switched off, show_progress=False)."""
    corpus, queries = scifact_tables
    spec = schema_defaults(BM25)
    folder, facts = indexed(corpus, spec)
    # A batch of 4,096 documents at a time (BM25_BATCH_ROWS), in both passes.
    batches = [(0, SCIFACT_DOCUMENTS), (4096, SCIFACT_DOCUMENTS)]
    finished = [(SCIFACT_DOCUMENTS, SCIFACT_DOCUMENTS)] * 2  # the last update, then the close
    assert progress(caplog, "bm25 tokenise", "documents") == batches + finished
    assert progress(caplog, "bm25 score", "documents") == batches + finished
    assert facts["documents"] == SCIFACT_DOCUMENTS

    texts = contracts.read_table(queries).column("text").to_pylist()
    retriever = BM25Retriever.load(folder, spec)
    caplog.clear()
    hits = retriever.search(texts, 100)
    lines = progress(caplog, "bm25 search", "queries")
    assert lines[0] == (0, 300) and lines[-1] == (300, 300) and len(lines) == 302
    # One query at a time (as its latency is timed): no line, and the same hits.
    caplog.clear()
    for text, (rows, scores) in zip(texts, hits):
        [(alone_rows, alone_scores)] = retriever.search([text], 100)
        np.testing.assert_array_equal(alone_rows, rows)
        np.testing.assert_array_equal(alone_scores, scores)
    assert not caplog.records


def test_ivf_training_is_announced_and_timed(tmp_path, caplog):
    """faiss' k-means gives no progress: a line before and after, with lists and rows. On
    main: neither."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(4000, 16)).astype(np.float32)
    table = pa.table(
        {"id": [f"d{i}" for i in range(len(vectors))], "vector": contracts.vector_array(vectors)},
        schema=contracts.embeddings_schema(16),
    )
    contracts.write_table(table, tmp_path / "corpus.parquet")
    spec = index_spec(type="ivf", nlist=20, target_recall=None)
    facts = index_file(tmp_path / "corpus.parquet", spec, tmp_path / "index.faiss")
    rows = facts["train_rows"]  # every third row: about 64 a list (TRAIN_ROWS_PER_LIST)
    assert rows == 1334
    messages = [record.getMessage() for record in caplog.records]
    train = [line for line in messages if line.startswith("train ")]
    assert train[0] == f"train {tmp_path / 'corpus.parquet'}: 20 lists on {rows} rows"
    assert re.fullmatch(
        rf"train {re.escape(str(tmp_path / 'corpus.parquet'))}: 20 lists on {rows} rows in "
        r"\d+\.\d s",
        train[1],
    )
    # Then the adds, as before.
    assert progress(caplog, f"index {tmp_path / 'corpus.parquet'}", "rows")[-1] == (4000, 4000)


def candidates() -> pd.DataFrame:
    return pd.DataFrame(
        [(q, d, 1.0 / rank) for q in QUERIES for rank, d in enumerate(DOCUMENTS, 1)],
        columns=["query_id", "doc_id", "score"],
    )


def test_bi_encoder_rerank_logs_the_documents_it_encodes(minilm_path, caplog):
    """Four distinct candidates, in batches of 2 (chunks of 3): a line per batch the model
    runs. On main: none. The scores are, bit for bit, the dot products of the vectors of the
    same chunks, encoded without the progress."""
    encoder = Encoder.load(minilm_spec(minilm_path, batch_size=2, chunk_size=3))
    run, _ = rerank(candidates(), QUERIES, DOCUMENTS, BiEncoderScorer(encoder), k=4)
    assert progress(caplog, "rerank: encode documents", "documents") == [
        (0, 4),
        (2, 4),
        (3, 4),  # the first chunk's last document, a batch of its own
        (4, 4),
        (4, 4),
    ]
    texts = list(DOCUMENTS.values())
    vectors = np.concatenate([encoder.encode(texts[:3], ""), encoder.encode(texts[3:], "")])
    by_text = dict(zip(texts, vectors.astype(np.float64)))
    queries = dict(zip(QUERIES, encoder.encode(list(QUERIES.values()), "")))
    for query_id, rows in run.groupby("query_id"):
        matrix = np.stack([by_text[DOCUMENTS[d]] for d in rows["doc_id"]])
        expected = matrix @ queries[query_id].astype(np.float64)
        np.testing.assert_array_equal(rows["score"].to_numpy(), expected)


def test_late_interaction_rerank_logs_the_queries_it_scored(minilm_path, tmp_path, caplog):
    """A tiny ColBERT: one batch of queries (their candidates fit in memory together). On
    main: no line."""
    colbert = build_tiny_colbert(tmp_path / "colbert", minilm_path)
    spec = minilm_spec(colbert, batch_size=4, chunk_size=3, max_seq_length=None)
    encoder = TokenEncoder.load(spec | {"query_length": None, "document_length": None})
    run, _ = rerank(candidates(), QUERIES, DOCUMENTS, MaxSimScorer(encoder), k=4)
    assert progress(caplog, "rerank", "queries") == [(0, 3), (3, 3), (3, 3)]
    alone = MaxSimScorer(encoder)
    for query_id, rows in run.groupby("query_id"):
        texts = [DOCUMENTS[d] for d in rows["doc_id"]]
        np.testing.assert_array_equal(
            rows["score"].to_numpy(), alone.score(QUERIES[query_id], texts)
        )
