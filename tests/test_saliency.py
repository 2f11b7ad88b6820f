"""saliency: the binning by hand, the gradient path with a tiny random BERT, MiniLM runs.

The tiny model is conftest's two-layer random BERT read as a bi-encoder (mean pooling) with a
16-token window, so a document of a few dozen words runs past it; its weights say nothing about
where saliency lies, only the plumbing is checked with it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import SCHEMA, TINY_CORPUS, minilm_spec, minimal_config, snakemake, validated
from pydantic import ValidationError
from tiny_models import build_tiny_bi_encoder, build_tiny_bpe_bi_encoder, build_tiny_cross_encoder

from irflow.analyses.saliency import (
    bin_profile,
    interpolate_profile,
    pair_saliency,
    saliency_figure,
    saliency_profile,
    saliency_table,
    sample_pairs,
)
from irflow.core import contracts
from irflow.core.errors import ConfigError
from irflow.encoding.models import Encoder
from irflow.workflow.config import validate_config

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


@pytest.fixture(scope="module")
def bpe_model(tmp_path_factory):
    """A two-layer random BERT that reads with a byte-level BPE (RoBERTa's kind of tokenizer,
    where a word's leading space is part of its token)."""
    from sentence_transformers import SentenceTransformer

    texts = [LONG_DOCUMENT, "passage: cats purr", "why do cats purr"]
    folder = build_tiny_bpe_bi_encoder(tmp_path_factory.mktemp("tiny-bpe"), texts)
    model = SentenceTransformer(str(folder), device="cpu")
    model.max_seq_length = 64
    return model


def by_hand(model, query: str, text: str, document: slice) -> tuple[np.ndarray, float]:
    """The saliency written out: the model's BERT run directly, mean pooling by hand, the
    cosine's gradient at each input embedding, its Euclidean length over the embedding
    dimensions, the ``document`` positions kept and divided by their maximum."""
    import torch

    bert = model[0].auto_model.eval()
    tokenizer = model.tokenizer
    with torch.no_grad():
        query_vector = bert(**tokenizer(query, return_tensors="pt")).last_hidden_state[0].mean(0)
    inputs = tokenizer(text, return_tensors="pt")
    embeds = bert.get_input_embeddings()(inputs.pop("input_ids")).detach().requires_grad_()
    vector = bert(inputs_embeds=embeds, **inputs).last_hidden_state[0].mean(0)
    cosine = vector @ query_vector / (vector.norm() * query_vector.norm())
    cosine.backward()
    gradient = embeds.grad[0, document].numpy().astype(np.float64)
    length = np.sqrt((gradient**2).sum(axis=1))
    return length / length.max(), float(cosine.detach())


def one_dataset(table: pd.DataFrame, dataset: str = "d") -> pd.DataFrame:
    """The rows of one dataset's curve (or the pooled one, ``all``), numbered from 0."""
    return table[table["dataset"] == dataset].reset_index(drop=True)


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


def test_interpolation_samples_evenly_spaced_points_as_posir():
    """PosIR's qwen3_exp.py, resample_to_fixed_length: np.interp at np.linspace(0, 1, 100) of
    the tokens placed at np.linspace(0, 1, n)."""
    # Tokens at 0, 0.5 and 1; points at 0, 0.25, 0.5, 0.75 and 1.
    np.testing.assert_allclose(interpolate_profile([1.0, 0.0, 0.5], 5), [1.0, 0.5, 0.0, 0.25, 0.5])
    np.testing.assert_allclose(interpolate_profile([0.3], 3), [0.3, 0.3, 0.3])
    # A long profile: only the tokens next to a point count (here tokens 0, 4 and 8 of 9).
    np.testing.assert_allclose(interpolate_profile([1.0] + [0.0] * 7 + [1.0], 3), [1, 0, 1])
    with pytest.raises(ValueError, match="empty profile"):
        interpolate_profile([], 10)


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

    table = one_dataset(
        saliency_profile(tiny_model, {"d": [("why do cats purr", LONG_DOCUMENT)]}, "tiny", bins=10)
    )
    # Token i of n sits at i / (n - 1): the last read token at (window - 1) / (tokens - 1).
    read = (window - 1) / (tokens - 1)
    assert (table.loc[table["position"] > read, "saliency"] == 0).all()
    assert (table.loc[table["position"] <= read, "saliency"] > 0).all()
    assert table[["pairs", "truncated_pairs", "cut_tokens"]].iloc[0].tolist() == [
        1,
        1,
        tokens - window,
    ]


def test_profile_table_shape_and_range(tiny_model):
    pairs = [("why do cats purr", LONG_DOCUMENT), ("what purrs", SHORT_DOCUMENT)]
    every = saliency_profile(tiny_model, {"d": pairs}, "tiny", bins=7)
    assert list(every.columns) == [
        "model",
        "dataset",
        "point",
        "position",
        "saliency",
        "saliency_sd",
        "pairs",
        "truncated_pairs",
        "cut_tokens",
        "resample",
    ]
    # One dataset: its curve, then the pooled curve of the same pairs.
    assert every["dataset"].tolist() == ["d"] * 7 + ["all"] * 7
    table = one_dataset(every)
    pd.testing.assert_frame_equal(table, one_dataset(every, "all").assign(dataset="d"))
    assert table["point"].tolist() == list(range(7))
    assert (table["resample"] == "interpolate").all()
    # PosIR's points: both ends of the document and evenly between.
    np.testing.assert_allclose(table["position"], np.linspace(0, 1, 7))
    assert (table["saliency"] >= 0).all() and (table["saliency"] <= 1).all()
    assert (table["model"] == "tiny").all() and (table["pairs"] == 2).all()
    assert (table["truncated_pairs"] == 1).all()
    # Each point's mean is the mean of the two documents' interpolated profiles.
    profiles = [pair_saliency(tiny_model, query, document).profile for query, document in pairs]
    sampled = [np.interp(np.linspace(0, 1, 7), np.linspace(0, 1, p.size), p) for p in profiles]
    np.testing.assert_allclose(table["saliency"], np.mean(sampled, axis=0))
    np.testing.assert_allclose(table["saliency_sd"], np.std(sampled, axis=0, ddof=1))
    # The named variant: each bin's mean over its tokens, placed at the bin's centre.
    binned = one_dataset(
        saliency_profile(tiny_model, {"d": pairs}, "tiny", bins=7, resample="bin_mean")
    )
    assert (binned["resample"] == "bin_mean").all()
    np.testing.assert_allclose(binned["position"], (np.arange(7) + 0.5) / 7)
    means = [bin_profile(profile, 7) for profile in profiles]
    np.testing.assert_allclose(binned["saliency"], np.mean(means, axis=0))
    with pytest.raises(ValueError, match="resample 'nearest'"):
        saliency_profile(tiny_model, {"d": pairs}, "tiny", resample="nearest")
    with pytest.raises(ValueError, match="at least one"):
        saliency_profile(tiny_model, {"d": pairs, "e": []}, "tiny")
    with pytest.raises(ValueError, match="'all' names the pooled curve"):
        saliency_profile(tiny_model, {"all": pairs}, "tiny")


def test_saliency_is_deterministic(tiny_model):
    pairs = {"d": [("why do cats purr", LONG_DOCUMENT)]}
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


def test_saliency_is_the_l2_norm_of_the_cosines_input_gradient(tiny_model):
    query, document = "why do cats purr", "cats purr and sleep in the sun"
    expected, cosine = by_hand(tiny_model, query, document, slice(1, -1))  # not [CLS], [SEP]
    result = pair_saliency(tiny_model, query, document)
    assert result.cosine == pytest.approx(cosine, abs=1e-6)
    assert result.window_tokens == result.profile.size == document_tokens(tiny_model, document)
    np.testing.assert_allclose(result.profile, expected, rtol=1e-5)


def test_byte_level_bpe_keeps_the_first_document_token_after_a_prompt(bpe_model):
    query, prompt, document = "why do cats purr", "passage: ", "cats purr and sleep"
    tokenizer = bpe_model.tokenizer
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(prompt + document)["input_ids"])
    # The prompt alone ends in a token of its own, a space, that the document's "Ġcats" takes.
    assert tokenizer.tokenize(prompt)[-1] == "Ġ" and tokens[3] == "Ġcats"
    expected, _ = by_hand(bpe_model, query, prompt + document, slice(3, -1))
    result = pair_saliency(bpe_model, query, document, document_prompt=prompt)
    assert result.profile.size == result.window_tokens == len(tokens) - 4
    np.testing.assert_allclose(result.profile, expected, rtol=1e-5)


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


def test_posirs_selection_takes_long_documents_with_the_span_in_the_middle():
    from test_positionalize import word_tokenizer

    words = " ".join(["w"] * 1023)  # 2045 characters
    corpus = pd.DataFrame(
        {
            "doc_id": ["long", "longer", "short", "edge", "title"],
            "title": ["", "", "", "", "T"],
            "text": [words, words + " w", "w " * 10 + "w", words + " wwww", words + " w"],
        }
    )
    queries = pd.DataFrame({"query_id": list("abcdef"), "text": list("abcdef")})
    qrels = pd.DataFrame(
        {
            "query_id": list("abcdef"),
            "doc_id": ["long", "longer", "short", "edge", "longer", "title"],
            "relevance": [1, 1, 1, 1, 1, 1],
            # centres over 2045, 2047, 21, 2050 and 2047 characters: .49, .39, .5, .6
            # (inclusive), none, .51
            "span_start": pd.array([1000, 780, 10, 1230, None, 1000], dtype="Int64"),
            "span_end": pd.array([1010, 800, 11, 1230, None, 1049], dtype="Int64"),
        }
    )
    args = (queries, corpus, qrels)
    chosen = sample_pairs(*args, None, 0, select="posir", tokenizer=word_tokenizer())
    # "long" has 1023 tokens; "title" counts its title as the model reads it: 1025 tokens.
    assert chosen["query_id"].tolist() == ["d", "f"]
    assert chosen["document"].iloc[1] == "T " + words + " w"
    loose = sample_pairs(
        *args, None, 0, "posir", tokenizer=word_tokenizer(), min_tokens=1000, centre=(0.3, 0.6)
    )
    assert loose["query_id"].tolist() == ["a", "b", "d", "f"]
    one = sample_pairs(
        *args, 1, 5, "posir", tokenizer=word_tokenizer(), min_tokens=1000, centre=(0.3, 0.6)
    )
    assert len(one) == 1 and one["query_id"].item() in {"a", "b", "d", "f"}
    assert len(sample_pairs(*args, None, 0, select="random")) == 6


def test_saliency_selection_is_posirs_by_default_and_random_needs_a_count():
    config = minimal_config()
    saliency = validate_config(config, SCHEMA)["position_analysis"]["saliency"]
    assert (saliency["select"], saliency["queries"]) == ("posir", None)
    assert (saliency["min_tokens"], saliency["centre"]) == (1024, [0.4, 0.6])
    config["position_analysis"] = {"saliency": {"select": "random"}}
    with pytest.raises(ConfigError, match="position_analysis.saliency.queries"):
        validate_config(config, SCHEMA)


def test_the_pairs_tokenizer_reads_the_typed_saliency_block():
    """The saliency_pairs job's tokenizer param types ``position_analysis.saliency``
    (irflow.core.settings_types.Saliency): a block that names only its models takes the
    schema's defaults (no tokenizer: the first model's; PosIR's selection, which counts tokens),
    and a key the schema lacks is refused, naming it."""
    from irflow.analyses.saliency import pairs_tokenizer, pairs_tokenizer_source

    config = validated(models={"m": {"id": "org/m"}})
    config["position_analysis"]["saliency"] = {"models": ["m"]}
    assert pairs_tokenizer(config, "d") == "m"
    assert pairs_tokenizer_source(config, "d") == {"id": "org/m", "revision": None}
    config["position_analysis"]["saliency"] = {"models": ["m"], "tokeniser": "org/t"}
    with pytest.raises(ValidationError, match="tokeniser"):
        pairs_tokenizer(config, "d")


def test_a_variant_shorter_than_min_tokens_is_refused_at_config_time():
    """A 512-token variant cannot hold a document of the default min_tokens 1,024: PosIR's
    selection would find no pair, so the config names the key and both lengths."""
    config = minimal_config(
        "scifact",
        models={"minilm": {"id": "sentence-transformers/all-MiniLM-L6-v2"}},
        positionalize={
            "scifact": {"dataset": "scifact", "tokenizer": "minilm", "lengths": [512, 1024]}
        },
        position_analysis={
            "saliency": {"models": ["minilm"], "datasets": ["scifact@L1024@p0", "scifact@L512@p0"]}
        },
    )
    with pytest.raises(ConfigError) as error:
        validate_config(config, SCHEMA)
    message = str(error.value)
    assert "'position_analysis.saliency.min_tokens': 1024" in message
    assert "'scifact@L512@p0'" in message and "at most 512 tokens" in message
    config["position_analysis"]["saliency"]["datasets"] = ["scifact@L1024@p0"]
    validate_config(config, SCHEMA)
    # Random pairs have no length to meet.
    config["position_analysis"]["saliency"] |= {
        "datasets": ["scifact@L512@p0"],
        "select": "random",
        "queries": 5,
    }
    validate_config(config, SCHEMA)


def test_no_qualifying_pair_is_a_clear_error_not_a_traceback():
    from test_positionalize import word_tokenizer

    corpus = pd.DataFrame({"doc_id": ["d1", "d2"], "title": "", "text": ["a b c d", "e f"]})
    queries = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["a", "e"]})
    qrels = pd.DataFrame(
        {
            "query_id": ["q1", "q2"],
            "doc_id": ["d1", "d2"],
            "relevance": [1, 1],
            "span_start": pd.array([3, 0], dtype="Int64"),
            "span_end": pd.array([4, 1], dtype="Int64"),
        }
    )
    with pytest.raises(ConfigError) as error:
        sample_pairs(
            queries,
            corpus,
            qrels,
            None,
            0,
            "posir",
            tokenizer=word_tokenizer(),
            min_tokens=1024,
            dataset="sci@L4",
        )
    message = str(error.value)
    assert message.startswith("sci@L4: no pair qualifies for PosIR's selection")
    assert "'position_analysis.saliency.min_tokens' is 1024" in message
    assert "the longest relevant document has 4 tokens" in message
    assert "2 queries with a span, 0 with a document of at least 1024 tokens" in message


def test_figure_draws_one_line_per_model(tiny_model):
    pairs = {"d": [("why do cats purr", LONG_DOCUMENT)]}
    table = pd.concat(
        [saliency_profile(tiny_model, pairs, name, bins=5) for name in ("b-model", "a-model")]
    )
    axis = saliency_figure(table).axes[0]
    labels = [line.get_label() for line in axis.get_lines()]
    assert labels == ["a-model (1 pairs, 1 truncated)", "b-model (1 pairs, 1 truncated)"]
    np.testing.assert_allclose(axis.get_lines()[0].get_xdata(), [0, 0.25, 0.5, 0.75, 1])


@pytest.fixture(scope="module")
def minilm(minilm_path):
    """all-MiniLM-L6-v2 as irflow loads it, once for the tests that profile it."""
    return Encoder.load(minilm_spec(minilm_path)).model


def test_minilm_profile_is_finite(minilm):
    pairs = [
        (query, contracts.document_text(doc["title"], doc["text"]))
        for query, doc in zip(["why do cats purr", "what is the sun"], TINY_CORPUS[::2])
    ]
    table = one_dataset(saliency_profile(minilm, {"d": pairs}, "minilm", bins=100))
    assert len(table) == 100
    assert np.isfinite(table["saliency"]).all() and table["saliency"].max() <= 1
    assert table["saliency"].min() > 0  # short documents: every bin holds a read token
    assert table["truncated_pairs"].iloc[0] == 0


def real_pairs(folder, count: int, seed: int = 0) -> list[tuple[str, str]]:
    """``count`` random (query, most relevant document) pairs of a shared BEIR dataset's test
    judgements, drawn by irflow's own selection (``sample_pairs``)."""
    import gzip
    import json

    qrels = pd.read_csv(folder / "qrels" / "test.tsv", sep="\t", dtype=str)
    qrels = qrels.set_axis(["query_id", "doc_id", "relevance"], axis=1).astype({"relevance": int})
    judged = set(qrels["doc_id"])
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        documents = [doc for doc in map(json.loads, lines) if doc["_id"] in judged]
    corpus = pd.DataFrame(documents).rename(columns={"_id": "doc_id"})
    queries = pd.read_json(folder / "queries.jsonl", lines=True, dtype={"_id": str})
    queries = queries.rename(columns={"_id": "query_id"})[["query_id", "text"]]
    chosen = sample_pairs(queries, corpus, qrels, count=count, seed=seed)
    return list(zip(chosen["query"], chosen["document"]))


def test_pooled_curve_averages_every_pair_of_every_dataset(minilm, shared_datasets):
    """PosIR pools its English domains' pairs: "We aggregate the saliency over 3,131 English
    query-document pairs that satisfy the length and position constraints" (posir.txt, line
    81). Two SciFact pairs and one NFCorpus pair: the pooled curve is the mean of the three
    pairs' profiles, each weighing a third, not the mean of the two datasets' curves (which
    gives the NFCorpus pair half the weight). Before, saliency took one dataset."""
    pairs = {
        "scifact": real_pairs(shared_datasets / "scifact", 2),
        "nfcorpus": real_pairs(shared_datasets / "nfcorpus", 1),
    }
    table = saliency_profile(minilm, pairs, "minilm", bins=20)
    curves = {dataset: one_dataset(table, dataset) for dataset in ("scifact", "nfcorpus", "all")}
    assert table["dataset"].unique().tolist() == ["scifact", "nfcorpus", "all"]
    assert [curves[d]["pairs"].iloc[0] for d in curves] == [2, 1, 3]
    # By hand: each pair's profile at PosIR's 20 points, then the mean over all three.
    points = np.linspace(0, 1, 20)
    sampled = {
        dataset: [
            np.interp(points, np.linspace(0, 1, p.size), p)
            for p in (pair_saliency(minilm, q, d).profile for q, d in chosen)
        ]
        for dataset, chosen in pairs.items()
    }
    every = sampled["scifact"] + sampled["nfcorpus"]
    np.testing.assert_allclose(curves["all"]["saliency"], np.mean(every, axis=0), rtol=1e-5)
    np.testing.assert_allclose(curves["all"]["saliency_sd"], np.std(every, axis=0, ddof=1), 1e-5)
    np.testing.assert_allclose(
        curves["scifact"]["saliency"], np.mean(sampled["scifact"], axis=0), rtol=1e-5
    )
    np.testing.assert_allclose(curves["nfcorpus"]["saliency"], sampled["nfcorpus"][0], rtol=1e-5)
    mean_of_curves = (curves["scifact"]["saliency"] + curves["nfcorpus"]["saliency"]) / 2
    assert np.abs(curves["all"]["saliency"] - mean_of_curves).max() > 0.01
    # The figure draws the pooled curve and each dataset's beside it; the report's table
    # lists each dataset, then the pooled curve.
    labels = [line.get_label() for line in saliency_figure(table).axes[0].get_lines()]
    truncated = curves["all"]["truncated_pairs"].iloc[0]
    assert labels == [
        f"minilm, pooled (3 pairs, {truncated} truncated)",
        "minilm, nfcorpus (1 pairs)",
        "minilm, scifact (2 pairs)",
    ]
    html = saliency_table(table)
    assert html.index("nfcorpus") < html.index("scifact") < html.index("all (pairs pooled)")


# --- the pairs, selected once for every model (issue 38, item 9) --------------------------------


def span_dataset(folder) -> None:
    """Four queries, each judging one document with its span in the middle: two documents of
    words both tokenizers know (47 and 92 tokens by MiniLM's word piece, 42 and 82 by the tiny
    BPE) and two of a word the BPE never saw (22 and 72 word pieces, 121 and 421 BPE tokens)."""
    from conftest import write_beir

    texts = {
        "known40": " ".join(["cats purr and sleep in the warm sun"] * 5),
        "known80": " ".join(["cats purr and sleep in the warm sun"] * 10),
        "unseen20": " ".join(["zebra"] * 20),
        "unseen70": " ".join(["zebra"] * 70),
    }
    corpus = [{"_id": doc_id, "title": "", "text": text} for doc_id, text in texts.items()]
    queries = [{"_id": f"q-{doc_id}", "text": "why do cats purr"} for doc_id in texts]
    middle = {doc_id: len(text) // 2 for doc_id, text in texts.items()}
    qrels = [(f"q-{d}", d, 1, middle[d] - 3, middle[d] + 3) for d in texts]
    write_beir(folder, corpus, queries, qrels)


@pytest.mark.e2e
def test_every_model_is_profiled_on_the_same_pairs(tmp_path, minilm_path):
    """PosIR selects its pairs once, from the dataset's token counts, before loading any model
    (gradient_saliency_analysis/qwen3_exp.py: ``if q["pos_token_length"] >= 1024 and 0.4 <=
    relative_pos <= 0.6:``, then ``model, tokenizer = load_model(model_name)``), so the models
    it compares read the same pairs. Two models whose tokenizers count the documents apart (a
    word piece and a tiny byte-level BPE) must get the same pairs. Each profile holds the
    dataset's curve and the pooled one."""
    span_dataset(tmp_path / "data" / "spans")
    wordpiece = build_tiny_bi_encoder(tmp_path / "wordpiece", minilm_path)
    texts = [LONG_DOCUMENT, "why do cats purr"]
    bpe = build_tiny_bpe_bi_encoder(tmp_path / "bpe", texts)
    models = {"wordpiece": wordpiece, "bpe": bpe}
    config = {
        "data_dir": str(tmp_path / "data"),
        "offline": True,
        "datasets": {
            "spans": {"source": {"type": "path", "path": str(tmp_path / "data" / "spans")}}
        },
        "retrievers": {"bm25": {"type": "bm25"}},
        "models": {name: {"id": str(path), "max_seq_length": 64} for name, path in models.items()},
        "position_analysis": {
            "saliency": {"models": ["wordpiece", "bpe"], "datasets": ["spans"], "min_tokens": 60}
        },
    }
    work = tmp_path / "work"
    work.mkdir()
    targets = [f"results/saliency/{name}.parquet" for name in models]
    snakemake(work, *targets, config=config, cores="1")
    lineages = {name: contracts.read_lineage(work / t) for name, t in zip(models, targets)}
    chosen = {
        name: [pair["doc_id"] for pair in lineage["pairs"] if pair["dataset"] == "spans"]
        for name, lineage in lineages.items()
    }
    assert chosen["wordpiece"] == chosen["bpe"], f"each model got its own pairs: {chosen}"
    # Counted once, by the first model's word piece (no tokenizer named): the BPE's own count
    # would add unseen20 (121 tokens) for the BPE model alone.
    assert chosen["bpe"] == ["known80", "unseen70"]
    assert lineages["bpe"]["pairs_files"] == ["results/saliency/pairs/spans.parquet"]
    profile = pd.read_parquet(work / targets[1]).drop_duplicates("dataset")
    assert profile[["dataset", "pairs"]].values.tolist() == [["spans", 2], ["all", 2]]
    pairs = pd.read_parquet(work / "results" / "saliency" / "pairs" / "spans.parquet")
    assert pairs["doc_id"].tolist() == chosen["bpe"]
    from irflow.analyses.saliency import pairs_tokenizer

    named = validate_config(config, SCHEMA)
    assert pairs_tokenizer(named, "spans") == "wordpiece"
    named["position_analysis"]["saliency"]["tokenizer"] = "bpe"
    assert pairs_tokenizer(named, "spans") == "bpe"


def test_posirs_own_token_counts_come_before_the_tokenizers():
    """PosIR counts a document by its dataset's ``pos_token_length`` (the qrels' doc_tokens);
    the named tokenizer counts only the documents without one."""
    from test_positionalize import word_tokenizer

    from irflow.analyses.saliency import document_tokens

    pairs = pd.DataFrame(
        {"document": ["a b c", "a b c d e"], "doc_tokens": pd.array([1024, None], dtype="Int64")}
    )
    counted = document_tokens(pairs, word_tokenizer())
    assert counted[0] == 1024 and counted[1] == document_tokens(pairs[1:], word_tokenizer())[0]
    assert counted[1] != 1024 and counted[1] >= 5
    assert document_tokens(pairs[:1], None).tolist() == [1024]  # no tokenizer needed
