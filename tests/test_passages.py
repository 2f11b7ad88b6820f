"""Long-document strategies: passage windows, and MaxP retrieval against a hand computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import index_spec
from pydantic import ValidationError
from test_retrieve import embeddings

from irflow.core import contracts
from irflow.data.passages import document_side, split_corpus, window_starts
from irflow.encoding.models import load_tokenizer
from irflow.retrieval.index import index_file
from irflow.retrieval.retrieve import dense_search

LONG_DOCUMENTS = {"strategy": "maxp", "passage_tokens": 4, "overlap": 1}


@pytest.mark.parametrize(
    ("tokens", "starts"),
    [(0, [0]), (1, [0]), (200, [0]), (201, [0, 150]), (350, [0, 150]), (351, [0, 150, 300])],
)
def test_windows_of_200_with_50_overlap(tokens, starts):
    assert window_starts(tokens, 200, 50) == starts


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    return load_tokenizer({"id": str(minilm_path), "revision": None})


def _split(tmp_path, tokenizer, rows, **settings):
    corpus = tmp_path / "corpus.parquet"
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus)
    out = tmp_path / "passages.parquet"
    stats = split_corpus(corpus, tokenizer, LONG_DOCUMENTS | settings, out)
    return pq.read_table(out).to_pandas(), stats


def test_passages_are_verbatim_overlapping_windows_with_the_title(tmp_path, tokenizer):
    rows = [
        {"doc_id": "long", "title": "T", "text": "one two three four five six seven"},
        {"doc_id": "empty", "title": "Only a title", "text": ""},
    ]
    passages, stats = _split(tmp_path, tokenizer, rows)
    assert passages["passage_id"].tolist() == ["long#0", "long#1", "empty#0"]
    assert passages["doc_id"].tolist() == ["long", "long", "empty"]
    # 7 tokens, windows of 4 every 3: tokens 0-3 and 3-6; the second ends at the text's end.
    assert passages["text"].tolist() == ["one two three four", "four five six seven", ""]
    assert passages["title"].tolist() == ["T", "T", "Only a title"]
    assert stats == {"documents": 2, "passages": 3, "passages_per_document": 1.5}


def test_firstp_keeps_only_the_first_window(tmp_path, tokenizer):
    rows = [{"doc_id": "d", "title": "", "text": "one two three four five six seven"}]
    passages, _ = _split(tmp_path, tokenizer, rows, strategy="firstp")
    assert passages["text"].tolist() == ["one two three four"]


def test_a_word_split_into_word_pieces_is_cut_at_token_offsets(tmp_path, tokenizer):
    text = "electroencephalography is long"
    pieces = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    spans = pieces["offset_mapping"]
    passages, _ = _split(tmp_path, tokenizer, [{"doc_id": "d", "title": "", "text": text}])
    assert passages["text"].iloc[0] == text[spans[0][0] : spans[3][1]]
    assert len(passages) == len(window_starts(len(spans), 4, 1))


def test_only_models_that_split_read_passages():
    # The entry is typed (irflow.core.settings_types.ModelModel): without long_documents, the
    # schema's default strategy (truncate) applies, where a dict's lookup failed.
    assert document_side({"id": "m"}) == "corpus"
    assert document_side({"id": "m", "long_documents": {"strategy": "truncate"}}) == "corpus"
    assert document_side({"id": "m", "long_documents": {"strategy": "maxp"}}) == "passages"
    assert document_side({"id": "m", "long_documents": {"strategy": "firstp"}}) == "passages"
    with pytest.raises(ValidationError, match="strategie"):
        document_side({"id": "m", "long_documents": {"strategie": "maxp"}})


def test_the_schemas_window_and_overlap_apply_where_long_documents_names_neither(
    tmp_path, tokenizer
):
    """split_corpus types a model's long_documents (irflow.core.settings_types.LongDocuments):
    the schema's passage_tokens 200 and overlap 50 (AIR-Bench's) apply where only the strategy
    is given; a key the schema lacks is refused, named."""
    corpus = tmp_path / "corpus.parquet"
    rows = [{"doc_id": "d", "title": "", "text": " ".join(["a"] * 351)}]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus)
    split_corpus(corpus, tokenizer, {"strategy": "maxp"}, tmp_path / "default.parquet")
    given = {"strategy": "maxp", "passage_tokens": 200, "overlap": 50}
    split_corpus(corpus, tokenizer, given, tmp_path / "given.parquet")
    passages = pq.read_table(tmp_path / "default.parquet").to_pandas()
    assert passages.equals(pq.read_table(tmp_path / "given.parquet").to_pandas())
    # 351 tokens: windows at 0, 150 and 300 (test_windows_of_200_with_50_overlap).
    assert [len(text.split()) for text in passages["text"]] == [200, 200, 51]
    with pytest.raises(ValidationError, match="passage_token\\b"):
        split_corpus(corpus, tokenizer, {"passage_token": 100}, tmp_path / "x.parquet")


@pytest.mark.parametrize("index_type", ["flat", "hnsw"])
def test_maxp_scores_a_document_by_its_best_passage(tmp_path, index_type):
    rng = np.random.default_rng(1)
    passage_docs = ["a", "a", "a", "b", "c", "c", "d", "e", "e", "e", "e", "f"]
    vectors = rng.normal(size=(len(passage_docs), 8))
    queries = rng.normal(size=(5, 8))
    passage_ids = [f"{doc}#{i}" for i, doc in enumerate(passage_docs)]
    embeddings(tmp_path / "p.parquet", passage_ids, vectors)
    embeddings(tmp_path / "q.parquet", [f"q{i}" for i in range(5)], queries)
    table = pd.DataFrame(
        {"passage_id": passage_ids, "doc_id": passage_docs, "title": "", "text": "x"}
    )
    contracts.write_frame(table, tmp_path / "passages.parquet", contracts.PASSAGES)
    spec = index_spec(type=index_type, M=8, ef_construction=64, ef_search=64)
    index_file(tmp_path / "p.parquet", spec, tmp_path / "i.faiss")
    run, _ = dense_search(
        tmp_path / "i.faiss",
        spec,
        tmp_path / "p.parquet",
        tmp_path / "q.parquet",
        top_k=4,
        remove_self_matches=False,
        batch_size=2,
        latency_queries=1,
        passages=tmp_path / "passages.parquet",
    )
    scores = queries.astype(np.float32) @ vectors.astype(np.float32).T
    for i in range(5):
        best = pd.Series(scores[i]).groupby(passage_docs).max().sort_values(ascending=False)
        got = run[run["query_id"] == f"q{i}"]
        assert got["doc_id"].tolist() == best.index[:4].tolist()
        assert got["score"].to_numpy() == pytest.approx(best.to_numpy()[:4], rel=1e-5)


def test_maxp_searches_deeper_until_enough_documents(tmp_path):
    # Document "a" has the 6 best passages for the query; top 2 documents need row 7.
    vectors = np.array([[1.0 - 0.01 * i, 0.0] for i in range(6)] + [[0.5, 0.0], [0.1, 0.0]])
    passage_docs = ["a"] * 6 + ["b", "c"]
    passage_ids = [f"{doc}#{i}" for i, doc in enumerate(passage_docs)]
    embeddings(tmp_path / "p.parquet", passage_ids, vectors)
    embeddings(tmp_path / "q.parquet", ["q"], np.array([[1.0, 0.0]]))
    table = pd.DataFrame(
        {"passage_id": passage_ids, "doc_id": passage_docs, "title": "", "text": ""}
    )
    contracts.write_frame(table, tmp_path / "passages.parquet", contracts.PASSAGES)
    index_file(tmp_path / "p.parquet", index_spec(type="flat"), tmp_path / "i.faiss")
    run, _ = dense_search(
        tmp_path / "i.faiss",
        index_spec(type="flat"),
        tmp_path / "p.parquet",
        tmp_path / "q.parquet",
        top_k=2,
        remove_self_matches=False,
        batch_size=1,
        latency_queries=0,
        passages=tmp_path / "passages.parquet",
    )
    assert run["doc_id"].tolist() == ["a", "b"]
    assert run["score"].tolist() == pytest.approx([1.0, 0.5])


def test_passages_longer_than_the_window_with_title_and_prompt_are_counted(
    tmp_path, tokenizer, caplog, minilm_path
):
    from irflow.data.passages import model_window

    rows = [
        {"doc_id": "a", "title": "", "text": "one two three four five six seven"},
        {"doc_id": "b", "title": "cats", "text": "one two three four five six seven"},
    ]
    corpus = tmp_path / "corpus.parquet"
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus)
    # 4 passage tokens and [CLS], [SEP]: 6 fit; a title or a prompt word does not.
    stats = split_corpus(corpus, tokenizer, LONG_DOCUMENTS, tmp_path / "p.parquet", window=6)
    assert (stats["passages"], stats["passages_over_window"]) == (4, 2)
    assert "2 of 4 passages are longer than the model's 6-token window" in caplog.text
    prompted = split_corpus(
        corpus, tokenizer, LONG_DOCUMENTS, tmp_path / "q.parquet", prompt="passage ", window=6
    )
    assert prompted["passages_over_window"] == 4
    unchecked = split_corpus(corpus, tokenizer, LONG_DOCUMENTS, tmp_path / "r.parquet")
    assert "passages_over_window" not in unchecked
    # MiniLM reads 256 tokens (its sentence_bert_config.json), not its tokenizer's 512.
    assert model_window(str(minilm_path), None, tokenizer) == 256
    assert model_window(str(minilm_path), 128, tokenizer) == 128
