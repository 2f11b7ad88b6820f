"""Document expansion on a tiny T5 built here: with fixed seeds the queries are known strings,
and every token sampled lies within the top k and the top_p nucleus of the next-token
distribution that a teacher-forced forward pass over the truncated document gives (a path other
than ``generate``). doc2query--'s filter keeps exactly the queries that a tiny
cross-encoder, called directly, scores at or above the percentile; the llm writer asks the
fake endpoint on 127.0.0.1 through irflow.derived.llm."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import SCHEMA, minimal_config, schema_defaults
from fake_llm import fake_llm_fixture, last_user_message  # noqa: F401 (the fixture)
from pydantic import ValidationError
from test_sparse import TEXTS
from tiny_models import build_tiny_cross_encoder, build_tiny_doc2query

from irflow.derived.expand import (
    LLMQueryWriter,
    QueryGenerator,
    estimate_expansion,
    expand_corpus,
)
from irflow.derived.llm.client import LLMClient, LLMError
from irflow.retrieval.rerank import CrossEncoderScorer
from irflow.workflow.config import load_config, validate_config

SPEC = {
    "revision": None,
    "queries": 3,
    "top_k": 10,
    "top_p": 0.5,  # about half of the tiny model's near-flat top 10: a token outside shows
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


# The tiny T5 (tiny_models, torch seed 0) with SPEC's settings: the queries of the first two
# documents, each batch seeded from SPEC's seed and its first row. Any change to the seeding or
# to the sampling settings changes them.
KNOWN_QUERIES = [
    [
        "##drichdrichdrich randy randy randy",
        "exclaimed exclaimed exclaimed exclaimed exclaimed randy",
        "exclaimed randy randy randy randy randy",
    ],
    [
        "[unused991] [unused991] [unused991]",
        "[unused991] [unused991] [unused991] [unused991] [unused991]",
        "##heimheimheimheim [unused991] [unused991]",
    ],
]


def test_documents_are_followed_by_the_queries_the_model_samples(generator):
    expanded, stats = expand_corpus(corpus(), generator)
    assert expanded["text"].tolist()[:2] == [
        " ".join([text, *queries]) for text, queries in zip(TEXTS, KNOWN_QUERIES)
    ]
    assert all(text.startswith(original + " ") for text, original in zip(expanded["text"], TEXTS))
    assert expanded["doc_id"].tolist() == corpus()["doc_id"].tolist()
    assert stats["queries_per_document"] == 3
    assert stats["generated_queries"] == 3 * len(TEXTS)


# Longer than SPEC's max_length (64 tokens): what the model reads is its first 64 tokens.
LONG_TEXT = " ".join(f"{word} {n}" for n in range(40) for word in ("river", "stone"))


def allowed_tokens(logits: torch.Tensor, top_k: int, top_p: float) -> set[int]:
    """The tokens that top-k then top-p (nucleus) sampling may draw from ``logits``: the k
    highest, then, renormalised, the most probable of those until their probabilities reach
    top_p (the token that crosses it included). A margin of 1e-4 absorbs the difference between
    the cached and the teacher-forced computation."""
    values, order = logits.double().sort(descending=True)
    kept = values >= values[top_k - 1] - 1e-4
    probabilities = torch.softmax(values.masked_fill(~kept, -torch.inf), dim=0)
    before = probabilities.cumsum(0) - probabilities
    kept &= before < top_p + 1e-4
    return set(order[kept].tolist())


def test_each_sampled_token_is_within_top_k_and_top_p_of_the_model(generator, monkeypatch):
    returned = []
    sample = generator.model.generate

    def recording(**kwargs):
        returned.append(sample(**kwargs))
        return returned[-1]

    monkeypatch.setattr(generator.model, "generate", recording)
    texts = [LONG_TEXT, *TEXTS]
    queries = generator.generate_all(texts)
    rows = [row for batch in returned for row in batch]
    n, tokenizer, model = SPEC["queries"], generator.tokenizer, generator.model
    assert len(rows) == n * len(texts) and all(len(q) == n for q in queries)
    checked = 0
    for i, text in enumerate(texts):
        document = tokenizer(
            text, truncation=True, max_length=SPEC["max_length"], return_tensors="pt"
        )
        for row, query in zip(rows[i * n : (i + 1) * n], queries[i]):
            assert tokenizer.decode(row, skip_special_tokens=True) == query
            assert len(row) - 1 <= SPEC["max_new_tokens"]
            with torch.inference_mode():
                logits = model(**document, decoder_input_ids=row[None, :-1]).logits[0]
            for step, token in enumerate(row[1:].tolist()):
                assert token in allowed_tokens(logits[step], SPEC["top_k"], SPEC["top_p"]), (
                    i,
                    step,
                )
                checked += 1
                if token == tokenizer.sep_token_id:  # the end: padding follows
                    break
    assert checked > 100


def test_same_seed_same_corpus_other_seed_other_corpus(generator):
    first, _ = expand_corpus(corpus(), generator)
    again, _ = expand_corpus(corpus(), generator)
    assert first.equals(again)
    other = QueryGenerator(generator.model, generator.tokenizer, generator.entry | {"seed": 8}, {})
    assert not expand_corpus(corpus(), other)[0].equals(first)


def count_batches(generator: QueryGenerator, monkeypatch, kill_at: int | None = None) -> list:
    """The first rows of the batches ``generator`` samples from now on; with ``kill_at``, the
    job is killed when it starts that many-th batch."""
    sample, asked = generator.generate, []

    def counted(texts: list[str], first_row: int) -> list[list[str]]:
        if len(asked) == kill_at:
            raise KeyboardInterrupt
        asked.append(first_row)
        return sample(texts, first_row)

    monkeypatch.setattr(generator, "generate", counted)
    return asked


def test_a_killed_expansion_resumes_from_its_finished_batches(generator, tmp_path, monkeypatch):
    path, parts = tmp_path / "corpus.parquet", tmp_path / "corpus.parquet.parts"
    corpus().to_parquet(path)
    uninterrupted = generator.generate_all(TEXTS)
    with monkeypatch.context() as patch:
        count_batches(generator, patch, kill_at=1)
        with pytest.raises(KeyboardInterrupt):
            generator.generate_file(path, parts)
    assert len(list(parts.glob("part-*.parquet"))) == 1
    with monkeypatch.context() as patch:
        asked = count_batches(generator, patch)
        assert generator.generate_file(path, parts) == uninterrupted
    assert asked == [3, 6]  # the second run sampled only the unfinished batches
    # Other settings (another seed) discard the finished parts before sampling anything.
    assert len(list(parts.glob("part-*.parquet"))) == 3
    entry = generator.entry | {"seed": 8}
    other = QueryGenerator(generator.model, generator.tokenizer, entry, generator.provenance)
    count_batches(other, monkeypatch, kill_at=0)
    with pytest.raises(KeyboardInterrupt):
        other.generate_file(path, parts)
    assert not list(parts.glob("part-*.parquet"))


def test_expand_block_must_name_a_dataset_and_a_new_name(tmp_path):
    from irflow.core.errors import ConfigError

    base = minimal_config(retrievers={"bm25": schema_defaults({"type": "bm25"})})
    with pytest.raises(ConfigError, match="'expand.x.dataset': 'nope' is not a key of 'datasets'"):
        validate_config(
            base | {"expand": {"x": {"dataset": "nope", "model": {"id": "a/b"}}}}, SCHEMA
        )
    with pytest.raises(ConfigError, match="'expand.d': the name is already a dataset's"):
        validate_config(base | {"expand": {"d": {"dataset": "d", "model": {"id": "a/b"}}}}, SCHEMA)
    config = validate_config(
        base | {"expand": {"x": {"dataset": "d", "model": {"id": "a/b"}}}}, SCHEMA
    )
    model = config["expand"]["x"]["model"]
    assert (model["queries"], model["top_k"], model["top_p"]) == (40, 10, 1.0)  # docTTTTTquery


# --- doc2query--'s filter ----------------------------------------------------------------------

CROSS_ENCODER = {"type": "cross-encoder", "revision": None, "batch_size": 4, "dtype": "float32"}


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory, minilm_path) -> tuple[CrossEncoderScorer, object]:
    folder = build_tiny_cross_encoder(tmp_path_factory.mktemp("ce"), minilm_path)
    spec = CROSS_ENCODER | {"id": str(folder), "device": "cpu"}
    return CrossEncoderScorer.load(spec), folder


def direct_scores(folder, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The cross-encoder's logit for each (query, document) pair, from transformers alone."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    queries, documents = zip(*pairs)
    batch = tokenizer(list(queries), list(documents), padding=True, return_tensors="pt")
    with torch.inference_mode():
        return model(**batch).logits[:, 0].double().numpy()


@pytest.mark.parametrize("drop_share", [0.3, 0.7])
def test_filter_keeps_the_queries_at_or_above_the_corpus_percentile(
    fake_llm, tmp_path, cross_encoder, drop_share
):
    scorer, folder = cross_encoder
    fake_llm.responder = words_responder
    spec = LLM_SPEC | {"queries": 3}
    with LLMClient(llm_settings(fake_llm), tmp_path, progress=False) as client:
        writer = LLMQueryWriter(client, spec)
        expanded, stats = expand_corpus(corpus(), writer, scorer, drop_share)
        generated = writer.generate_all(TEXTS)  # from the cache: the same queries
    pairs = [(query, text) for text, queries in zip(TEXTS, generated) for query in queries]
    scores = direct_scores(folder, pairs)
    threshold = np.percentile(scores, 100 * drop_share)
    kept = iter(scores >= threshold)
    expected = [[query for query in queries if next(kept)] for queries in generated]
    assert expanded["text"].tolist() == [
        " ".join([text, *queries]) for text, queries in zip(TEXTS, expected)
    ]
    n_kept = sum(map(len, expected))
    assert stats["generated_queries"] == len(pairs) == 3 * len(TEXTS)
    assert stats["kept_queries"] == n_kept
    # Linear interpolation between ranks: the share dropped is drop_share, to one query.
    assert abs((len(pairs) - n_kept) - drop_share * len(pairs)) <= 1
    assert stats["filter"]["threshold"] == pytest.approx(threshold, abs=1e-5)
    assert stats["filter"]["drop_share"] == drop_share


def test_filter_config_names_a_cross_encoder(tmp_path):
    from irflow.core.errors import ConfigError

    config = minimal_config(
        retrievers={"bm25": schema_defaults({"type": "bm25"})},
        models={"m": {"id": "a/b"}},
        rerankers={
            "ce": {"type": "cross-encoder", "id": "a/c"},
            "bi": {"type": "bi-encoder", "model": "m"},
        },
    )

    def expand(block: dict) -> dict:
        return config | {"expand": {"x": {"dataset": "d", "model": {"id": "a/b"}} | block}}

    with pytest.raises(ConfigError, match="'expand.x.filter.reranker': 'nope' is not a key"):
        validate_config(expand({"filter": {"reranker": "nope", "drop_share": 0.7}}), SCHEMA)
    with pytest.raises(
        ConfigError, match="'bi' is a bi-encoder reranker; the filter needs a cross"
    ):
        validate_config(expand({"filter": {"reranker": "bi", "drop_share": 0.7}}), SCHEMA)
    with pytest.raises(ConfigError, match="expand.x.filter.drop_share"):
        validate_config(expand({"filter": {"reranker": "ce", "drop_share": 1}}), SCHEMA)
    valid = validate_config(expand({"filter": {"reranker": "ce", "drop_share": 0.7}}), SCHEMA)
    assert valid["expand"]["x"]["filter"] == {"reranker": "ce", "drop_share": 0.7}
    # A writer: a seq2seq model or the llm, not both, and the llm needs a model to ask.
    with pytest.raises(ConfigError, match="'expand.x'"):
        validate_config(expand({"llm": {}}), SCHEMA)
    llm_only = config | {"expand": {"x": {"dataset": "d", "llm": {}}}}
    with pytest.raises(ConfigError, match="'llm.model': needed by 'expand.x.llm'"):
        validate_config(llm_only, SCHEMA)
    valid = validate_config(llm_only | {"llm": {"model": "m"}}, SCHEMA)
    assert valid["expand"]["x"]["llm"]["queries"] == 20


# --- the llm writer ----------------------------------------------------------------------------

LLM_SPEC = {"queries": 2, "system": "Write $queries queries.", "user": "Queries for:\n$document"}


def words_responder(body: dict) -> str:
    """Queries made of the document's words; one too few when the seed is 0, so that the
    first ask of every document is re-asked."""
    words = last_user_message(body).split('"""')[1].split()
    n = 1 if body.get("seed") == 0 else 4
    return json.dumps({"queries": [" ".join(words[i : i + 2]) for i in range(n)]})


def llm_settings(fake, **overrides) -> dict:
    return {
        "base_url": fake.base_url,
        "model": "fake",
        "max_retries": 1,
        "timeout_s": 5,
    } | overrides


def test_llm_writer_appends_the_endpoints_queries_and_a_rerun_asks_nothing(fake_llm, tmp_path):
    fake_llm.responder = words_responder
    with LLMClient(llm_settings(fake_llm), tmp_path / "cache", progress=False) as client:
        expanded, stats = expand_corpus(corpus(), LLMQueryWriter(client, LLM_SPEC))
        summary = client.summary()
    expected = []
    for text in TEXTS:
        words = text.split()
        expected.append(" ".join([text, " ".join(words[0:2]), " ".join(words[1:3])]))
    assert expanded["text"].tolist() == expected
    assert stats["generated_queries"] == stats["kept_queries"] == 2 * len(TEXTS)
    # Each document: a first answer with one query too few, re-asked with the next seed.
    assert fake_llm.requests == 2 * len(TEXTS) == summary["requests"]
    assert summary["failed_answers_by_reason"] == {"invalid_answer": len(TEXTS)}
    first = {"role": "user", "content": f'Queries for:\n"""\n{TEXTS[0]}\n"""'}
    assert [{"role": "system", "content": "Write 2 queries."}, first] in [
        body["messages"] for body in fake_llm.bodies
    ]

    fake_llm.reset_counts()
    with LLMClient(llm_settings(fake_llm), tmp_path / "cache", progress=False) as client:
        again, _ = expand_corpus(corpus(), LLMQueryWriter(client, LLM_SPEC))
    assert again.equals(expanded)
    assert fake_llm.requests == 0


def test_llm_writer_leaves_a_dropped_document_unexpanded_within_max_dropped_share(
    fake_llm, tmp_path
):
    fake_llm.responder = words_responder
    fake_llm.script = {TEXTS[1]: ["down"]}
    limit = 1 / len(TEXTS)
    with LLMClient(
        llm_settings(fake_llm, max_dropped_share=limit), tmp_path, progress=False
    ) as client:
        expanded, stats = expand_corpus(corpus(), LLMQueryWriter(client, LLM_SPEC))
        assert client.summary()["dropped_by_step"] == {"expand/http_500": 1}
    assert expanded["text"][1] == TEXTS[1]
    assert expanded["text"][0] != TEXTS[0]
    assert stats["documents_without_queries"] == 1
    assert stats["kept_queries"] == 2 * (len(TEXTS) - 1)
    below = llm_settings(fake_llm, max_dropped_share=limit / 2)
    with LLMClient(below, tmp_path, progress=False) as client:
        with pytest.raises(LLMError, match="1 http_500 at 'expand'"):
            expand_corpus(corpus(), LLMQueryWriter(client, LLM_SPEC))


def test_llm_writer_refuses_an_unknown_placeholder(fake_llm, tmp_path):
    from irflow.core.errors import ConfigError

    with LLMClient(llm_settings(fake_llm), tmp_path, progress=False) as client:
        with pytest.raises(ConfigError, match="'expand.x.llm.user'"):
            LLMQueryWriter(client, LLM_SPEC | {"user": "$doc"}, "x")


def test_the_expand_writers_type_their_settings_once(fake_llm, tmp_path, generator):
    """Each writer types its part of the ``expand`` block once, where it receives it
    (irflow.core.settings_types.Llm and Model): what the part leaves out is the schema's
    default, and a key or value the schema refuses is refused, named (on main the parts were
    read as dicts: a KeyError, and a misspelt key was ignored, a top_p of 0 sampled)."""
    with LLMClient(llm_settings(fake_llm), tmp_path, progress=False) as client:
        writer = LLMQueryWriter(client, {})
        assert writer.spec.queries == 20
        assert "Write $queries different search queries" in writer.spec.user
        [_, user] = writer.messages("a document")
        assert user["content"].startswith("Write 20 different search queries")
        with pytest.raises(ValidationError, match="querys"):
            LLMQueryWriter(client, LLM_SPEC | {"querys": 3})
    model, tokenizer = generator.model, generator.tokenizer
    with pytest.raises(ValidationError, match="top_p"):
        QueryGenerator(model, tokenizer, generator.entry | {"top_p": 0}, {})
    bare = QueryGenerator(model, tokenizer, {"id": generator.entry["id"]}, {})
    assert (bare.spec.queries, bare.spec.top_k, bare.spec.batch_size) == (40, 10, 16)


def test_documents_sent_to_the_llm_are_cut_to_max_document_tokens(fake_llm, tmp_path):
    fake_llm.responder = words_responder
    settings = llm_settings(fake_llm, max_document_tokens=5)  # 5 x 4 = 20 characters
    with LLMClient(settings, tmp_path, progress=False) as client:
        expand_corpus(corpus(), LLMQueryWriter(client, LLM_SPEC))
        summary = client.summary()
    sent = {last_user_message(body).split('"""')[1].strip() for body in fake_llm.bodies}
    assert {"stock markets fell", "the mat is red, and", "a cat sat on the mat"} <= sent
    assert max(len(text) for text in sent) <= 20
    assert summary["documents_cut"] == 4 and summary["max_document_tokens"] == 5


def test_llm_expansion_has_a_dry_run_estimate_that_sends_nothing(fake_llm, tmp_path):
    fake_llm.responder = lambda body: json.dumps({"queries": ["q one", "q two"]})
    with LLMClient(llm_settings(fake_llm), tmp_path, progress=False) as client:
        writer = LLMQueryWriter(client, LLM_SPEC)
        before = estimate_expansion(corpus(), writer)
        assert fake_llm.requests == 0
        expand_corpus(corpus(), writer)
        after = estimate_expansion(corpus(), writer)
    assert (before["requests"], before["cached"]) == (len(TEXTS), 0)
    assert before["max_requests"] == 3 * len(TEXTS)  # each document asked up to 1 + 2 reasks
    assert before["prompt_tokens"] > 0 and before["completion_tokens"] > 0
    assert (after["requests"], after["cached"]) == (0, len(TEXTS))


def test_beir_table2_config_is_beirs_setup():
    """config/reproduce/beir-table2.yaml runs BEIR's Table 2 systems as BEIR §4 sets them up."""
    config = load_config("config/reproduce/beir-table2.yaml", "config/config.schema.yaml")
    # docT5query: 40 queries per document, top-k sampling with k = 10, by the MS MARCO T5.
    for name in config["datasets"]:
        model = config["expand"][f"{name}-doct5query"]["model"]
        assert model["id"] == "castorini/doc2query-t5-base-msmarco"
        assert (model["queries"], model["top_k"], model["top_p"]) == (40, 10, 1.0)
    # BM25 with Anserini's defaults; BM25+CE: its top 100 reranked by the 6-layer MiniLM.
    bm25 = config["retrievers"]["bm25"]
    assert (bm25["k1"], bm25["b"]) == (0.9, 0.4)
    [reranking] = config["reranking"]
    assert (reranking["first_stage"], reranking["k"]) == ("bm25", [100])
    reranker = config["rerankers"][reranking["reranker"]]
    assert reranker["id"] == "cross-encoder/ms-marco-MiniLM-L-6-v2"
    # Figures 3 and 4 against BM25, over the top 10 (docs/beir-figures.md).
    assert config["beir_figures"] == {"baseline": "bm25", "metric": "ndcg_cut_10", "depth": 10}
