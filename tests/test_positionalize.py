"""Position-controlled variants: names, haystack arithmetic, fillers, and SciFact."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, SCHEMA, minimal_config, official_scifact_config, planned_inputs
from pydantic import ValidationError
from tiny_models import build_tiny_cross_encoder

from irflow.core.config import schema_defaults
from irflow.core.contracts import document_text
from irflow.core.errors import ConfigError
from irflow.data.tokens import encode, tokenizer_fingerprint
from irflow.derived.positionalize import (
    SCREEN_BATCH,
    SEPARATOR,
    Positionalizer,
    Screen,
    list_variants,
    parse_variant,
    positionalize,
    variant_checksum,
    variant_name,
)
from irflow.workflow.config import validate_config


def word_tokenizer():
    """One token per word or punctuation mark (every word is unknown), with real offsets."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")


WORDS = "river stone cloud maple copper lantern violet harbor meadow falcon".split()
FILLERS = [
    {
        "doc_id": f"f{i:02d}",
        "title": "",
        "text": " ".join(WORDS[(i + j) % 10] for j in range(12)) + ".",
    }
    for i in range(40)
]
NEAR_MISSES = [
    {"doc_id": f"n{i}", "title": "", "text": f"Penguins of colony {i} huddle on the ice."}
    for i in range(3)
]
RELEVANT = [
    {"doc_id": "d1", "title": "Zebra", "text": "zebra stripes confuse biting flies."},
    {"doc_id": "d2", "title": "", "text": "unicorn one"},
    {"doc_id": "d3", "title": "", "text": "unicorn two"},
    {"doc_id": "d4", "title": "", "text": " ".join(["giraffe"] * 60)},
    {"doc_id": "d5", "title": "", "text": "okapi forest"},
]
QUERIES = pd.DataFrame(
    {
        "query_id": ["q1", "q2", "q3", "q4", "q5", "q6"],
        "text": [
            "where do penguins and zebras live",
            "unicorns",
            "giraffe necks",
            "an unjudged query",
            "judged not relevant only",
            "okapi",
        ],
    }
)
QRELS = pd.DataFrame(
    {
        "query_id": ["q1", "q1", "q2", "q2", "q3", "q5", "q6"],
        "doc_id": ["d1", "f00", "d2", "d3", "d4", "f01", "d5"],
        "relevance": [1, 0, 1, 2, 1, 0, 1],
        "span_start": pd.array([None] * 7, dtype="Int64"),
        "span_end": pd.array([None] * 7, dtype="Int64"),
    }
)
CORPUS = pd.DataFrame(FILLERS + NEAR_MISSES + RELEVANT)
LENGTH = 40
# The workflow's default BM25, which ranks bm25 fillers: {type: bm25} with the schema's defaults.
DEFAULT_BM25 = schema_defaults(SCHEMA, "bm25", {"type": "bm25"})


def paragraph_tokenizer():
    """As ``word_tokenizer``, but every line break is a token: the separator costs two."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    backend.normalizer = normalizers.Replace("\n", " ¶ ")
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")


@pytest.fixture(scope="module")
def tokenizer():
    return word_tokenizer()


def make(tokenizer, fillers="random", seed=0, bm25=None) -> Positionalizer:
    return Positionalizer(
        CORPUS, QUERIES, QRELS, tokenizer, fillers, seed, bm25=bm25 or DEFAULT_BM25
    )


def haystack(variant, query_id="q1") -> tuple[str, int, int]:
    row = variant.qrels[(variant.qrels["query_id"] == query_id) & (variant.qrels["relevance"] > 0)]
    doc_id = row["doc_id"].item()
    text = variant.corpus.set_index("doc_id").loc[doc_id, "text"]
    return text, int(row["span_start"].item()), int(row["span_end"].item())


def fillers_of(text: str, start: int, end: int) -> str:
    """The haystack's filler words, the relevant text and separators taken out."""
    return " ".join((text[:start] + " " + text[end:]).split())


def test_variant_names_round_trip():
    assert variant_name("scifact", 512, 0.25) == "scifact@L512@p0.25"
    assert variant_name("scifact", 512, 0) == "scifact@L512@p0"
    assert variant_name("nf-corpus.v2", 2048, 1.0) == "nf-corpus.v2@L2048@p1"
    for name in ("scifact@L512@p0.25", "scifact@L512@p0", "nf-corpus.v2@L2048@p1"):
        assert variant_name(*parse_variant(name)) == name
    assert parse_variant("scifact@L1024@p0.75") == ("scifact", 1024, 0.75)
    with pytest.raises(ValueError, match="not a variant name"):
        parse_variant("scifact@512@p0.5")


def test_list_variants_from_config():
    config = minimal_config(
        "scifact",
        positionalize={
            "scifact-near": {
                "dataset": "scifact",
                "tokenizer": "minilm",
                "lengths": [512, 1024],
                "fillers": "bm25",
            }
        },
    )
    config = validate_config(config, SCHEMA)
    variants = list_variants(config)
    assert len(variants) == 2 * 5
    spec = variants["scifact-near@L1024@p0.75"]
    assert spec == {
        "block": "scifact-near",
        "dataset": "scifact",
        "tokenizer": "minilm",
        "fillers": "bm25",
        "seed": 0,
        "length": 1024,
        "position": 0.75,
    }
    config["positionalize"]["scifact-near"]["dataset"] = "nfcorpus"
    with pytest.raises(ConfigError, match="positionalize.scifact-near.dataset"):
        list_variants(config)


def test_queries_are_kept_or_skipped_by_reason(tokenizer):
    variant = make(tokenizer).variant(LENGTH, 0.5)
    assert variant.stats["queries_kept"] == 2
    assert variant.stats["queries_skipped"] == {
        "no_relevant": 1,
        "relevant_document_missing": 0,
        "several_relevant": 1,
        "too_long": 1,
        "unjudged": 1,
    }
    assert variant.queries["query_id"].tolist() == ["q1", "q6"]
    # The kept queries' judgements, the non-relevant one included.
    assert sorted(zip(variant.qrels["query_id"], variant.qrels["doc_id"])) == [
        ("q1", "d1"),
        ("q1", "f00"),
        ("q6", "d5"),
    ]


def test_span_holds_the_relevant_document(tokenizer):
    relevant = document_text("Zebra", "zebra stripes confuse biting flies.")
    for position in (0, 0.25, 0.5, 0.75, 1.0):
        text, start, end = haystack(make(tokenizer).variant(LENGTH, position))
        assert text[start:end] == relevant
    row = make(tokenizer).variant(LENGTH, 0.5).corpus.set_index("doc_id").loc["d1"]
    assert row["title"] == ""


def test_span_at_the_very_start_and_end(tokenizer):
    maker = make(tokenizer)
    text, start, end = haystack(maker.variant(LENGTH, 0))
    assert start == 0 and text[end:].startswith(SEPARATOR)
    text, start, end = haystack(maker.variant(LENGTH, 1.0))
    assert end == len(text) and text[:start].endswith(SEPARATOR)


def test_token_offset_follows_the_position(tokenizer):
    maker = make(tokenizer)
    relevant_tokens = 7  # Zebra zebra stripes confuse biting flies .
    for position in (0, 0.25, 0.5, 0.75, 1.0):
        text, start, _ = haystack(maker.variant(LENGTH, position))
        offset = len(encode(tokenizer, text[:start])["input_ids"])
        assert offset == round(position * (LENGTH - relevant_tokens))


def test_haystack_has_the_target_length(tokenizer):
    for position in (0, 0.5, 1.0):
        variant = make(tokenizer).variant(LENGTH, position)
        for doc_id in ("d1", "d5"):
            text = variant.corpus.set_index("doc_id").loc[doc_id, "text"]
            assert len(encode(tokenizer, text)["input_ids"]) == LENGTH
        assert variant.stats["haystack_tokens"] == {"min": LENGTH, "mean": LENGTH, "max": LENGTH}


def test_haystack_has_the_target_length_when_the_separator_costs_tokens():
    tokenizer = paragraph_tokenizer()
    assert len(encode(tokenizer, SEPARATOR)["input_ids"]) == 2
    maker = make(tokenizer)
    # Fillers of 13 tokens and 2 for each separator: every remainder of the budget.
    for length in range(40, 56):
        variant = maker.variant(length, 0.5)
        texts = variant.corpus.set_index("doc_id").loc[["d1", "d5"], "text"]
        counts = [len(encode(tokenizer, text)["input_ids"]) for text in texts]
        assert counts == [length, length], length
        assert variant.stats["haystack_tokens"]["max"] == length


def test_the_base_datasets_evidence_span_moves_with_the_document(tokenizer):
    # "stripes" in the text of d1, whose title "Zebra" comes first in the haystack.
    qrels = QRELS.assign(
        span_start=pd.array([6, None, None, None, None, None, None], dtype="Int64"),
        span_end=pd.array([13, None, None, None, None, None, None], dtype="Int64"),
    )
    maker = Positionalizer(CORPUS, QUERIES, qrels, tokenizer)
    for position in (0, 0.5, 1.0):
        variant = maker.variant(LENGTH, position)
        text, start, end = haystack(variant)
        assert text[start:end] == "stripes"
        assert variant.stats["evidence_spans"] == 1
        # q6's document has no span of its own: its span is the whole inserted text.
        text, start, end = haystack(variant, "q6")
        assert text[start:end] == "okapi forest"


def test_fillers_are_the_same_at_every_position(tokenizer):
    maker = make(tokenizer)
    fillers = {fillers_of(*haystack(maker.variant(LENGTH, p))) for p in (0, 0.25, 0.5, 1.0)}
    assert len(fillers) == 1
    # And a fresh run with the same seed builds the same variant.
    again, first = make(tokenizer).variant(LENGTH, 0.25), maker.variant(LENGTH, 0.25)
    pd.testing.assert_frame_equal(again.corpus, first.corpus)
    pd.testing.assert_frame_equal(again.qrels, first.qrels)
    assert fillers_of(*haystack(make(tokenizer, seed=1).variant(LENGTH, 0))) != fillers.pop()


def test_no_relevant_document_is_a_filler(tokenizer):
    judged_relevant = CORPUS[CORPUS["doc_id"].isin(QRELS.loc[QRELS["relevance"] > 0, "doc_id"])]
    for fillers in ("random", "bm25"):
        variant = make(tokenizer, fillers).variant(LENGTH, 0.5)
        for query_id in ("q1", "q6"):
            rest = fillers_of(*haystack(variant, query_id))
            for text in judged_relevant["text"]:
                assert text.split()[0] not in rest.split()


def test_everything_else_is_untouched(tokenizer):
    variant = make(tokenizer, "bm25").variant(LENGTH, 0.75)
    others = ~CORPUS["doc_id"].isin(["d1", "d5"])
    pd.testing.assert_frame_equal(
        variant.corpus[others.to_numpy()].reset_index(drop=True),
        CORPUS[others].reset_index(drop=True),
    )
    assert variant.corpus["doc_id"].tolist() == CORPUS["doc_id"].tolist()
    kept = QUERIES[QUERIES["query_id"].isin(["q1", "q6"])]
    pd.testing.assert_frame_equal(variant.queries, kept)


def test_bm25_fillers_are_near_misses(tokenizer):
    maker = make(tokenizer, "bm25")
    order = maker.filler_order("d1")
    first = {maker.filler_texts[next(order)] for _ in range(3)}
    assert first == {doc["text"] for doc in NEAR_MISSES}  # they share "penguin" with q1
    text, start, _ = haystack(maker.variant(LENGTH, 1.0))
    assert text.startswith("Penguins of colony")


def test_positionalize_iterates_lengths_and_positions(tokenizer):
    variants = list(positionalize(CORPUS, QUERIES, QRELS, tokenizer, [20, 40], [0, 1.0]))
    assert [(v.length, v.position) for v in variants] == [(20, 0), (20, 1.0), (40, 0), (40, 1.0)]
    # A longer variant's fillers extend a shorter one's.
    short = fillers_of(*haystack(variants[0]))
    assert fillers_of(*haystack(variants[2])).startswith(short)


def test_checksum_follows_base_settings_and_tokenizer(tokenizer):
    settings = {"length": 512, "position": 0.5, "fillers": "random", "seed": 0}
    fingerprint = tokenizer_fingerprint(tokenizer)
    checksum = variant_checksum("abc", settings, fingerprint)
    assert checksum == variant_checksum("abc", dict(reversed(settings.items())), fingerprint)
    assert checksum != variant_checksum("abd", settings, fingerprint)
    assert checksum != variant_checksum("abc", settings | {"position": 0.25}, fingerprint)
    assert checksum != variant_checksum("abc", settings, "0" * 64)


def test_scifact_at_1024_tokens(shared_datasets, minilm_path, tmp_path):
    from irflow.data.ingest import ingest
    from irflow.encoding.models import load_tokenizer

    folder = shared_datasets / "scifact"
    ingest(
        folder / "corpus.jsonl.gz", folder / "queries.jsonl", folder / "qrels/test.tsv", tmp_path
    )
    corpus, queries, qrels = (
        pd.read_parquet(tmp_path / f"{name}.parquet") for name in ("corpus", "queries", "qrels")
    )
    tokenizer = load_tokenizer({"id": str(minilm_path), "revision": None})
    variant = Positionalizer(corpus, queries, qrels, tokenizer, "bm25", bm25=DEFAULT_BM25).variant(
        1024, 0.5
    )

    assert variant.stats["queries_kept"] == 275
    assert variant.stats["queries_skipped"] == {
        "no_relevant": 0,
        "relevant_document_missing": 0,
        "several_relevant": 23,
        "too_long": 2,
        "unjudged": 809,
    }
    assert variant.stats["haystacks"] == 227
    assert len(variant.corpus) == len(corpus) == 5183
    assert len(variant.queries) == 275
    original = corpus.set_index("doc_id")
    haystacks = variant.corpus.set_index("doc_id")
    target = variant.qrels[variant.qrels["relevance"] > 0]
    for doc_id, start, end in zip(target["doc_id"], target["span_start"], target["span_end"]):
        text = haystacks.loc[doc_id, "text"]
        relevant = document_text(original.loc[doc_id, "title"], original.loc[doc_id, "text"])
        assert text[start:end] == relevant
        tokens = len(encode(tokenizer, text)["input_ids"])
        assert 1024 - 16 <= tokens <= 1024


# --- screening fillers with a reranker --------------------------------------------------------

# An unjudged exact copy of d1, the near-miss BM25 ranks first for q1.
COPY = {"doc_id": "copy", "title": "Zebra", "text": "zebra stripes confuse biting flies."}
SCREEN_CORPUS = pd.DataFrame(FILLERS + NEAR_MISSES + [COPY] + RELEVANT)
SCREEN_LENGTH = 120  # about eight fillers: more than the near-misses, less than a batch


@pytest.fixture(scope="module")
def cross_scorer(tmp_path_factory, minilm_path):
    from irflow.retrieval.rerank import CrossEncoderScorer

    # Scores a few logits apart, where the default initialisation gives them within 1e-4.
    folder = build_tiny_cross_encoder(
        tmp_path_factory.mktemp("tiny-ce"), minilm_path, initializer_range=0.5
    )
    spec = {"type": "cross-encoder", "id": str(folder), "revision": None, "batch_size": 4}
    return CrossEncoderScorer.load(spec | {"dtype": "float32", "device": "cpu"})


def screened_by(maker, scorer, doc_id, query, margin) -> tuple[list[int], np.ndarray]:
    """The first 64 candidates and whether ``query`` screens each: the candidates scored in one
    call, the relevant text alone."""
    candidates = list(itertools.islice(maker._candidates(doc_id), 64))
    relevant = scorer.score(query, [maker.relevant_texts[doc_id]])[0]
    gaps = scorer.score(query, [maker.filler_texts[i] for i in candidates]) - (relevant - margin)
    # Far enough from the limit for float noise (about 1e-6 between batches) not to decide.
    assert np.abs(gaps).min() > 1e-4
    return candidates, gaps >= 0


def expected_screen(maker, scorer, doc_id, queries, margin, taken):
    """The candidates, in order, up to the ``taken``-th one kept, split into kept and screened
    (by any of ``queries``)."""
    masks = [screened_by(maker, scorer, doc_id, query, margin) for query in queries]
    candidates, skip = masks[0][0], np.logical_or.reduce([mask for _, mask in masks])
    kept, screened = [], []
    for index, skipped in zip(candidates, skip):
        if len(kept) == taken:
            return kept, screened
        (screened if skipped else kept).append(index)
    raise AssertionError("fewer than 64 candidates are enough in this corpus")


def screen_margin(maker, scorer, doc_id, query) -> float:
    """A margin halfway between two of the candidates' gaps below the relevant score, so that
    some are screened and some kept, whatever the random weights."""
    relevant = scorer.score(query, [maker.relevant_texts[doc_id]])[0]
    candidates = list(itertools.islice(maker._candidates(doc_id), SCREEN_BATCH))
    scores = scorer.score(query, [maker.filler_texts[i] for i in candidates])
    below = np.sort(np.unique(np.round(relevant - scores[scores < relevant - 1e-3], 3)))
    assert len(below) >= 2, below
    middle = len(below) // 2
    return float((below[middle - 1] + below[middle]) / 2)


def test_screen_skips_exactly_the_fillers_the_reranker_scores_near_the_relevant_text(
    tokenizer, cross_scorer
):
    # d5 is the one relevant document of two queries: a filler goes if either screens it.
    queries = pd.concat([QUERIES, pd.DataFrame({"query_id": ["q7"], "text": ["shy mammal"]})])
    qrels = pd.concat([QRELS, QRELS[QRELS["query_id"] == "q6"].assign(query_id="q7")])
    plain = Positionalizer(SCREEN_CORPUS, queries, qrels, tokenizer, "bm25", bm25=DEFAULT_BM25)
    margin = screen_margin(plain, cross_scorer, "d1", "where do penguins and zebras live")
    maker = Positionalizer(
        SCREEN_CORPUS,
        queries,
        qrels,
        tokenizer,
        "bm25",
        bm25=DEFAULT_BM25,
        screen=Screen(cross_scorer, margin),
    )
    variant = maker.variant(SCREEN_LENGTH, 0.5)
    streams = maker.streams(SCREEN_LENGTH)
    by_doc = {
        "d1": ["where do penguins and zebras live"],
        "d4": ["giraffe necks"],
        "d5": ["okapi", "shy mammal"],
    }
    assert sorted(streams) == sorted(by_doc)
    for doc_id, texts in by_doc.items():
        stream = streams[doc_id]
        taken = stream.text.count(SEPARATOR) + 1
        kept, screened = expected_screen(maker, cross_scorer, doc_id, texts, margin, taken)
        assert stream.screened == screened
        assert stream.text == SEPARATOR.join(maker.filler_texts[i] for i in kept)
    assert streams["d1"].screened  # the margin splits the candidates
    # Either of d5's queries screens a filler the other keeps.
    (_, first), (_, second) = (
        screened_by(maker, cross_scorer, "d5", text, margin) for text in by_doc["d5"]
    )
    assert (first & ~second).any() and (second & ~first).any()
    # The exact copy scores exactly as the relevant text: screened at any margin.
    copy = maker.filler_texts.index(document_text("Zebra", COPY["text"]))
    assert copy in streams["d1"].screened
    assert variant.stats["screened_fillers"] == sum(len(s.screened) for s in streams.values())
    assert variant.stats["screened_haystacks"] == sum(bool(s.screened) for s in streams.values())


def test_screened_fillers_are_the_same_at_every_length(tokenizer, cross_scorer):
    screen = Screen(cross_scorer, 0.0)
    variants = list(
        positionalize(
            SCREEN_CORPUS,
            QUERIES,
            QRELS,
            tokenizer,
            [40, SCREEN_LENGTH],
            [0],
            fillers="bm25",
            seed=0,
            screen=screen,
            bm25=DEFAULT_BM25,
        )
    )
    short, long = (fillers_of(*haystack(v)) for v in variants)
    assert long.startswith(short)
    assert "Zebra" not in short + long  # the copy never goes in


def test_a_screen_that_skips_every_candidate_leaves_the_haystacks_short(tokenizer, cross_scorer):
    maker = Positionalizer(
        SCREEN_CORPUS,
        QUERIES,
        QRELS,
        tokenizer,
        "bm25",
        bm25=DEFAULT_BM25,
        screen=Screen(cross_scorer, 1e9),
    )
    variant = maker.variant(LENGTH, 0.5)
    assert variant.stats["underfilled_haystacks"] == variant.stats["haystacks"] == 2
    assert variant.stats["screened_fillers"] == 2 * len(maker.filler_texts)
    text, start, end = haystack(variant)
    assert (start, end) == (0, len(text))  # the relevant text alone


def test_unscreened_bm25_fillers_are_flagged_in_the_log(tokenizer, caplog):
    with caplog.at_level("WARNING", logger="irflow.derived.positionalize"):
        stats = make(tokenizer, "bm25").variant(LENGTH, 0.5).stats
    assert "may be unjudged relevant documents" in caplog.text
    assert "screened_fillers" not in stats
    caplog.clear()
    with caplog.at_level("WARNING", logger="irflow.derived.positionalize"):
        make(tokenizer, "random").variant(LENGTH, 0.5)
    assert "unjudged" not in caplog.text


def screen_config(screen: dict | None, rerankers: dict) -> dict:
    block = {"dataset": "scifact", "tokenizer": "minilm", "lengths": [512], "positions": [0]}
    config = minimal_config(
        "scifact",
        models={"minilm": {"id": "some/minilm"}},
        rerankers=rerankers,
        positionalize={"near": block | ({"screen": screen} if screen else {})},
    )
    return validate_config(config, SCHEMA)


def test_list_variants_carries_the_screen_and_its_reranker():
    rerankers = {
        "ce": {"type": "cross-encoder", "id": "some/ce"},
        "bi": {"type": "bi-encoder", "model": "minilm"},
        "colbert": {"type": "late-interaction", "model": "minilm"},
    }
    spec = list_variants(screen_config({"reranker": "ce"}, rerankers))["near@L512@p0"]
    assert spec["screen"]["reranker"] == "ce" and spec["screen"]["margin"] == 0
    assert spec["screen"]["spec"]["id"] == "some/ce" and "model" not in spec["screen"]
    spec = list_variants(screen_config({"reranker": "bi", "margin": 0.5}, rerankers))
    screen = spec["near@L512@p0"]["screen"]
    assert screen["margin"] == 0.5 and screen["model"]["id"] == "some/minilm"
    assert "screen" not in list_variants(screen_config(None, rerankers))["near@L512@p0"]
    for name in ("colbert", "missing"):
        with pytest.raises(
            ConfigError, match="positionalize.near.screen.reranker.*allowed values: bi, ce"
        ):
            list_variants(screen_config({"reranker": name}, rerankers))


def test_only_a_screened_variant_takes_the_reranker_as_input(
    shared_datasets, minilm_path, tmp_path
):
    """Snakemake's dry run: the screened block's jobs read the cross-encoder's files; the
    plain block's read what they read before screening existed."""
    cross_encoder = tmp_path / "ce"
    cross_encoder.mkdir()
    (cross_encoder / "model.safetensors").write_text("weights")
    block = {"dataset": "scifact", "tokenizer": str(minilm_path), "lengths": [512]}
    config = official_scifact_config(shared_datasets) | {
        "rerankers": {"ce": {"type": "cross-encoder", "id": str(cross_encoder)}},
        "positionalize": {
            "plain": block | {"positions": [0], "fillers": "bm25"},
            "screened": block | {"positions": [0], "fillers": "bm25", "screen": {"reranker": "ce"}},
        },
    }
    targets = [f"results/datasets/{n}@L512@p0/corpus.parquet" for n in ("plain", "screened")]
    inputs = {
        wildcards["dataset"]: set(files)
        for rule, wildcards, files in planned_inputs(tmp_path, config, *targets)
        if rule == "positionalize"
    }
    model = str(cross_encoder / "model.safetensors")
    assert inputs["screened@L512@p0"] - inputs["plain@L512@p0"] == {model}
    assert model not in inputs["plain@L512@p0"]
    assert any(path.endswith("tokenizer.json") for path in inputs["plain@L512@p0"])


def test_bm25_is_built_in_one_place():
    """positionalize's near-misses and the index job build bm25s' BM25 and its stemmer with
    irflow.retrieval.bm25's builders (bm25_model, stemmer_of), from its one list of the
    settings: no other module builds either."""
    builders = ("bm25s.BM25(", "Stemmer.Stemmer(")
    building = sorted(
        path.relative_to(REPO).as_posix()
        for path in (REPO / "src").rglob("*.py")
        if any(builder in path.read_text(encoding="utf-8") for builder in builders)
    )
    assert building == ["src/irflow/retrieval/bm25.py"]


def test_the_near_miss_bm25_is_typed_once_where_the_positionalizer_receives_it(tokenizer):
    """Positionalizer types its ``bm25`` entry once (irflow.core.settings_types.Bm25): the
    schema's defaults fill what it leaves out, and a value the schema refuses is refused, named,
    before any filler is ranked (on main: a KeyError at the first near-miss, and a k1 of -1
    ranked with)."""
    bare = Positionalizer(CORPUS, QUERIES, QRELS, tokenizer, "bm25", bm25={"type": "bm25"})
    assert bare.near_misses() == make(tokenizer, "bm25").near_misses()
    with pytest.raises(ValidationError, match="k1"):
        Positionalizer(CORPUS, QUERIES, QRELS, tokenizer, "bm25", bm25=DEFAULT_BM25 | {"k1": -1})


def test_near_misses_are_ranked_by_the_schemas_default_bm25(tokenizer):
    """The BM25 that ranks bm25 fillers is the schema's default bm25 retriever, and its
    settings are the ones used: without stopwords, "the" and "on" make a near-miss."""
    default = SCHEMA["$defs"]["bm25"]["properties"]
    assert DEFAULT_BM25 == {"type": "bm25"} | {
        key: default[key]["default"] for key in default if key != "type"
    }
    assert (
        DEFAULT_BM25
        == validate_config(
            minimal_config(retrievers={"r": {"type": "bm25"}}),
            SCHEMA,
        )["retrievers"]["r"]
    )
    # q1 ("where do penguins and zebras live") shares "penguins" with the near-misses only.
    assert sorted(make(tokenizer, "bm25").near_misses()["d1"]) == [40, 41, 42]
    # A filler that shares only a stopword ("and") with q1 is a near-miss only when
    # the settings keep the stopwords.
    stop_only = pd.DataFrame([{"doc_id": "s", "title": "", "text": "rivers and lakes"}])
    corpus = pd.concat([CORPUS, stop_only], ignore_index=True)
    plain = DEFAULT_BM25 | {"stopwords": None, "stemmer": None}
    with_stopwords = Positionalizer(corpus, QUERIES, QRELS, tokenizer, "bm25", bm25=DEFAULT_BM25)
    without = Positionalizer(corpus, QUERIES, QRELS, tokenizer, "bm25", bm25=plain)
    stop_index = with_stopwords.filler_texts.index("rivers and lakes")
    assert stop_index not in with_stopwords.near_misses()["d1"]
    assert stop_index in without.near_misses()["d1"]
