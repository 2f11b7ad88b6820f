"""Late interaction: token vectors (resumable, as dense ones) and exact MaxSim, first stage and
reranker, on a tiny ColBERT built here; scores checked against MaxSim computed by hand from the
library's own token vectors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import minilm_spec
from test_sparse import QUERIES, TEXTS, encode_and_search, write_tables
from tiny_models import build_tiny_colbert

from irflow import late_interaction
from irflow.encode_parts import encode_file
from irflow.late_interaction import (
    MaxSimScorer,
    TokenEncoder,
    TokenVectors,
    late_interaction_search,
)
from irflow.rerank import rerank


@pytest.fixture(scope="module")
def encoder(tmp_path_factory, minilm_path) -> TokenEncoder:
    folder = build_tiny_colbert(tmp_path_factory.mktemp("colbert"), minilm_path)
    return TokenEncoder.load(minilm_spec(folder, batch_size=4, chunk_size=3))


def by_hand(query: np.ndarray, document: np.ndarray) -> float:
    """MaxSim: each query token's best dot product with a document token, summed (float64)."""
    return float((query.astype(np.float64) @ document.astype(np.float64).T).max(axis=1).sum())


def test_first_stage_scores_are_maxsim_of_the_library_token_vectors(encoder, tmp_path):
    run, timing = encode_and_search(encoder, late_interaction_search, tmp_path)
    docs = encoder.model.encode_document(TEXTS, convert_to_numpy=True)
    qs = encoder.model.encode_query(QUERIES, convert_to_numpy=True)
    for q, query in enumerate(qs):
        expected = sorted(
            ((by_hand(query, doc), f"d{d}") for d, doc in enumerate(docs)), reverse=True
        )[:4]
        mine = run[run.query_id == f"q{q}"]
        assert mine.doc_id.tolist() == [doc for _, doc in expected]
        np.testing.assert_allclose(mine.score, [s for s, _ in expected], rtol=1e-6)
    tokens = sum(len(doc) for doc in docs)
    assert timing["tokens_per_document"] == tokens / len(TEXTS)
    assert timing["index_bytes"] == tokens * 128 * 4 + (len(TEXTS) + 1) * 8


def test_stored_token_vectors_are_the_library_vectors(encoder, tmp_path):
    corpus, _ = write_tables(tmp_path)
    encode_file(encoder, corpus, "corpus", tmp_path / "docs.parquet")
    stored = TokenVectors.read(tmp_path / "docs.parquet")
    for row, doc in enumerate(encoder.model.encode_document(TEXTS, convert_to_numpy=True)):
        np.testing.assert_allclose(stored.rows(row, row + 1)[0].numpy(), doc, rtol=1e-5, atol=1e-6)


def test_query_batches_do_not_change_the_run(encoder, tmp_path, monkeypatch):
    corpus, queries = write_tables(tmp_path)
    encode_file(encoder, corpus, "corpus", tmp_path / "docs.parquet")
    encode_file(encoder, queries, "queries", tmp_path / "qv.parquet")
    whole, _ = late_interaction_search(
        tmp_path / "docs.parquet", tmp_path / "qv.parquet", 3, False, 64
    )
    monkeypatch.setattr(late_interaction, "MAX_SCORE_ENTRIES", len(TEXTS))  # a query a batch
    monkeypatch.setattr(late_interaction, "MAXSIM_CHUNK_ELEMENTS", 1000)
    one_by_one, _ = late_interaction_search(
        tmp_path / "docs.parquet", tmp_path / "qv.parquet", 3, False, 64
    )
    pd.testing.assert_frame_equal(whole, one_by_one, rtol=1e-6)


def test_reranker_scores_candidates_by_maxsim(encoder):
    documents = {f"d{i}": text for i, text in enumerate(TEXTS)}
    queries = {f"q{i}": text for i, text in enumerate(QUERIES)}
    first_stage = pd.DataFrame(
        [(q, d, float(-i)) for q in queries for i, d in enumerate(documents)],
        columns=["query_id", "doc_id", "score"],
    )
    run, latency = rerank(first_stage, queries, documents, MaxSimScorer(encoder), 5, len(queries))
    assert list(latency) == list(queries)
    for query_id, query in queries.items():
        q = encoder.model.encode_query([query], convert_to_numpy=True)[0]
        mine = run[run.query_id == query_id]
        assert set(mine.doc_id) == {f"d{i}" for i in range(5)}  # only the first stage's top 5
        for doc_id, score in zip(mine.doc_id, mine.score):
            d = encoder.model.encode_document([documents[doc_id]], convert_to_numpy=True)[0]
            assert score == pytest.approx(by_hand(q, d), rel=1e-5)
        assert mine.score.is_monotonic_decreasing
