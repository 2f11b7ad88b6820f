"""saliency: the binning by hand, the gradient path with a tiny random BERT, MiniLM runs.

The tiny model is conftest's two-layer random BERT read as a bi-encoder (mean pooling) with a
16-token window, so a document of a few dozen words runs past it; its weights say nothing about
where saliency lies, only the plumbing is checked with it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_CORPUS, build_tiny_cross_encoder, minilm_spec

from irflow import contracts
from irflow.embed import Encoder
from irflow.saliency import (
    bin_profile,
    pair_saliency,
    saliency_figure,
    saliency_profile,
    sample_pairs,
)

WINDOW = 16  # the tiny model's max_seq_length: [CLS], 14 document tokens, [SEP]
LONG_DOCUMENT = " ".join(["cats purr and sleep in the warm sun all afternoon"] * 5)
SHORT_DOCUMENT = "cats purr"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, minilm_path):
    from sentence_transformers import SentenceTransformer

    folder = build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-bert"), minilm_path)
    model = SentenceTransformer(str(folder), device="cpu")
    model.max_seq_length = WINDOW
    return model


def document_tokens(model, text: str) -> int:
    return len(model.tokenizer(text, add_special_tokens=False)["input_ids"])


def test_bin_profile_averages_tokens_when_longer_than_bins():
    np.testing.assert_allclose(bin_profile([1.0, 0.0, 0.5, 0.25], 2), [0.5, 0.375])
    # The middle token straddles the edge: a sixth of it falls in each bin of width 1/2.
    np.testing.assert_allclose(bin_profile([1.0, 0.5, 0.0], 2), [5 / 6, 1 / 6])


def test_bin_profile_spreads_tokens_when_shorter_than_bins():
    np.testing.assert_allclose(bin_profile([1.0, 0.2], 4), [1.0, 1.0, 0.2, 0.2])
    # Bin [0.25, 0.5): 1/12 of token 0 and 1/6 of token 1; bin [0.5, 0.75): 1/6 of token 1
    # and 1/12 of token 2; the mean over bins equals the mean over tokens.
    binned = bin_profile([0.9, 0.3, 0.6], 4)
    np.testing.assert_allclose(binned, [0.9, 0.5, 0.4, 0.6])
    assert binned.mean() == pytest.approx(0.6)


def test_bin_profile_of_nothing_is_refused():
    with pytest.raises(ValueError, match="empty profile"):
        bin_profile([], 10)


def test_saliency_is_zero_past_the_window_of_the_whole_document(tiny_model):
    tokens = document_tokens(tiny_model, LONG_DOCUMENT)
    window = WINDOW - 2
    assert tokens > 3 * window
    result = pair_saliency(tiny_model, "why do cats purr", LONG_DOCUMENT)
    assert result.profile.size == tokens
    assert (result.window_tokens, result.cut_tokens) == (window, tokens - window)
    assert result.profile.max() == 1.0
    assert (result.profile[:window] > 0).all()
    assert (result.profile[window:] == 0).all()

    table = saliency_profile(tiny_model, [("why do cats purr", LONG_DOCUMENT)], "tiny", bins=10)
    read = window / tokens
    assert (table.loc[table["bin_start"] >= read, "saliency"] == 0).all()
    assert (table.loc[table["bin_end"] <= read, "saliency"] > 0).all()
    assert table[["pairs", "truncated_pairs", "cut_tokens"]].iloc[0].tolist() == [
        1,
        1,
        tokens - window,
    ]


def test_profile_table_shape_and_range(tiny_model):
    pairs = [("why do cats purr", LONG_DOCUMENT), ("what purrs", SHORT_DOCUMENT)]
    table = saliency_profile(tiny_model, pairs, "tiny", bins=7)
    assert list(table.columns) == [
        "model",
        "bin",
        "bin_start",
        "bin_end",
        "saliency",
        "saliency_sd",
        "pairs",
        "truncated_pairs",
        "cut_tokens",
    ]
    assert table["bin"].tolist() == list(range(7))
    np.testing.assert_allclose(table["bin_start"], np.arange(7) / 7)
    np.testing.assert_allclose(table["bin_end"], np.arange(1, 8) / 7)
    assert (table["saliency"] >= 0).all() and (table["saliency"] <= 1).all()
    assert (table["model"] == "tiny").all() and (table["pairs"] == 2).all()
    assert (table["truncated_pairs"] == 1).all()
    # Each bin's mean is the mean of the two documents' binned profiles.
    binned = [
        bin_profile(pair_saliency(tiny_model, query, document).profile, 7)
        for query, document in pairs
    ]
    np.testing.assert_allclose(table["saliency"], np.mean(binned, axis=0))
    np.testing.assert_allclose(table["saliency_sd"], np.std(binned, axis=0, ddof=1))


def test_saliency_is_deterministic(tiny_model):
    pairs = [("why do cats purr", LONG_DOCUMENT)]
    tiny_model.train()  # dropout on: the profile must switch it off
    first = saliency_profile(tiny_model, pairs, "tiny", bins=10)
    second = saliency_profile(tiny_model, pairs, "tiny", bins=10)
    pd.testing.assert_frame_equal(first, second)


def test_cosine_is_the_models_own_and_prompts_are_not_document(tiny_model):
    query, prompt = "why do cats purr", "passage: "
    result = pair_saliency(tiny_model, query, LONG_DOCUMENT, document_prompt=prompt)
    vectors = tiny_model.encode([query, prompt + LONG_DOCUMENT], normalize_embeddings=True)
    assert result.cosine == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-5)
    # The prompt's tokens take room in the window but get no saliency of their own.
    prompt_tokens = document_tokens(tiny_model, prompt)
    assert result.profile.size == document_tokens(tiny_model, LONG_DOCUMENT)
    assert result.window_tokens == WINDOW - 2 - prompt_tokens
    assert (result.profile[result.window_tokens :] == 0).all()


def test_sample_pairs_takes_each_querys_most_relevant_document():
    corpus = pd.DataFrame(
        {
            "doc_id": ["d1", "d2", "d3", "d4"],
            "title": ["Cats", "", None, None],
            "text": ["purr", "b", "c", ""],
        }
    )
    queries = pd.DataFrame(
        {"query_id": ["q1", "q2", "q3", "q4", "q5"], "text": ["a", "b", "c", "d", "e"]}
    )
    qrels = pd.DataFrame(
        {
            "query_id": ["q1", "q1", "q2", "q3", "q4", "q5"],
            # d9 is not in the corpus, d4 is empty
            "doc_id": ["d2", "d1", "d3", "d9", "d1", "d4"],
            "relevance": [1, 2, 1, 1, 0, 1],  # q4's only judgement is not relevant
        }
    )
    every = sample_pairs(queries, corpus, qrels, count=10, seed=0)
    assert every.values.tolist() == [["q1", "d1", "a", "Cats purr"], ["q2", "d3", "b", "c"]]
    one = sample_pairs(queries, corpus, qrels, count=1, seed=3)
    assert len(one) == 1 and one.iloc[0].tolist() in every.values.tolist()
    pd.testing.assert_frame_equal(one, sample_pairs(queries, corpus, qrels, count=1, seed=3))


def test_figure_draws_one_line_per_model(tiny_model):
    pairs = [("why do cats purr", LONG_DOCUMENT)]
    table = pd.concat(
        [saliency_profile(tiny_model, pairs, name, bins=5) for name in ("b-model", "a-model")]
    )
    axis = saliency_figure(table).axes[0]
    labels = [line.get_label() for line in axis.get_lines()]
    assert labels == ["a-model (1 pairs, 1 truncated)", "b-model (1 pairs, 1 truncated)"]
    np.testing.assert_allclose(axis.get_lines()[0].get_xdata(), [0.1, 0.3, 0.5, 0.7, 0.9])


def test_minilm_profile_is_finite(minilm_path):
    encoder = Encoder.load(minilm_spec(minilm_path))
    pairs = [
        (query, contracts.document_text(doc["title"], doc["text"]))
        for query, doc in zip(["why do cats purr", "what is the sun"], TINY_CORPUS[::2])
    ]
    table = saliency_profile(encoder.model, pairs, "minilm", bins=100)
    assert len(table) == 100
    assert np.isfinite(table["saliency"]).all() and table["saliency"].max() <= 1
    assert table["saliency"].min() > 0  # short documents: every bin holds a read token
    assert table["truncated_pairs"].iloc[0] == 0
