"""The generate stage: prompts, chunking, seeded sampling, and whole runs against a fake
OpenAI-compatible server that answers the shipped AIR-Bench prompts, with scripted failures."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import (
    REPO,
    SCHEMA,
    minimal_config,
    official_scifact_config,
    planned_inputs,
    run_command,
    snakemake_command,
)
from fake_llm import FakeLLM, last_user_message
from pydantic import ValidationError

from irflow.core import contracts
from irflow.core.errors import ConfigError, InputError
from irflow.derived.generate.dataset import (
    content_checksum,
    generate_dataset,
    list_generated,
    write_generated,
)
from irflow.derived.generate.estimate import estimate
from irflow.derived.generate.generator import Generator, Item, prepare, typed_generate
from irflow.derived.generate.prompts import ATTRIBUTES, load_prompts
from irflow.derived.generate.sampling import (
    assign_splits,
    chunk_corpus,
    document_lengths,
    document_rng,
    personal_data,
    sample_documents,
    word_count,
)
from irflow.derived.llm.client import LLMClient, LLMError
from irflow.workflow.config import validate_config

PROMPTS = REPO / "config" / "prompts" / "airbench.yaml"
DOCUMENT = re.compile(r'Document:\n"""\n(.*?)\n"""', re.DOTALL)


def airbench_responder(body: dict) -> str:
    """Canned answers to the shipped prompts, chosen by the JSON key each prompt asks for and
    built from the document's first word (each test document starts with a distinct word)."""
    prompt = last_user_message(body)
    document = DOCUMENT.search(prompt)
    word = document.group(1).split()[0] if document else "none"
    if '{"negatives"' in prompt:
        count = int(re.search(r"Write (\d+) hard negative", prompt).group(1))
        negatives = [{"title": f"Not {word}", "text": f"{word} decoy {n}"} for n in range(count)]
        return json.dumps({"negatives": negatives})
    if '{"rewritten_query"' in prompt:
        return json.dumps({"rewritten_query": f"rewritten {word}"})
    if '{"scenarios"' in prompt:
        return json.dumps({"scenarios": [f"{word} scenario {n}" for n in range(3)]})
    if '{"characters"' in prompt:
        return (
            "```json\n"
            + json.dumps({"characters": [f"{word} reader {n}" for n in range(5)]})
            + "\n```"
        )
    if '{"query"' in prompt:
        return json.dumps({"query": f"query about {word}"})
    return json.dumps({"unexpected": prompt[:40]})


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]


def corpus_frame(n: int = 9, words: int = 30) -> pd.DataFrame:
    rows = [
        {
            "doc_id": f"d{i}",
            "title": "",
            "text": " ".join([WORDS[i]] + [f"w{j}" for j in range(words - 1)]),
        }
        for i in range(n)
    ]
    return pd.DataFrame(rows)


def spec(**overrides) -> dict:
    return {
        "dataset": "tiny",
        "documents": 4,
        "seed": 0,
        "stratify": None,
        "min_words": 20,
        "chunk_tokens": None,
        "overlap": 50,
        "tokenizer": None,
        "negatives": [3, 5],
        "dev_share": 0,
        "prompts": str(PROMPTS),
        "language": "English",
    } | overrides


def run(fake: FakeLLM, cache: Path, corpus: pd.DataFrame, llm: dict | None = None, **overrides):
    settings = {"base_url": fake.base_url, "model": "fake", "max_retries": 2, "timeout_s": 5}
    with LLMClient(settings | (llm or {}), cache, progress=False) as client:
        generated = generate_dataset(corpus, spec(**overrides), load_prompts(PROMPTS), client)
        return generated, client.summary()


# --- prompts ----------------------------------------------------------------------------------


def test_the_shipped_prompts_load_and_render():
    prompts = load_prompts(PROMPTS)
    assert set(prompts.attributes) == set(ATTRIBUTES)
    # AIR-Bench's weights (App. A.2).
    weights = {name: [o.weight for o in options] for name, options in prompts.attributes.items()}
    assert weights == {
        "query_length": [1, 4, 2, 1],
        "query_type": [3, 1, 1],
        "information_type": [1, 1],
        "expression_style": [5, 3, 3, 1, 1, 1, 1],
    }
    assert [o.words for o in prompts.attributes["query_length"]] == [
        (1, 4),
        (5, 9),
        (10, 20),
        (20, None),  # "at least 20 words"
    ]
    claim = prompts.attributes["query_type"][2]
    assert claim.query_lengths == ("10 to 20 words", "at least 20 words")
    assert [o.long_doc for o in prompts.attributes["query_type"]] == [True, False, True]
    messages = prompts.messages(
        "query",
        {
            "document": "The $5 cure {x}",
            "language": "English",
            "character": "a nurse",
            "scenario": "at night",
        }
        | {name: f"<{name}>" for name in ATTRIBUTES},
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "The $5 cure {x}" in user and "a nurse" in user and "<query_type>" in user
    # The style is the rewrite's (AIR-Bench applies it when rewriting).
    assert "<expression_style>" not in user
    rewrite = prompts.messages(
        "rewrite",
        {"document": "d", "language": "English", "query": "q"}
        | {name: f"<{name}>" for name in ATTRIBUTES},
    )[1]["content"]
    assert "in this style: <expression_style>" in rewrite
    assert 'Document:\n"""\nThe $5 cure {x}\n"""' in user
    assert "${" not in user


def write_prompts(path: Path, change) -> Path:
    data = yaml.safe_load(PROMPTS.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["query"].update(user="${document} ${character} ${scenario} ${mood}"),
            r"field 'query.user': unknown placeholder\(s\) mood",
        ),
        (lambda d: d.pop("negatives"), r"field 'negatives': missing"),
        (
            lambda d: d["scenarios"].update(user="${document} only"),
            r"field 'scenarios.user': must use \$\{character\}",
        ),
        (lambda d: d["attributes"].update(query_type=[]), r"field 'attributes.query_type'"),
        (
            lambda d: d["attributes"]["query_type"][2].update(query_lengths=["20 words"]),
            r"field 'attributes.query_type.2.query_lengths': '20 words' is not a query_length",
        ),
        (
            lambda d: d["attributes"]["query_length"][0].update(long_doc=False),
            r"field 'attributes.query_length.0': unknown key\(s\) for query_length: long_doc",
        ),
        (
            lambda d: [t.update(long_doc=False) for t in d["attributes"]["query_type"]],
            r"field 'attributes.query_type': no value is left for Long-Doc",
        ),
        (lambda d: d["rewrite"].update(rounds=-1), r"field 'rewrite.rounds'"),
        (lambda d: d["query"].pop("answer_key"), r"field 'query.answer_key'"),
    ],
)
def test_a_bad_prompts_file_is_named_with_its_field(tmp_path, change, message):
    path = write_prompts(tmp_path / "prompts.yaml", change)
    with pytest.raises(InputError, match=re.escape(str(path)) + ".*" + message):
        load_prompts(path)


def test_queries_are_rewritten_more_than_once_by_default(airbench_llm, tmp_path):
    """AIR-Bench: "Prompt LLM to rewrite the generated query for multiple times" (airbench.txt,
    line 45). The shipped prompts and a prompts file that does not say rewrite twice, each round
    rewriting the last: two rewrite requests per query. (Before: once.)"""
    from irflow.derived.generate.prompts import REWRITE_ROUNDS

    assert load_prompts(PROMPTS).steps["rewrite"]["rounds"] == 2 == REWRITE_ROUNDS
    unsaid = write_prompts(tmp_path / "prompts.yaml", lambda d: d["rewrite"].pop("rounds"))
    with LLMClient({"base_url": airbench_llm.base_url, "model": "fake"}, tmp_path / "c") as llm:
        made = generate_dataset(corpus_frame(n=2), spec(documents=2), load_prompts(unsaid), llm)
    asked = [last_user_message(body) for body in airbench_llm.bodies]
    assert sum(1 for prompt in asked if '{"rewritten_query"' in prompt) == 2 * 2
    assert [len(r) for r in made.generation["rewrites"]] == [2, 2]


def test_generate_types_its_spec_once_where_it_receives_it(airbench_llm, tmp_path):
    """generate_dataset types the spec it is given once (typed_generate: the task's defaults,
    then irflow.core.settings_types.Generate): what the spec leaves out is the schema's default
    (the queries are asked in English), and a key the schema does not know is refused, named,
    before anything is asked (on main the spec was read as a dict: a KeyError on 'language',
    and a misspelt key ignored). One dataset is made under one seed."""
    bare = {"dataset": "tiny", "seed": 0, "documents": 2, "min_words": 0, "prompts": str(PROMPTS)}
    prompts = load_prompts(PROMPTS)
    with LLMClient({"base_url": airbench_llm.base_url, "model": "fake"}, tmp_path / "c") as llm:
        made = generate_dataset(corpus_frame(n=2), bare, prompts, llm)
        asked = airbench_llm.requests
        with pytest.raises(ValidationError, match="languag"):
            generate_dataset(corpus_frame(n=2), bare | {"languag": "French"}, prompts, llm)
    assert airbench_llm.requests == asked
    assert len(made.queries) == 2 and made.stats["scored_split"] == "test"
    first = [last_user_message(body) for body in airbench_llm.bodies][0]
    assert "English" in first
    with pytest.raises(ConfigError, match="one seed"):
        typed_generate(bare | {"seed": [0, 1]})


def test_a_prompts_file_that_is_not_yaml_names_the_line(tmp_path):
    path = tmp_path / "prompts.yaml"
    path.write_text("version: 1\nquery: [unclosed\n")
    with pytest.raises(InputError, match=r"prompts.yaml, line \d+: not valid YAML"):
        load_prompts(path)
    with pytest.raises(InputError, match="does not exist"):
        load_prompts(tmp_path / "missing.yaml")


# AIR-Bench (Chen et al., 2024), App. A.2.1: the seven expression styles and their weights; the
# query types question : problem : claim = 3:1:1, a claim "10 to 20" or "at least 20 words" long;
# Long-Doc queries are questions and claims only.
PAPER_STYLES = {
    "concise": 5,
    "casual": 3,
    "informal": 3,
    "formal": 1,
    "professional": 1,
    "complicated": 1,
    "academic": 1,
}


def draw_attribute_sets(n: int, **spec) -> pd.DataFrame:
    """``n`` attribute sets drawn as a generate run draws them (one document each), with each
    query type's first word ("question", "problem", "claim") as ``type``."""
    prompts = load_prompts(PROMPTS)
    generator = Generator(
        prompts, client=None, spec=typed_generate({"dataset": "d", "seed": 0} | spec)
    )
    draws = []
    for i in range(n):
        item = Item(f"d{i}", "", document_rng(0, f"d{i}"), {}, [])
        for attribute in ATTRIBUTES:
            item.values[attribute] = generator._draw(item, attribute)
        draws.append(item.values | {"band": item.band})
    draws = pd.DataFrame(draws)
    draws["type"] = draws["query_type"].str.extract(r"^a (\w+)", expand=False)
    return draws


def assert_shares(values: pd.Series, expected: dict, tolerance: float = 0.01):
    shares = values.value_counts(normalize=True).to_dict()
    assert set(shares) <= set(expected), set(shares) - set(expected)
    for value, share in expected.items():
        assert abs(shares.get(value, 0) - share) < tolerance, (value, shares.get(value, 0), share)


def test_query_attributes_are_drawn_as_airbench_draws_them():
    draws = draw_attribute_sets(20_000)
    total = sum(PAPER_STYLES.values())
    assert_shares(draws["expression_style"], {s: w / total for s, w in PAPER_STYLES.items()})
    assert_shares(draws["type"], {"question": 0.6, "problem": 0.2, "claim": 0.2})
    assert_shares(draws["information_type"], dict.fromkeys(draws["information_type"].unique(), 0.5))
    # Questions and problems at 1:4:2:1; a claim only "10 to 20" or "at least 20 words" (2:1).
    lengths = ["fewer than 5 words", "5 to 9 words", "10 to 20 words", "at least 20 words"]
    claims = draws["type"] == "claim"
    assert_shares(draws.loc[claims, "query_length"], {lengths[2]: 2 / 3, lengths[3]: 1 / 3}, 0.02)
    others = dict(zip(lengths, [1 / 8, 4 / 8, 2 / 8, 1 / 8]))
    assert_shares(draws.loc[~claims, "query_length"], others)
    overall = {n: 0.8 * share for n, share in others.items()}
    overall[lengths[2]] += 0.2 * 2 / 3
    overall[lengths[3]] += 0.2 * 1 / 3
    assert_shares(draws["query_length"], overall)
    # "at least 20 words" is 20 or more.
    assert set(draws.loc[draws["query_length"] == lengths[3], "band"]) == {(20, None)}


def test_long_doc_queries_are_questions_and_claims():
    draws = draw_attribute_sets(5_000, chunk_tokens=200)
    assert_shares(draws["type"], {"question": 0.75, "claim": 0.25}, 0.02)  # 3:1, no problem


# --- chunking and sampling --------------------------------------------------------------------


def test_long_documents_become_overlapping_windows_of_words():
    text = " ".join(f"t{i}" for i in range(450))
    corpus = pd.DataFrame(
        [
            {"doc_id": "long", "title": "Long", "text": text},
            {"doc_id": "short", "title": "Short", "text": "  a few words  "},
        ]
    )
    chunks, stats = chunk_corpus(corpus, 200, 50)
    assert chunks["doc_id"].tolist() == ["long#0", "long#1", "long#2", "short"]
    words = [c.split() for c in chunks["text"]]
    assert [(w[0], w[-1], len(w)) for w in words[:3]] == [
        ("t0", "t199", 200),
        ("t150", "t349", 200),
        ("t300", "t449", 150),
    ]
    assert chunks["title"].tolist() == ["Long", "Long", "Long", "Short"]
    assert chunks["text"].iat[3] == "  a few words  "  # a one-window document is kept as is
    assert stats == {"documents": 2, "documents_chunked": 1, "chunks": 4}


def scifact_joined(shared, count: int) -> pd.DataFrame:
    """One long document: the first ``count`` SciFact abstracts, joined by blank lines."""
    with gzip.open(shared / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        texts = [json.loads(line)["text"] for _, line in zip(range(count), lines)]
    return pd.DataFrame([{"doc_id": "scifact", "title": "", "text": "\n\n".join(texts)}])


def test_long_doc_chunks_are_llamaindexs_and_keep_sentences_whole(shared_datasets):
    """AIR-Bench chunks a long document with LlamaIndex's node parser (SimpleNodeParser,
    "chunk_size=200, chunk_overlap=50" (airbench.txt, line 260)), which keeps sentences whole;
    its Long-Doc chunks average 126-138 tokens (App. B.1's tables, in GPT-4o's tokens). On 300
    SciFact abstracts joined (88,963 cl100k tokens): 610 chunks of 174.1 tokens on average, none
    over 200, none ending mid-sentence. Fixed windows of 200 words (the variant, irflow's before
    issue 50): 402 chunks of 199.9 words, 388 ending mid-sentence."""
    from llama_index.core.utils import get_tokenizer

    assert (
        SCHEMA["properties"]["generate"]["additionalProperties"]["properties"]["chunker"]["default"]
        == "llamaindex"
    )
    document = scifact_joined(shared_datasets, 300)
    tokens = get_tokenizer()  # LlamaIndex's default: tiktoken's cl100k_base, AIR-Bench's count
    sentence_end = re.compile(r"[.!?][\"')\]”’]*\s*$")

    chunks, stats = chunk_corpus(document, 200, 50, None, "llamaindex")
    lengths = [len(tokens(text)) for text in chunks["text"]]
    assert stats == {"documents": 1, "documents_chunked": 1, "chunks": 610}
    assert max(lengths) <= 200 and round(sum(lengths) / len(lengths), 1) == 174.1
    assert all(sentence_end.search(text) for text in chunks["text"])
    assert chunks["doc_id"].iat[0] == "scifact#0" and set(chunks["source_doc_id"]) == {"scifact"}

    windows, _ = chunk_corpus(document, 200, 50, None, "windows")
    words = [len(text.split()) for text in windows["text"]]
    assert len(windows) == 402 and round(sum(words) / len(words), 1) == 199.9
    assert sum(1 for text in windows["text"] if not sentence_end.search(text)) == 388


def test_sampling_is_seeded_stable_when_widened_and_skips_short_documents():
    corpus = pd.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(50)],
            "title": [""] * 50,
            "text": [" ".join(["w"] * (5 + i)) for i in range(50)],  # d0..d14 under 20 words
        }
    )
    five, stats = sample_documents(corpus, 5, seed=1, strata=None, min_words=20)
    ten, _ = sample_documents(corpus, 10, seed=1, strata=None, min_words=20)
    other, _ = sample_documents(corpus, 5, seed=2, strata=None, min_words=20)
    assert stats == {"candidates": 35, "too_short": 15, "sampled": 5, "per_stratum": [5]}
    assert all(i >= 15 for i in ten)
    assert set(five) <= set(ten) and [i for i in ten if i in five] == five
    assert five != other
    assert sample_documents(corpus, 5, seed=1, strata=None, min_words=20)[0] == five


def test_stratified_sampling_takes_every_length_group_evenly():
    lengths = [20] * 30 + [100] * 30 + [400] * 3
    corpus = pd.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(len(lengths))],
            "title": [""] * len(lengths),
            "text": [" ".join(["w"] * n) for n in lengths],
        }
    )
    chosen, stats = sample_documents(corpus, 9, seed=0, strata=3, min_words=0)
    # Three groups of 21 by length: 21 short, 9 short + 12 medium, 18 medium + 3 long.
    assert stats["per_stratum"] == [3, 3, 3]
    assert len(chosen) == 9
    # The shortest group holds only 20-word documents, so at least 3 are chosen from it.
    assert sum(lengths[i] == 20 for i in chosen) >= 3
    small = sample_documents(corpus.iloc[-4:].reset_index(drop=True), 4, 0, 2, 0)[1]
    assert small["per_stratum"] == [2, 2]
    uneven = sample_documents(corpus.iloc[-5:].reset_index(drop=True), 5, 0, 3, 0)[1]
    assert uneven["per_stratum"] == [2, 2, 1]


# --- whole runs -------------------------------------------------------------------------------


@pytest.fixture
def airbench_llm():
    with FakeLLM(responder=airbench_responder) as fake:
        yield fake


def test_a_run_writes_an_ordinary_dataset_and_a_rerun_asks_nothing(airbench_llm, tmp_path):
    corpus = corpus_frame()
    generated, summary = run(airbench_llm, tmp_path / "cache", corpus)
    # 4 documents x 6 requests (characters, scenarios, query, two rewrites, negatives).
    assert airbench_llm.requests == 24 and summary["requests"] == 24
    queries, qrels, negatives = generated.queries, generated.qrels, generated.negatives
    assert len(queries) == 4 and queries["query_id"].str.startswith("gen-q-d").all()
    sources = [q.removeprefix("gen-q-") for q in queries["query_id"]]
    words = {f"d{i}": w for i, w in enumerate(WORDS)}
    assert queries["text"].tolist() == [f"rewritten {words[d]}" for d in sources]
    positives = qrels[qrels["relevance"] == 1]
    assert list(zip(positives["query_id"], positives["doc_id"])) == list(
        zip(queries["query_id"], sources)
    )
    # Each query has between 3 and 5 hard negatives, labelled 0 and added to the corpus.
    per_query = negatives.groupby("query_id").size()
    assert per_query.between(3, 5).all() and len(per_query) == 4
    assert set(qrels.loc[qrels["relevance"] == 0, "doc_id"]) == set(negatives["doc_id"])
    assert len(generated.corpus) == 9 + len(negatives)
    assert generated.corpus["doc_id"].tolist()[:9] == corpus["doc_id"].tolist()
    added = generated.corpus.iloc[9:]
    assert added["doc_id"].tolist() == negatives["doc_id"].tolist()
    first = negatives.iloc[0]
    assert first["doc_id"] == f"gen-neg-{first['source_doc_id']}-0"
    assert added["text"].iat[0] == f"{words[first['source_doc_id']]} decoy 0"
    record = generated.generation.set_index("query_id").loc[queries["query_id"].iat[0]]
    assert record["first_query"] == f"query about {words[sources[0]]}"
    assert list(record["rewrites"]) == [queries["text"].iat[0]] * 2  # rounds: 2
    assert record["character"].startswith(words[sources[0]] + " reader")
    prompts = load_prompts(PROMPTS)
    for attribute in ATTRIBUTES:
        values = {o.value for o in prompts.attributes[attribute]}
        assert set(generated.generation[attribute]) <= values
    # "query about alpha" shares 1 of its 3 words with its document, "rewritten alpha" 1 of 2.
    assert generated.generation["first_query_overlap"].tolist() == [1 / 3] * 4
    assert generated.generation["query_overlap"].tolist() == [0.5] * 4
    assert generated.stats["word_overlap"] == {"first_query": 0.3333, "query": 0.5}
    assert generated.dropped.empty and generated.stats["dropped"] == 0

    # The tables are the contracts' and the checksum is of their content.
    folder = tmp_path / "dataset"
    paths = write_generated(generated, folder)
    assert pq.read_schema(paths["qrels"]).names == contracts.QRELS.names
    assert pq.read_table(paths["generation"]).num_rows == 4
    checksum = content_checksum([paths[n] for n in ("corpus", "queries", "qrels")])

    airbench_llm.reset_counts()
    again, summary = run(airbench_llm, tmp_path / "cache", corpus)
    assert airbench_llm.requests == 0 and summary["cache_hits"] == 24
    pd.testing.assert_frame_equal(again.queries, generated.queries)
    pd.testing.assert_frame_equal(again.corpus, generated.corpus)
    other = write_generated(again, tmp_path / "again")
    assert content_checksum([other[n] for n in ("corpus", "queries", "qrels")]) == checksum


def test_a_widened_sample_pays_only_for_the_new_documents(airbench_llm, tmp_path):
    corpus = corpus_frame()
    small, _ = run(airbench_llm, tmp_path / "cache", corpus, documents=3)
    airbench_llm.reset_counts()
    wide, summary = run(airbench_llm, tmp_path / "cache", corpus, documents=5)
    assert airbench_llm.requests == 2 * 6 and summary["cache_hits"] == 3 * 6
    assert set(small.queries["query_id"]) < set(wide.queries["query_id"])


def test_failures_are_retried_or_dropped_with_their_step_and_reason(tmp_path):
    corpus = corpus_frame()
    probe = FakeLLM(responder=airbench_responder).start()
    try:
        sampled = run(probe, tmp_path / "probe", corpus)[0].generation["doc_id"].tolist()
    finally:
        probe.stop()
    words = {f"d{i}": w for i, w in enumerate(WORDS)}
    down, cut, limited, garbled = (words[d] for d in sampled)
    script = {
        # Every prompt of this document fails with a 500: dropped at the first step.
        f'"""\n{down} ': ["down"],
        # Its hard negatives come back truncated three times: dropped at the last step.
        f"Write in English.\n\nQuery: rewritten {cut}": ["truncated"] * 3,
        # A 429 with Retry-After and a malformed body: retried, then fine.
        f"Person: {limited} reader": ["429"],
        f"Query: query about {garbled}": ["bad_body"],
    }
    lenient = {"max_dropped_share": 0.5}
    with FakeLLM(responder=airbench_responder, script=script, retry_after=1) as fake:
        generated, summary = run(fake, tmp_path / "cache", corpus, lenient)
        assert fake.behaviours["429"] == 1 and fake.behaviours["bad_body"] == 1
        assert fake.behaviours["down"] == 3  # one request, two retries
        assert fake.behaviours["truncated"] == 3
        dropped = generated.dropped.set_index("doc_id")
        assert dropped.loc[sampled[0], ["step", "reason"]].tolist() == ["characters", "http_500"]
        assert dropped.loc[sampled[1], ["step", "reason"]].tolist() == ["negatives", "truncated"]
        assert "max_tokens" in dropped.loc[sampled[1], "detail"]
        assert generated.stats["dropped_by_step_and_reason"] == {
            "characters/http_500": 1,
            "negatives/truncated": 1,
        }
        assert sorted(generated.queries["query_id"]) == sorted(f"gen-q-{d}" for d in sampled[2:])
        assert summary["dropped_by_reason"] == {"http_500": 1, "truncated": 1}
        assert summary["failed_answers_by_reason"] == {
            "http_500": 1,
            "malformed_response": 1,
            "truncated": 3,
        }
        # A rerun asks again only what failed over HTTP; the truncated answers are cached.
        fake.reset_counts()
        again, summary = run(fake, tmp_path / "cache", corpus, lenient)
        assert fake.requests == 3 and fake.behaviours == {"down": 3}
        assert summary["dropped_by_reason"] == {"http_500": 1, "truncated": 1}
        pd.testing.assert_frame_equal(again.queries, generated.queries)
        # By default (2%) losing 2 of 19 answers fails the run, with the counts by step.
        with pytest.raises(LLMError) as error:
            run(fake, tmp_path / "cache", corpus)
        assert str(error.value).startswith("2 of 19 requests to 'fake' were dropped (10.5%)")
        assert "1 http_500 at 'generate: characters'" in str(error.value)
        assert "1 truncated at 'generate: negatives'" in str(error.value)


def test_a_refused_key_stops_the_run_at_once(tmp_path):
    """A 401 on every request used to give a dataset of 0 queries and a green run."""
    message = "Incorrect API key provided: sk-live-abcdefgh12345678"
    with FakeLLM(script={"Document": ["401"]}, error_message=message) as fake:
        with pytest.raises(LLMError) as error:
            run(fake, tmp_path / "cache", corpus_frame(), {"max_concurrency": 1})
        assert fake.requests == 1  # not one per document, not retried
        text = str(error.value)
        assert text.startswith(f"{fake.base_url} answered HTTP 401 for model 'fake'")
    assert "Incorrect API key provided: ***" in text and "abcdefgh" not in text


def test_chunked_documents_are_sampled_as_chunks(airbench_llm, tmp_path):
    corpus = corpus_frame(n=3, words=450)
    generated, _ = run(
        airbench_llm,
        tmp_path / "cache",
        corpus,
        chunk_tokens=200,
        overlap=50,
        chunk_unit="words",
        documents=2,
    )
    chunk_ids = [f"d{i}#{n}" for i in range(3) for n in range(3)]
    assert generated.corpus["doc_id"].tolist()[:9] == chunk_ids
    assert set(generated.generation["doc_id"]) <= set(chunk_ids)
    assert generated.stats["chunking"] == {"documents": 3, "documents_chunked": 3, "chunks": 9}


def test_no_negatives_wanted_skips_the_step(airbench_llm, tmp_path):
    generated, summary = run(airbench_llm, tmp_path / "cache", corpus_frame(), negatives=[0, 0])
    assert summary["requests"] == 4 * 5 and len(generated.queries) == 4
    assert generated.negatives.empty and (generated.qrels["relevance"] == 1).all()
    assert len(generated.corpus) == 9


def test_chunks_can_be_counted_in_a_models_tokens(minilm_path):
    from irflow.encoding.models import load_tokenizer

    tokenizer = load_tokenizer({"id": str(minilm_path), "revision": None})
    text = " ".join(["retrieval"] * 300)  # one word-piece token each
    corpus = pd.DataFrame([{"doc_id": "d", "title": "T", "text": text}])
    chunks, stats = chunk_corpus(corpus, 200, 50, tokenizer)
    assert chunks["doc_id"].tolist() == ["d#0", "d#1"]
    assert [len(t.split()) for t in chunks["text"]] == [200, 150]
    assert stats["documents_chunked"] == 1


def test_a_corpus_id_that_a_negative_needs_is_an_error(airbench_llm, tmp_path):
    corpus = corpus_frame(n=1)
    corpus = pd.concat(
        [corpus, pd.DataFrame([{"doc_id": "gen-neg-d0-0", "title": "", "text": "x"}])]
    )
    with pytest.raises(InputError, match="'gen-neg-d0-0' is the id a generated hard negative"):
        run(airbench_llm, tmp_path / "cache", corpus, documents=1)


# --- config -----------------------------------------------------------------------------------


def test_the_config_names_every_generate_problem():
    config = minimal_config(
        "scifact",
        generate={
            "gen": {"dataset": "nope", "negatives": [5, 3]},
            "scifact": {"dataset": "scifact", "chunk_tokens": 50, "overlap": 50},
            "short": {"dataset": "scifact", "max_words": 10, "split": "dev", "dev_share": 0},
        },
    )
    with pytest.raises(ConfigError) as error:
        validate_config(config, SCHEMA)
    message = str(error.value)
    assert "'generate.short.max_words': 10 is less than min_words (20)" in message
    assert "'generate.short.split': the dev split is empty with dev_share 0" in message
    assert "'generate.gen.dataset': 'nope' is not a key of 'datasets'" in message
    assert "'generate.gen.negatives': the least (5) exceeds the most (3)" in message
    assert "'generate.scifact': the name is already a dataset's" in message
    assert "'generate.scifact.overlap': 50 must be less than chunk_tokens (50)" in message
    assert "'llm.model': needed by 'generate'" in message
    bad_key = config | {"generate": {}, "llm": {"model": "m", "api_key": "sk-1"}}
    with pytest.raises(ConfigError, match="config key 'llm': Additional properties"):
        validate_config(bad_key, SCHEMA)
    good = config | {"generate": {"gen": {"dataset": "scifact"}}, "llm": {"model": "m"}}
    filled = validate_config(good, SCHEMA)
    assert list_generated(filled)["gen"]["negatives"] == [3, 7]
    assert filled["llm"]["cache_dir"] == "results/llm-cache"


# --- the workflow -----------------------------------------------------------------------------


def test_generate_reads_a_local_tokenizer_without_chunking_and_qrels_for_positives(
    shared_datasets, minilm_path, tmp_path
):
    """Editing the tokenizer that counts min_words regenerates, as does editing the qrels
    whose positives are sampled: both are the rule's inputs (Snakemake's dry run)."""
    config = official_scifact_config(shared_datasets) | {
        "llm": {"model": "fake"},
        "generate": {
            "by-tokens": {"dataset": "scifact", "tokenizer": str(minilm_path), "min_words": 30},
            "from-positives": {"dataset": "scifact", "sample_from": "positives"},
        },
    }
    targets = [f"results/datasets/{name}/corpus.parquet" for name in config["generate"]]
    inputs = {
        wildcards["dataset"]: ", ".join(files)
        for rule, wildcards, files in planned_inputs(tmp_path, config, *targets)
        if rule == "generate"
    }
    assert str(minilm_path / "tokenizer.json") in inputs["by-tokens"]
    assert "qrels" not in inputs["by-tokens"]
    assert "results/datasets/scifact/qrels.parquet" in inputs["from-positives"]
    assert "tokenizer.json" not in inputs["from-positives"]


@pytest.mark.e2e
def test_the_workflow_evaluates_a_generated_dataset(shared_datasets, tmp_path):
    """Five of SciFact's judged-relevant documents through generate (two queries to dev),
    filter, BM25 and scoring of the test split, against the fake server; the dry-run estimate
    before (30 requests: two rewrites a query) and after (all cached); a second run has
    nothing to do."""
    config = official_scifact_config(shared_datasets) | {
        "generate": {
            "scifact-gen": {
                "dataset": "scifact",
                "documents": 5,
                "sample_from": "positives",
                "dev_share": 0.4,
            }
        },
        "metrics": ["ndcg_cut.10", "recall.100"],
        "report_metrics": ["ndcg_cut_10", "recall_100"],
    }
    target = "results/scores/scifact-gen/bm25.parquet"
    with FakeLLM(responder=airbench_responder) as fake:
        config["llm"] = {"base_url": fake.base_url, "model": "fake", "max_concurrency": 2}
        command = snakemake_command(tmp_path, config=config, cores="1")
        estimate_target = "results/llm_estimate/scifact-gen.json"
        run_command([*command, estimate_target], env=os.environ)  # online: the fake LLM
        before = json.loads((tmp_path / estimate_target).read_text())
        assert fake.requests == 0 and before["requests"] == 30 and before["cached"] == 0
        assert before["sample"]["not_positive"] > 0 and before["documents"] == 5
        run_command([*command, target], env=os.environ)
        assert fake.requests == 30
        folder = tmp_path / "results/datasets/scifact-gen"
        sampled = set(pd.read_parquet(folder / "generation/generation.parquet")["doc_id"])
        judged = pd.read_parquet(tmp_path / "results/datasets/scifact/qrels.parquet")
        assert sampled <= set(judged.loc[judged["relevance"] >= 1, "doc_id"])
        dev = set(pd.read_parquet(folder / "qrels/dev.parquet")["query_id"])
        test = set(pd.read_parquet(folder / "qrels/test.parquet")["query_id"])
        assert len(dev) == 2 and len(test) == 3
        scores = pd.read_parquet(tmp_path / target)
        assert set(scores["query_id"]) == test  # the scored split only
        assert scores["query_id"].str.startswith("gen-q-").all()
        assert set(scores["metric"]) == {"ndcg_cut_10", "recall_100"}
        manifest = json.loads(
            (tmp_path / "results/manifests/generate/scifact-gen.json").read_text()
        )
        assert manifest["llm"]["requests"] == 30 and manifest["llm"]["model"] == "fake"
        assert manifest["statistics"]["queries"] == 5
        source = json.loads((tmp_path / "results/datasets/scifact-gen/source.json").read_text())
        assert source["base_dataset"] == "scifact" and len(source["checksum"]) == 32
        assert source["split"] == "test"
        fake.reset_counts()
        assert "Nothing to be done" in run_command([*command, target], env=os.environ).output
        # Seeds (issue 50 item 10): a list of one seed plans nothing; adding a seed plans only
        # that seed's jobs (its own dataset, named <name>@seed<seed>), none of the first's.
        seeded = "results/scores/scifact-gen@seed1/bm25.parquet"
        for seeds, targets in (([0], [target]), ([0, 1], [target, seeded])):
            config["generate"]["scifact-gen"]["seed"] = seeds
            planned = snakemake_command(tmp_path, "-n", *targets, config=config, cores="1")
            said = run_command(planned, env=os.environ).output
            if len(seeds) == 1:
                assert "Nothing to be done" in said, said
            else:
                assert set(re.findall(r"dataset=([^,\s]+)", said)) == {"scifact-gen@seed1"}, said
        config["generate"]["scifact-gen"]["seed"] = 0
        command = snakemake_command(tmp_path, config=config, cores="1")  # the first seed alone
        run_command([*command, "-f", estimate_target], env=os.environ)
        cached = json.loads((tmp_path / estimate_target).read_text())
        assert cached["requests"] == 0 and cached["cached"] == 30
        assert fake.requests == 0


# --- languages ----------------------------------------------------------------------------------

CHINESE = [
    "信息检索是从大量文档中找到与用户需求相关的内容的技术",  # 26 characters, no spaces
    "搜索引擎根据查询对网页进行排序并返回最相关的结果给用户",  # 27
    "向量检索把文本表示为稠密向量",  # 14: too short at min_words 20
]


def test_chinese_text_counts_a_word_per_character_and_is_sampled_and_chunked(
    airbench_llm, tmp_path
):
    """Whitespace made each Chinese document one word: nothing was sampled."""
    assert [word_count("", text) for text in CHINESE] == [26, 27, 14]
    assert word_count("检索", "retrieval 系统 ok") == 2 + 1 + 2 + 1
    corpus = pd.DataFrame({"doc_id": ["zh0", "zh1", "zh2"], "title": [""] * 3, "text": CHINESE})
    chosen, stats = sample_documents(corpus, 3, seed=0, strata=None, min_words=20)
    assert sorted(chosen) == [0, 1] and stats["too_short"] == 1
    generated, _ = run(airbench_llm, tmp_path / "cache", corpus, documents=3, language="Chinese")
    assert sorted(generated.generation["doc_id"]) == ["zh0", "zh1"]
    chunks, chunk_stats = chunk_corpus(corpus.iloc[:1], 10, 2)
    assert chunks["text"].tolist() == [CHINESE[0][:10], CHINESE[0][8:18], CHINESE[0][16:26]]
    assert chunk_stats["documents_chunked"] == 1


def test_an_arabic_corpus_is_counted_in_its_words(shared_datasets):
    corpus = pd.read_json(shared_datasets / "arcd-partial" / "corpus.jsonl.gz", lines=True)
    corpus = corpus.rename(columns={"_id": "doc_id"}).astype({"doc_id": str})
    corpus["title"] = corpus["title"].fillna("")
    counts = document_lengths(corpus)
    spaced = [len(f"{t} {x}".split()) for t, x in zip(corpus["title"], corpus["text"])]
    # Arabic words are separated by spaces; a document quoting Chinese names counts each of
    # their characters.
    han = corpus["text"].str.contains("[\u4e00-\u9fff]").to_numpy()
    assert counts[~han].tolist() == [n for n, h in zip(spaced, han) if not h]
    assert han.sum() == 1 and counts[han][0] > spaced[int(han.argmax())]
    chosen, stats = sample_documents(corpus, 20, seed=0, strata=4, min_words=40)
    assert stats["candidates"] == int((counts >= 40).sum()) > 20 and len(chosen) == 20
    assert all(counts[i] >= 40 for i in chosen)


def test_min_words_counts_the_tokenizers_tokens_when_one_is_named(minilm_path):
    from irflow.encoding.models import load_tokenizer

    tokenizer = load_tokenizer({"id": str(minilm_path), "revision": None})
    corpus = pd.DataFrame(
        {
            "doc_id": ["pieces", "plain"],
            "title": ["", ""],
            # 6 words each; the first splits into many word pieces.
            "text": [" ".join(["hyperparameterization"] * 6), " ".join(["the"] * 6)],
        }
    )
    lengths = document_lengths(corpus, tokenizer)
    assert lengths[0] > 20 and lengths[1] == 6
    assert sample_documents(corpus, 2, 0, None, 20)[0] == []
    assert sample_documents(corpus, 2, 0, None, 20, tokenizer)[0] == [0]


# --- AIR-Bench's corpus preparation, judged positives, splits ---------------------------------


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("write to jane.doe@example.org today", ["email"]),
        ("call +44 20 7946 0958 now", ["phone"]),
        ("call (555) 123-4567.", ["phone"]),
        ("fax 555.123.4567", ["phone"]),
        ("+33 1 23 45 67 89", ["phone"]),
        ("mail a@b.co or ring +15551234567", ["email", "phone"]),
        ("an unbroken id 5551234567", []),
        ("from 1999-2003, on 2020-01-15", []),
        ("p = 0.05, 0.01 and 0.03; CI 1.2-3.4", []),
        ("ISBN 978-3-16-148410-0, doi 10.1016/j.cell.2004.01.005", []),
        ("n = 12,345 of 1,234,567 people; range 100-200-300", []),
        ("an @mention, a@b, +5 degrees", []),
        ("12 345 678 901 cells; 1457.60-2761.80; 5353-10 649", []),
        ("recruitment9 10 11 12 13 14 ; growth", []),
        ("FAX (212) 717-3298. Article", ["phone"]),
        ("06 12 34 56 78", ["phone"]),
    ],
)
def test_personal_data_detectors(text, found):
    assert personal_data(text, ["email", "phone"]) == found


def test_too_long_and_personal_documents_are_never_sampled_but_stay_in_the_corpus():
    corpus = corpus_frame()
    corpus.loc[1, "text"] += " mail alpha@example.com"
    corpus.loc[2, "text"] += " call 555-123-4567"
    corpus.loc[3, "text"] += " and more" * 20  # 70 words
    chosen, stats = sample_documents(
        corpus, 9, 0, None, 20, max_words=40, personal=["email", "phone"]
    )
    assert sorted(corpus["doc_id"].iloc[chosen]) == ["d0", "d4", "d5", "d6", "d7", "d8"]
    assert stats["too_long"] == 1 and stats["personal_data"] == {"email": 1, "phone": 1}
    assert stats["candidates"] == 6
    # Off by default: every document is a candidate.
    assert len(sample_documents(corpus, 9, 0, None, 20)[0]) == 9


def test_sampling_from_judged_positives_takes_only_them_and_their_chunks():
    corpus = corpus_frame()
    corpus.loc[2, "text"] = " ".join(f"t{i}" for i in range(60))  # two chunks of 40, overlap 20
    positives = {"d2", "d5", "d7", "missing"}
    base = spec(documents=9, sample_from="positives")
    _, items, stats = prepare(corpus, typed_generate(base), positives=positives)
    assert sorted(i.doc_id for i in items) == ["d2", "d5", "d7"]
    assert stats["sample"]["not_positive"] == 6
    chunked, items, stats = prepare(
        corpus,
        typed_generate(base | {"chunk_tokens": 40, "overlap": 20, "chunk_unit": "words"}),
        positives=positives,
    )
    assert "source_doc_id" not in chunked.columns
    assert sorted(i.doc_id for i in items) == ["d2#0", "d2#1", "d5", "d7"]
    with pytest.raises(ValueError, match="positives"):
        prepare(corpus, typed_generate(base))


def test_the_dev_share_splits_the_queries_seeded_and_qrels_per_split(airbench_llm, tmp_path):
    corpus = corpus_frame()
    generated, _ = run(airbench_llm, tmp_path / "cache", corpus, documents=8, dev_share=0.25)
    splits = generated.generation.set_index("query_id")["split"]
    assert splits.value_counts().to_dict() == {"test": 6, "dev": 2}
    assert generated.stats["queries_by_split"] == {"dev": 2, "test": 6}
    ids = list(splits.index)
    assert assign_splits(ids, 0.25, 0) == splits.to_dict()  # seeded: the same again
    assert assign_splits(ids, 0.25, 1) != splits.to_dict()
    paths = write_generated(generated, tmp_path / "out")
    tables = {n: pd.read_parquet(paths[n]) for n in ("qrels", "qrels_dev", "qrels_test")}
    for name in ("dev", "test"):
        assert set(tables[f"qrels_{name}"]["query_id"]) == set(splits[splits == name].index)
    pd.testing.assert_frame_equal(tables["qrels"], tables["qrels_test"])
    # Every judgement is in exactly one split, negatives with their query.
    assert len(tables["qrels_dev"]) + len(tables["qrels_test"]) == len(generated.qrels)
    scored_dev = write_generated(generated, tmp_path / "dev", split="dev")
    pd.testing.assert_frame_equal(
        pd.read_parquet(scored_dev["qrels"]), pd.read_parquet(scored_dev["qrels_dev"])
    )
    assert pd.read_parquet(paths["queries"])["query_id"].tolist() == ids  # all queries


# --- the dry-run estimate ---------------------------------------------------------------------

# The fake server's answers, in words: "alpha reader 0", "alpha scenario 0", "query about
# alpha", a negative "alpha decoy 0" titled "Not alpha".
FAKE_WORDS = {"character": 3, "scenario": 3, "query": 3, "negative": 3, "title": 2}


def words_of(text: str) -> int:
    return len(text.split())  # as the fake server counts tokens


def test_the_estimate_matches_what_a_run_asks_and_knows_the_cache(airbench_llm, tmp_path):
    corpus = corpus_frame()
    settings = {"base_url": airbench_llm.base_url, "model": "fake", "max_retries": 2}
    with LLMClient(settings, tmp_path / "cache", progress=False) as client:
        before = estimate(
            corpus, spec(), load_prompts(PROMPTS), client, count_tokens=words_of, typical=FAKE_WORDS
        )
    assert airbench_llm.requests == 0  # a dry run sends nothing
    _, actual = run(airbench_llm, tmp_path / "cache", corpus)
    # Requests: exact (4 documents x 6 requests, two rewrites each), and per step.
    assert before["requests"] == actual["requests"] == 24 and before["cached"] == 0
    assert {s: c["requests"] for s, c in before["by_step"].items()} == dict.fromkeys(
        ("characters", "scenarios", "query", "rewrite", "negatives"), 4
    ) | {"rewrite": 8}
    assert before["max_requests"] == 24 * 3  # each with its 2 re-asks
    # Tokens: the prompts within 1% (the stand-ins differ from the fake's answers by a word or
    # two; measured 2316 vs 2312), the answers within 5% (JSON spacing, the fence the fake puts
    # around characters; 266 vs 270).
    assert abs(before["prompt_tokens"] - actual["prompt_tokens"]) <= 0.01 * actual["prompt_tokens"]
    completion = actual["completion_tokens"]
    assert abs(before["completion_tokens"] - completion) <= 0.05 * completion
    assert before["max_completion_tokens"] == 72 * 1024

    with LLMClient(settings, tmp_path / "cache", progress=False) as client:
        cached = estimate(corpus, spec(), load_prompts(PROMPTS), client, count_tokens=words_of)
        widened = estimate(
            corpus, spec(documents=6), load_prompts(PROMPTS), client, count_tokens=words_of
        )
    # A cached config asks nothing, and its tokens are the cache's; a widened one asks only
    # for the new documents.
    assert cached["requests"] == 0 and cached["cached"] == 24
    assert (
        sum(s["cached_prompt_tokens"] for s in cached["by_step"].values())
        == (actual["prompt_tokens"])
    )
    assert widened["requests"] == 2 * 6 and widened["cached"] == 24


def test_the_estimate_defaults_to_characters_over_four_and_the_prompts_lengths(tmp_path):
    corpus = corpus_frame(n=1, words=40)
    settings = {"base_url": "http://127.0.0.1:9/v1", "model": "nowhere"}
    with LLMClient(settings, tmp_path / "cache", progress=False) as client:
        result = estimate(
            corpus, spec(documents=1, negatives=[2, 2]), load_prompts(PROMPTS), client
        )
    assert result["counted_with"] == "characters / 4" and result["requests"] == 6
    # Two hard negatives as long as the 40-word document: at least 80 words of "word ".
    assert result["by_step"]["negatives"]["completion_tokens"] >= 2 * 40 * len("word ") // 4
    # Two documents of the same text ask for characters once, as LLMClient.complete does.
    twins = pd.concat([corpus, corpus.assign(doc_id="twin")], ignore_index=True)
    with LLMClient(settings, tmp_path / "cache", progress=False) as client:
        twice = estimate(twins, spec(documents=2), load_prompts(PROMPTS), client)
    assert twice["by_step"]["characters"]["requests"] == 1


def test_two_documents_of_the_same_text_ask_for_characters_once(airbench_llm, tmp_path):
    corpus = corpus_frame(n=1)
    twins = pd.concat([corpus, corpus.assign(doc_id="twin")], ignore_index=True)
    _, summary = run(airbench_llm, tmp_path / "cache", twins, documents=2)
    characters = [b for b in airbench_llm.bodies if '{"characters"' in last_user_message(b)]
    assert len(characters) == 1 and summary["duplicates"] >= 1


# --- AIR-Bench's defaults by task (issue 38, item 7) ------------------------------------------


def generate_config(**spec) -> dict:
    """A validated config with one generate block ``gen`` over SciFact, and its resolved spec."""
    config = minimal_config(
        "scifact", llm={"model": "m"}, generate={"gen": {"dataset": "scifact"} | spec}
    )
    return list_generated(validate_config(config, SCHEMA))["gen"]


def test_long_doc_generation_asks_for_no_hard_negatives(airbench_llm, tmp_path):
    """AIR-Bench (Chen et al., 2024), Long-Doc: "we do not generate additional hard negatives";
    its repository's sketch keeps hard negatives for QA only (``if task_type == 'QA': hn =
    generate_hard_negative(q, d) else: hn = None``), and every 24.05 Long-Doc dataset lists 0.
    QA keeps "3~7 hard negatives" (its README); a configured range wins (a named variant)."""
    long_doc = generate_config(chunk_tokens=200)
    assert long_doc["negatives"] == [0, 0], (
        "AIR-Bench on Long-Doc: 'we do not generate additional hard negatives'"
    )
    assert generate_config()["negatives"] == [3, 7]
    assert generate_config(chunk_tokens=200, negatives=[1, 2])["negatives"] == [1, 2]
    corpus = corpus_frame(n=3, words=450)
    chunked = {"chunk_tokens": 200, "chunk_unit": "words", "documents": 2, "negatives": None}
    generated, summary = run(airbench_llm, tmp_path / "cache", corpus, **chunked)
    asked = [last_user_message(body) for body in airbench_llm.bodies]
    assert not [p for p in asked if '{"negatives"' in p], "a Long-Doc run asked for negatives"
    assert summary["requests"] == 2 * 5 and len(generated.queries) == 2
    assert generated.negatives.empty and (generated.qrels["relevance"] == 1).all()


def test_long_doc_chunks_count_tokens_by_default_and_words_as_a_variant(minilm_path):
    """AIR-Bench's repository (docs/data_generation.md): "we use the `SimpleNodeParser` from the
    LlamaIndex to split the long document to fixed-size chunks (`chunk_size=200`,
    `chunk_overlap=50`)": sizes in tokens (LlamaIndex's default tokenizer, tiktoken's
    cl100k_base), not words."""
    spec_ = generate_config(chunk_tokens=200)
    # LlamaIndex counts in its own default tokenizer, cl100k_base (tokenizer null); the fixed
    # windows (a variant) count with a Hugging Face copy of it.
    assert spec_["chunker"] == "llamaindex" and spec_.get("tokenizer") is None
    windows = generate_config(chunk_tokens=200, chunker="windows")
    assert windows.get("tokenizer") == "Xenova/gpt-3.5-turbo", (
        "AIR-Bench's chunk_size=200 counts tokens (LlamaIndex: tiktoken cl100k_base)"
    )
    assert spec_["chunk_unit"] == "tokens"
    assert generate_config(chunk_tokens=200, chunk_unit="words")["tokenizer"] is None
    assert generate_config()["tokenizer"] is None  # no chunks: lengths stay in words
    # A corpus of words that are two word-piece tokens each: 200 tokens are 100 words.
    from irflow.encoding.models import load_tokenizer

    tokenizer = load_tokenizer({"id": str(minilm_path), "revision": None})
    assert len(tokenizer("retrievers", add_special_tokens=False)["input_ids"]) == 2
    corpus = pd.DataFrame([{"doc_id": "d", "title": "T", "text": " ".join(["retrievers"] * 300)}])
    in_tokens = {"chunk_tokens": 200, "overlap": 50, "documents": 1, "min_words": 0}
    fixed = in_tokens | {"chunker": "windows"}
    chunks, _, stats = prepare(corpus, typed_generate(spec(**fixed)), tokenizer)
    assert [len(t.split()) for t in chunks["text"]] == [100, 100, 100, 75]
    with pytest.raises(ValueError, match="chunk_unit tokens needs the tokenizer"):
        prepare(corpus, typed_generate(spec(**fixed)), None)
    words, _, _ = prepare(corpus, typed_generate(spec(**fixed, chunk_unit="words")), tokenizer)
    assert [len(t.split()) for t in words["text"]] == [200, 150]
    # LlamaIndex's splitter counts the same tokens: no chunk over 200 (100 words).
    chunks, _, _ = prepare(corpus, typed_generate(spec(**in_tokens)), tokenizer)
    assert len(chunks) > 1 and max(len(t.split()) for t in chunks["text"]) <= 100


def test_long_doc_dev_is_one_dataset_per_domain():
    """AIR-Bench: "For Long-Doc task, we select one dataset as the dev set for each domain, and
    remain other datasets as the test set." (airbench.txt, line 295). Of the Long-Doc datasets
    of a domain the first by name is dev as a whole, the others test; a dataset without a
    domain, or with its own dev_share, is as configured. (Before: every Long-Doc dataset was
    test.)"""
    long_doc = {"dataset": "scifact", "chunk_tokens": 200}
    config = minimal_config(
        "scifact",
        llm={"model": "m"},
        generate={
            "book-b": long_doc | {"domain": "book"},
            "book-a": long_doc | {"domain": "book"},
            "law-x": long_doc | {"domain": "law"},
            "law-y": long_doc | {"domain": "law", "dev_share": 0},
            "plain": dict(long_doc),
            "qa": {"dataset": "scifact", "domain": "book"},
        },
    )
    generated = list_generated(validate_config(config, SCHEMA))
    splits = {name: (spec["dev_share"], spec["split"]) for name, spec in generated.items()}
    assert splits == {
        "book-a": (1.0, "dev"),
        "book-b": (0.0, "test"),
        "law-x": (1.0, "dev"),
        "law-y": (0, "test"),
        "plain": (0.0, "test"),
        "qa": (0.2, "test"),  # QA: 1:4 within the dataset
    }


def test_qa_queries_are_split_into_dev_and_test_at_one_to_four(airbench_llm, tmp_path):
    """AIR-Bench (Chen et al., 2024) splits its QA datasets into dev and test at 1:4; its
    repository's 24.05 task list (air_benchmark/tasks/v24_05/qa_tasks.py) holds "dev": 345 and
    "test": 1382 queries for English Wikipedia (0.1998 dev). A Long-Doc dataset is dev or test
    as a whole (docs/available_tasks.md: llama2 "dev", gemini "test")."""
    assert generate_config()["dev_share"] == 0.2, "AIR-Bench splits QA dev:test at 1:4"
    assert generate_config(chunk_tokens=200)["dev_share"] == 0
    assert generate_config(dev_share=0.5)["dev_share"] == 0.5
    generated, _ = run(airbench_llm, tmp_path / "cache", corpus_frame(), dev_share=None)
    assert generated.stats["queries_by_split"] == {"dev": 1, "test": 3}  # 4 queries, 1:4
