"""Document expansion on a tiny T5 built here: each document is followed by exactly the
queries the model samples for it with the same seed; the expanded corpus is a dataset whose
BM25 scores its expanded text."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from conftest import schema_defaults
from test_sparse import TEXTS
from tiny_models import build_tiny_doc2query

from irflow.config import load_schema, validate_config
from irflow.expand import QueryGenerator, expand_corpus

SPEC = {
    "revision": None,
    "queries": 3,
    "top_k": 10,
    "max_length": 64,
    "max_new_tokens": 6,
    "seed": 7,
    "batch_size": 3,
    "dtype": "float32",
    "device": "cpu",
}


@pytest.fixture(scope="module")
def generator(tmp_path_factory, minilm_path) -> QueryGenerator:
    folder = build_tiny_doc2query(tmp_path_factory.mktemp("d2q"), minilm_path)
    return QueryGenerator.load(SPEC | {"id": str(folder)})


def corpus() -> pd.DataFrame:
    ids = [f"d{i}" for i in range(len(TEXTS))]
    return pd.DataFrame({"doc_id": ids, "title": "", "text": TEXTS})


def test_documents_are_followed_by_the_queries_the_model_samples(generator):
    expanded, stats = expand_corpus(corpus(), generator)
    # The bare library call, seeded the same, batch after batch.
    torch.manual_seed(SPEC["seed"])
    expected = []
    for start in range(0, len(TEXTS), SPEC["batch_size"]):
        batch = generator.tokenizer(
            TEXTS[start : start + SPEC["batch_size"]], padding=True, return_tensors="pt"
        )
        out = generator.model.generate(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            do_sample=True,
            top_k=10,
            max_new_tokens=6,
            num_return_sequences=3,
        )
        decoded = generator.tokenizer.batch_decode(out, skip_special_tokens=True)
        expected += [decoded[i : i + 3] for i in range(0, len(decoded), 3)]
    assert expanded["text"].tolist() == [
        " ".join([text, *queries]) for text, queries in zip(TEXTS, expected)
    ]
    assert expanded["doc_id"].tolist() == corpus()["doc_id"].tolist()
    assert stats["queries_per_document"] == 3
    assert any(text != original for text, original in zip(expanded["text"], TEXTS))


def test_same_seed_same_corpus_other_seed_other_corpus(generator):
    first, _ = expand_corpus(corpus(), generator)
    again, _ = expand_corpus(corpus(), generator)
    assert first.equals(again)
    other = QueryGenerator(generator.model, generator.tokenizer, SPEC | {"seed": 8}, {})
    assert not expand_corpus(corpus(), other)[0].equals(first)


def test_expand_block_must_name_a_dataset_and_a_new_name(tmp_path):
    from irflow.errors import ConfigError

    schema = load_schema("config/config.schema.yaml")
    base = {
        "datasets": {"d": {"source": {"path": "."}}},
        "retrievers": {"bm25": schema_defaults({"type": "bm25"})},
    }
    with pytest.raises(ConfigError, match="'expand.x.dataset': 'nope' is not a key of 'datasets'"):
        validate_config(
            base | {"expand": {"x": {"dataset": "nope", "model": {"id": "a/b"}}}}, schema
        )
    with pytest.raises(ConfigError, match="'expand.d': the name is already a dataset's"):
        validate_config(base | {"expand": {"d": {"dataset": "d", "model": {"id": "a/b"}}}}, schema)
    config = validate_config(
        base | {"expand": {"x": {"dataset": "d", "model": {"id": "a/b"}}}}, schema
    )
    assert config["expand"]["x"]["model"]["queries"] == 20
