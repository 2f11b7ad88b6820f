"""Late interaction: token vectors (resumable, as dense ones) and exact MaxSim, first stage and
reranker, on a tiny ColBERT built here; scores checked against MaxSim computed by hand from the
library's own token vectors. The Voyager index against the exact search, its candidates against
brute-force nearest tokens, and its config."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import REPO, SCHEMA, minilm_spec
from pydantic import ValidationError
from test_sparse import (
    QUERIES,
    TEXTS,
    assert_a_swap_changes_the_run,
    encode_and_search,
    refuse_to_write,
    write_tables,
)
from tiny_models import (
    COLBERT_DOCUMENT_LENGTH,
    COLBERT_DOCUMENT_MARKER,
    COLBERT_QUERY_LENGTH,
    COLBERT_QUERY_MARKER,
    build_tiny_colbert,
)

from irflow.core.errors import ConfigError
from irflow.core.records import check
from irflow.encoding.embed import cache_key
from irflow.encoding.encode_parts import encode_file, gather
from irflow.encoding.models import RESULT_SETTINGS, result_settings
from irflow.retrieval import late_interaction, maxsim_rerank
from irflow.retrieval.late_interaction import (
    TokenEncoder,
    TokenVectors,
    late_interaction_search,
    tokens_table,
)
from irflow.retrieval.maxsim_rerank import MaxSimScorer, candidate_batches
from irflow.retrieval.rerank import rerank
from irflow.retrieval.runs import SearchRequest
from irflow.workflow import resources
from irflow.workflow.config import validate_config
from irflow.workflow.families import family

# The lengths the provenance records.
LENGTHS = ("query_length", "queries_padded_to", "document_length")


@pytest.fixture(scope="module")
def colbert(tmp_path_factory, minilm_path):
    return build_tiny_colbert(tmp_path_factory.mktemp("colbert"), minilm_path)


def colbert_spec(folder, **lengths) -> dict:
    """A ``models`` entry for the tiny ColBERT with the checkpoint's lengths, or ``lengths``."""
    spec = minilm_spec(folder, batch_size=4, chunk_size=3, max_seq_length=None)
    return spec | {"query_length": None, "document_length": None} | lengths


@pytest.fixture(scope="module")
def encoder(colbert) -> TokenEncoder:
    return TokenEncoder.load(colbert_spec(colbert))


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


def colbert_by_hand(
    model,
    text: str,
    side: str,
    query_length: int = COLBERT_QUERY_LENGTH,
    document_length: int = COLBERT_DOCUMENT_LENGTH,
) -> np.ndarray:
    """ColBERT's encoders (Khattab & Zaharia 2020, §3.2) from the tiny model's layers: "we
    prepend a special token [Q] to the input query ... If the query has fewer than a
    pre-defined number of tokens Nq, we pad it with BERT's special [mask] tokens up to length
    Nq (otherwise, we truncate it to the first Nq tokens)"; for documents "a special token
    [D]", and "the document encoder filters out the embeddings corresponding to punctuation
    symbols". The [mask] pads are not attended to (ColBERTv2, PyLate's default), yet scored."""
    import string

    import torch

    transformer, projection = model[0], model[1]
    tokenizer = transformer.tokenizer
    marker, length = {
        "queries": (COLBERT_QUERY_MARKER, query_length),
        "corpus": (COLBERT_DOCUMENT_MARKER, document_length),
    }[side]
    ids = tokenizer(f"{marker} {text}")["input_ids"]
    if len(ids) > length:
        ids = ids[: length - 1] + [tokenizer.sep_token_id]
    attended = [1] * len(ids)
    if side == "queries":
        pads = length - len(ids)
        ids, attended = ids + [tokenizer.mask_token_id] * pads, attended + [0] * pads
    with torch.no_grad():
        hidden = transformer.auto_model(
            input_ids=torch.tensor([ids]), attention_mask=torch.tensor([attended])
        ).last_hidden_state[0]
        vectors = torch.nn.functional.normalize(projection.linear(hidden), dim=-1).numpy()
    if side == "queries":
        return vectors
    punctuation = set(tokenizer.convert_tokens_to_ids(list(string.punctuation)))
    return vectors[[token not in punctuation for token in ids]]


def test_token_vectors_are_colberts_query_and_document_encoders(encoder, vectors):
    """Each side as ColBERT encodes it, computed here without the library's encode calls:
    every query 32 [MASK]-padded tokens, documents without their punctuation."""
    for path, texts, side in ((vectors[0], TEXTS, "corpus"), (vectors[1], QUERIES, "queries")):
        stored = TokenVectors.read(path)
        for row, text in enumerate(texts):
            mine = stored.rows(row, row + 1)[0].numpy()
            expected = colbert_by_hand(encoder.model, text, side)
            np.testing.assert_allclose(mine, expected, rtol=1e-4, atol=1e-5)
    assert all(len(vectors) == COLBERT_QUERY_LENGTH for vectors in stored.select(range(3)))


def test_configured_lengths_apply_and_the_manifest_records_them(colbert, encoder, tmp_path):
    """query_length and document_length replace the checkpoint's 32 and 180 (ColBERT's Nq and
    doc_maxlen); the provenance records the lengths that apply, not the tokenizer's 512, and
    the texts cut to them are counted: at 6 tokens "[CLS] [unused0] cat on a mat [SEP]" (7) is
    the one query cut; every document is (4 words or more, 7 tokens or more)."""
    assert {key: encoder.provenance[key] for key in LENGTHS} == {
        "query_length": 32,
        "queries_padded_to": 32,
        "document_length": 180,
    }
    assert "max_seq_length" not in encoder.provenance
    short = TokenEncoder.load(colbert_spec(colbert, query_length=6, document_length=6))
    assert {key: short.provenance[key] for key in LENGTHS} == {
        "query_length": 6,
        "queries_padded_to": 6,
        "document_length": 6,
    }
    corpus, queries = write_tables(tmp_path)
    for model, truncated in (
        (encoder, {"corpus": 0, "queries": 0}),
        (short, {"corpus": 7, "queries": 1}),
    ):
        for path, side in ((corpus, "corpus"), (queries, "queries")):
            assert model.truncation(path, side) == {"texts_truncated": truncated[side]}
    # A shard counts its own rows: every document is cut at 6 tokens.
    shards = [short.truncation(corpus, "corpus", (shard, 3)) for shard in range(3)]
    assert shards == [{"texts_truncated": n} for n in (2, 2, 3)]
    encode_file(short, corpus, "corpus", tmp_path / "docs.parquet")
    encode_file(short, queries, "queries", tmp_path / "qv.parquet")
    for path, texts, side in (
        (tmp_path / "docs.parquet", TEXTS, "corpus"),
        (tmp_path / "qv.parquet", QUERIES, "queries"),
    ):
        stored = TokenVectors.read(path)
        for row, text in enumerate(texts):
            expected = colbert_by_hand(short.model, text, side, 6, 6)
            np.testing.assert_allclose(
                stored.rows(row, row + 1)[0].numpy(), expected, rtol=1e-4, atol=1e-5
            )


def test_gathered_shards_keep_the_lengths_and_sum_the_texts_cut(colbert, tmp_path):
    """A sharded corpus's gathered manifest records what each shard's does: the lengths that
    applied, and the texts cut to them (at 6 tokens 2 + 2 + 3 documents: all 7)."""
    short = TokenEncoder.load(colbert_spec(colbert, query_length=6, document_length=6))
    corpus, _ = write_tables(tmp_path)
    shards, manifests = [], []
    for shard in range(3):  # as scripts/vectors_encode.py writes a shard's manifest
        path = tmp_path / f"{shard}-of-3.parquet"
        facts = encode_file(short, corpus, "corpus", path, (shard, 3))
        facts |= short.truncation(corpus, "corpus", (shard, 3))
        manifests.append(short.provenance | facts | {"shard": shard, "model": "tiny"})
        shards.append(path)
    facts = gather(shards, manifests, corpus, tmp_path / "gathered.parquet")
    assert facts["texts_truncated"] == 7 == sum(m["texts_truncated"] for m in manifests)
    assert {key: facts[key] for key in LENGTHS} == {key: short.provenance[key] for key in LENGTHS}


def test_a_length_beyond_the_model_is_refused(colbert):
    with pytest.raises(ConfigError, match=r"document_length 600 .* 512 tokens"):
        TokenEncoder.load(colbert_spec(colbert, document_length=600))


def test_encoding_either_side_as_the_other_changes_the_run(encoder, tmp_path, monkeypatch):
    assert_a_swap_changes_the_run(encoder, late_interaction_search, tmp_path, monkeypatch)


def rotated_first_stage(queries: dict, documents: dict) -> pd.DataFrame:
    """Query i ranks the documents from d<i> on first, so the queries' top 5 differ."""
    ids = list(documents)
    return pd.DataFrame(
        [
            (query_id, ids[(i + rank) % len(ids)], float(-rank))
            for i, query_id in enumerate(queries)
            for rank in range(len(ids))
        ],
        columns=["query_id", "doc_id", "score"],
    )


def test_reranker_holds_one_batch_of_candidates_and_scores_as_all_at_once(encoder, monkeypatch):
    """With room for 6 documents, q0 (d0-d4) and q1 (d1-d5) share a batch of 6 and q2 (d2-d6)
    takes another, which keeps d2-d5 and encodes d6: at most 6 held, and the scores of every
    candidate held at once, to float32 rounding (a document encoded beside others padded to
    another width differs there). The timed query's candidates are encoded before its clock."""
    documents = {f"d{i}": text for i, text in enumerate(TEXTS)}
    queries = {f"q{i}": text for i, text in enumerate(QUERIES)}
    run = rotated_first_stage(queries, documents)
    whole, _ = rerank(run, queries, documents, MaxSimScorer(encoder), 5)
    streamed = MaxSimScorer(encoder)
    assert streamed.documents_per_batch > len(TEXTS)  # so ``whole`` held every candidate
    document_bytes = COLBERT_DOCUMENT_LENGTH * 128 * 4
    monkeypatch.setattr(maxsim_rerank, "MAX_HELD_TOKEN_BYTES", 6 * document_bytes + 1)
    assert streamed.documents_per_batch == 6
    batched, latency = rerank(run, queries, documents, streamed, 5, 1)
    pd.testing.assert_frame_equal(batched, whole, check_exact=False, rtol=1e-6, atol=0)
    counts = streamed.provenance
    assert counts["documents_held_peak"] == 6
    assert (counts["documents_distinct"], counts["documents_encoded"]) == (7, 7 + 5)
    assert (counts["documents_truncated"], counts["queries_truncated"]) == (0, 0)
    assert list(latency) == ["q0"] and streamed.vectors.keys() == set(TEXTS[:5])


def test_candidate_batches_are_bounded_by_distinct_candidates():
    candidates = [["a", "b"], ["b", "c"], ["d", "e", "f", "g"], ["a"], []]
    assert candidate_batches(candidates, 3) == [(0, 2), (2, 3), (3, 5)]
    assert candidate_batches(candidates, 100) == [(0, 5)]
    assert candidate_batches([], 3) == []


def test_rerank_memory_counts_the_candidates_texts_and_one_batch_of_token_vectors(
    tmp_path, monkeypatch
):
    """3 queries x k 2 candidates of 7 documents: 6/7 of the corpus's text, three copies; a
    ColBERT model adds the 1 GiB batch of token vectors it holds, a cross-encoder does not."""
    corpus, queries = write_tables(tmp_path)
    monkeypatch.setattr(resources, "text_mb", lambda path: 700.0)
    late = {"reranker": {"type": "late-interaction", "model": "colbert"}, "k": 2}
    texts_mib = resources.RERANK_MIB_PER_TEXT_MB * 700 * 6 / 7
    assert resources.rerank_mb(corpus, queries, late) == resources.request_mb(
        resources.EMBED_MIB + texts_mib + 1024
    )
    cross = {"reranker": {"type": "cross-encoder"}, "k": 100}  # every document a candidate
    assert resources.rerank_mb(corpus, queries, cross, 2) == resources.request_mb(
        resources.EMBED_MIB + resources.RERANK_MIB_PER_TEXT_MB * 700, 2
    )
    assert "memory.rerank_mb(" in (REPO / "rules" / "rerank.smk").read_text()


# PyLate's Voyager defaults, as the schema fills them in.
VOYAGER = {
    "type": "voyager",
    "M": 64,
    "ef_construction": 200,
    "ef_search": 200,
    "k_token": 100,
    "seed": 1,
    "build_threads": 1,
    "recall_queries": 100,
    "recall_seed": 0,
    "target_recall": 0.99,
}


@pytest.fixture(scope="module")
def vectors(encoder, tmp_path_factory):
    """The tiny ColBERT's token vectors of ``TEXTS`` and ``QUERIES``: (documents, queries)."""
    folder = tmp_path_factory.mktemp("vectors")
    corpus, queries = write_tables(folder)
    encode_file(encoder, corpus, "corpus", folder / "docs.parquet")
    encode_file(encoder, queries, "queries", folder / "qv.parquet")
    return folder / "docs.parquet", folder / "qv.parquet"


def test_voyager_with_every_token_as_candidate_is_the_exact_run(vectors):
    exact, _ = late_interaction_search(*vectors, 4, False, 2, 3)
    run, timing = late_interaction_search(*vectors, 4, False, 2, 3, index=VOYAGER)
    # The same documents in the same order; MaxSim equal to float32 rounding (the sum's
    # order follows the matrices' shapes and the BLAS threads: it differed by 1e-7 under CI).
    pd.testing.assert_frame_equal(run, exact, check_exact=False, rtol=1e-6, atol=0)
    documents = TokenVectors.read(vectors[0])
    tokens = len(documents.flat)
    assert tokens < VOYAGER["k_token"]  # so k_token is capped at every token
    voyager = timing["voyager"]
    assert voyager["k_token"] == tokens and voyager["ef_search"] == 200
    assert voyager["candidates_per_query"] == {f"q{i}": len(TEXTS) for i in range(len(QUERIES))}
    assert timing["recall"]["recall"] == 1.0 and len(timing["recall"]["tried"]) == 1
    graph = late_interaction.VoyagerIndex.build(documents, VOYAGER)
    assert timing["index_bytes"] == len(graph.index.as_bytes()) + 4 * tokens
    assert timing["token_vectors_bytes"] == documents.nbytes
    check({"stage": "retrieve", "settings": {}, "device": "cpu", "rows": len(run)} | timing)
    assert timing["index_seconds"] >= voyager["build_seconds"] > 0


def test_a_voyager_index_that_names_only_its_type_searches_with_the_schemas_defaults(vectors):
    """late_interaction_search types the retriever's index (the config's dict): the schema's
    settings (PyLate's, VOYAGER) apply where the block names none, where a dict's lookup of
    recall_queries failed; a key the schema lacks is refused, named."""
    run, timing = late_interaction_search(*vectors, 4, False, 2, 3, index={"type": "voyager"})
    given, given_timing = late_interaction_search(*vectors, 4, False, 2, 3, index=VOYAGER)
    pd.testing.assert_frame_equal(run, given)
    assert timing["recall"]["queries"] == given_timing["recall"]["queries"] == len(QUERIES)
    with pytest.raises(ValidationError, match="k_tokn"):
        late_interaction_search(*vectors, 4, False, 2, 3, index={"type": "voyager", "k_tokn": 1})


def first_tokens(vectors: tuple, tokens: int, folder) -> tuple:
    """``vectors`` with each query cut to its first ``tokens`` tokens, so that their nearest
    document tokens miss some documents."""
    full = TokenVectors.read(vectors[1])
    short = [query[:tokens].numpy() for query in full.rows(0, len(full))]
    pq.write_table(tokens_table(full.ids.to_pylist(), short), folder / "short.parquet")
    return vectors[0], folder / "short.parquet"


def overlap(run: pd.DataFrame, exact: pd.DataFrame, queries: list[str]) -> float:
    """The share of the exact run's (query, document) pairs for ``queries`` that ``run`` holds
    (faiss' intersection measure), counted here again."""
    exact = exact[exact.query_id.isin(queries)]
    pairs = set(zip(run.query_id, run.doc_id))
    return sum(pair in pairs for pair in zip(exact.query_id, exact.doc_id)) / len(exact)


def test_voyager_with_one_token_per_query_token_finds_a_subset(vectors, tmp_path, caplog):
    """top_k 1 and k_token 1, as given (no target_recall): each query token's nearest document
    token names a candidate; the manifest's recall is the share of the exact top 1 among the
    run's, counted here again, and the log warns that it is below 0.95."""
    spec = VOYAGER | {"k_token": 1, "target_recall": None}
    vectors = first_tokens(vectors, 4, tmp_path)
    exact, _ = late_interaction_search(*vectors, 1, False, 2, 3)
    run, timing = late_interaction_search(*vectors, 1, False, 2, 3, index=spec)
    documents, queries = (TokenVectors.read(path) for path in vectors)
    graph = late_interaction.VoyagerIndex.build(documents, spec)
    candidates = graph.candidates(queries, 1)
    voyager = timing["voyager"]
    assert voyager["candidates_per_query"] == {
        f"q{i}": len(rows) for i, rows in enumerate(candidates)
    }
    assert any(len(rows) < len(TEXTS) for rows in candidates)
    # The nearest document token of each query token, by brute force.
    for q, rows in enumerate(candidates):
        mine = queries.flat[queries.offsets[q] : queries.offsets[q + 1]]
        nearest = (mine @ documents.flat.T).argmax(axis=1)
        owners = np.searchsorted(documents.offsets, nearest, side="right") - 1
        assert set(rows) == set(owners)
    recall = timing["recall"]  # recall_queries 100: every query
    assert recall["recall"] == overlap(run, exact, ["q0", "q1", "q2"]) < 0.95
    assert recall["tried"] == [{"k_token": 1, "ef_search": 200, "recall": recall["recall"]}]
    assert "voyager index: recall@1 against exact search" in caplog.text
    merged = run.merge(exact, on=["query_id", "doc_id"], suffixes=("", "_exact"))
    assert (merged.score == merged.score_exact).all()  # a document found scores as exactly


def test_voyager_recall_is_measured_on_a_seeded_sample_of_queries(vectors, tmp_path):
    """As a faiss index's: ``recall_queries`` queries drawn with ``recall_seed``, not the first
    latency queries, and the manifest's recall block (and so the cost table's columns)."""
    spec = VOYAGER | {"k_token": 1, "target_recall": None, "recall_queries": 2, "recall_seed": 3}
    vectors = first_tokens(vectors, 4, tmp_path)
    exact, _ = late_interaction_search(*vectors, 1, False, 2, 0)
    run, timing = late_interaction_search(*vectors, 1, False, 2, 0, index=spec)
    drawn = [f"q{i}" for i in np.sort(np.random.default_rng(3).choice(3, 2, replace=False))]
    recall = timing["recall"]
    assert (recall["queries"], recall["seed"], recall["top_k"]) == (2, 3, 1)
    assert recall["recall"] == overlap(run, exact, drawn)
    assert recall["settings"] == {"k_token": 1, "ef_search": 200}
    assert (recall["target_recall"], recall["warning_below"]) == (None, 0.95)
    assert (
        late_interaction_search(*vectors, 1, False, 2, 0, index=spec | {"recall_queries": 0})[1][
            "recall"
        ]
        is None
    )  # not measured


@pytest.mark.parametrize(
    ("query_tokens", "top_k", "tried"),
    [
        # Two query tokens at top_k 3: ef limits (the sparse graph finds too few of each
        # token's 3 nearest); at ef 6 it finds them.
        (2, 3, [(3, 3), (6, 6)]),
        # Four query tokens at top_k 1: k_token limits (at k_token 1 no ef finds the exact top
        # 1's tokens: measured 0.67 up to ef 58, every token); 4 nearest tokens do.
        (4, 1, [(1, 1), (2, 2), (4, 4)]),
    ],
)
def test_voyager_target_recall_doubles_ef_and_k_token_until_it_is_met(
    vectors, tmp_path, query_tokens, top_k, tried
):
    """A sparse graph (M 2, ef_construction 1) searched with ef 1 and k_token 1 misses some of
    the exact top_k; the default target 0.99 doubles ef_search and k_token until the sample's
    recall meets it, and the run is searched with the setting reached."""
    spec = VOYAGER | {"M": 2, "ef_construction": 1, "ef_search": 1, "k_token": 1}
    vectors = first_tokens(vectors, query_tokens, tmp_path)
    exact, _ = late_interaction_search(*vectors, top_k, False, 2, 0)
    run, timing = late_interaction_search(*vectors, top_k, False, 2, 0, index=spec)
    recall = timing["recall"]
    assert [(step["k_token"], step["ef_search"]) for step in recall["tried"]] == tried
    assert recall["tried"][0]["recall"] < 0.99 <= recall["recall"] == recall["tried"][-1]["recall"]
    k_token, ef_search = tried[-1]
    assert recall["settings"] == {"k_token": k_token, "ef_search": ef_search}
    assert (timing["voyager"]["k_token"], timing["voyager"]["ef_search"]) == tried[-1]
    # Every query sampled: the run searched with the setting reached meets the target too.
    assert overlap(run, exact, ["q0", "q1", "q2"]) == recall["recall"]


def test_voyager_k_token_is_raised_to_the_depth_as_pylate_raises_it(vectors):
    """k_token 1 at top_k 4 searches each query token's 4 nearest document tokens (brute force
    here: a graph of 58 tokens at M 64 links every token), and ef is raised to 4."""
    spec = VOYAGER | {"k_token": 1, "ef_search": 2, "target_recall": None}
    _, timing = late_interaction_search(*vectors, 4, False, 2, 1, index=spec)
    voyager = timing["voyager"]
    assert (voyager["k_token"], voyager["ef_search"]) == (4, 4)
    documents, queries = (TokenVectors.read(path) for path in vectors)
    owners = np.repeat(np.arange(len(documents)), np.diff(documents.offsets))
    for q, count in enumerate(voyager["candidates_per_query"].values()):
        mine = queries.flat[queries.offsets[q] : queries.offsets[q + 1]]
        nearest = np.argsort(-(mine @ documents.flat.T), axis=1)[:, :4]
        assert count == len(set(owners[nearest.ravel()]))


def test_a_graph_that_cannot_reach_k_token_tokens_says_which_settings_to_raise(vectors):
    """At M 2 and ef_construction 1 some tokens are unreachable, so asking for every token (the
    58 k_token is capped at) finds fewer, and Voyager's RecallError gets the keys to raise."""
    spec = VOYAGER | {"M": 2, "ef_construction": 1}
    with pytest.raises(RuntimeError, match=r"k_token=58 .* raise the retriever's index.M"):
        late_interaction_search(*vectors, 4, False, 2, 1, index=spec)


def test_voyager_graph_is_the_same_on_every_single_thread_build(vectors):
    documents = TokenVectors.read(vectors[0])
    first = late_interaction.VoyagerIndex.build(documents, VOYAGER).index.as_bytes()
    assert late_interaction.VoyagerIndex.build(documents, VOYAGER).index.as_bytes() == first
    # The seed sets the levels tokens are inserted at, so another seed gives another graph.
    other = late_interaction.VoyagerIndex.build(documents, VOYAGER | {"seed": 2})
    assert other.index.as_bytes() != first


def test_voyager_memory_counts_a_copy_of_the_vectors_and_the_links(vectors, monkeypatch):
    """At M 64 and 128 dimensions the graph is the vectors twice over (129 links a token)."""
    monkeypatch.setattr(resources, "text_mb", lambda path: 1000.0)  # above the minimum request
    exact = resources.vector_search_mb(vectors[0])
    assert resources.vector_search_mb(vectors[0], index={"type": "exact"}) == exact
    voyager = resources.vector_search_mb(vectors[0], index=VOYAGER)
    expected = resources.request_mb(
        resources.VECTOR_SEARCH_BASE_MIB + 1000 * (resources.VECTOR_SEARCH_MIB_PER_MB + 2 + 1 / 128)
    )
    assert voyager == expected > exact


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (
            {"type": "voyager", "k_tokens": 5},
            "config key 'retrievers.colbert.index': Additional properties are not allowed "
            "('k_tokens' was unexpected)",
        ),
        ({"type": "voyager", "M": 1}, "config key 'retrievers.colbert.index.M': 1 is less than"),
        ({"type": "exact", "M": 8}, "config key 'retrievers.colbert.index': Additional prop"),
        (
            {"type": "plaid"},
            "config key 'retrievers.colbert.index.type': 'plaid' is not allowed; allowed "
            "values: 'exact', 'voyager'",
        ),
    ],
)
def test_index_config_errors_name_the_key(index, message):
    with pytest.raises(ConfigError) as error:
        validate_config(colbert_config(index), SCHEMA)
    assert message in str(error.value)


def test_index_defaults_are_exact_and_pylates_voyager():
    config = validate_config(colbert_config(None), SCHEMA)
    assert config["retrievers"]["colbert"]["index"] == {"type": "exact"}
    config = validate_config(colbert_config({"type": "voyager"}), SCHEMA)
    assert config["retrievers"]["colbert"]["index"] == VOYAGER


def colbert_config(index: dict | None) -> dict:
    retriever = {"type": "late-interaction", "model": "colbert"}
    return {
        "datasets": {
            "scifact": {"source": {"type": "url", "url": "https://example.org/scifact.zip"}}
        },
        "models": {"colbert": {"id": "lightonai/colbertv2.0"}},
        "retrievers": {"colbert": retriever | ({"index": index} if index else {})},
    }


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (
            {"colbert": {"id": "lightonai/colbertv2.0", "max_seq_length": 300}},
            "config key 'models.colbert.max_seq_length': a late-interaction model reads "
            "query_length and document_length",
        ),
        (
            {"colbert": {"id": "c"}, "minilm": {"id": "m", "document_length": 300}},
            "config key 'models.minilm.document_length': only late-interaction (ColBERT) "
            "models read it",
        ),
        (
            {"colbert": {"id": "c", "query_length": 0}},
            "config key 'models.colbert.query_length': 0 is less than the minimum of 1",
        ),
    ],
)
def test_length_config_errors_name_the_key(models, message):
    config = colbert_config(None) | {"models": models}
    with pytest.raises(ConfigError) as error:
        validate_config(config, SCHEMA)
    assert message in str(error.value)


def test_lengths_default_to_the_checkpoints():
    model = validate_config(colbert_config(None), SCHEMA)["models"]["colbert"]
    assert (model["query_length"], model["document_length"]) == (None, None)


def test_lengths_key_the_cached_parts_only_when_set(colbert, tmp_path):
    """Parts encoded at other lengths are never resumed from; a model without lengths keeps
    the settings (and so the cache keys and Snakemake params) it had before they existed."""
    corpus, _ = write_tables(tmp_path)
    spec, provenance = colbert_spec(colbert), {"dtype": "float32"}
    assert result_settings(spec) == {key: spec[key] for key in RESULT_SETTINGS}
    keys = {
        cache_key(colbert_spec(colbert, **lengths), provenance, corpus)
        for lengths in ({}, {"document_length": 64}, {"query_length": 16})
    }
    assert len(keys) == 3


def test_its_searcher_encodes_query_texts_as_the_encode_job_and_searches_them(
    encoder, colbert, tmp_path, monkeypatch
):
    """The late-interaction family's searcher, on a query table of texts (another split's):
    the same run as the search of the encode job's query token vectors, searched in memory."""
    stored, _ = encode_and_search(encoder, late_interaction_search, tmp_path)
    # Typed where the search receives it (irflow.core.settings_types.LateInteraction): no
    # index is the schema's default, exact MaxSim.
    retriever = {"type": "late-interaction", "model": "c", "query_batch_size": 2}
    searcher = family("late-interaction").open_searcher(
        {"corpus": tmp_path / "docs.parquet"},
        {"retriever": retriever},
        1,
        models={"c": colbert_spec(colbert)},
    )
    queries = pq.read_table(tmp_path / "queries.parquet")
    # The encoded queries are searched in memory: no file is written for them.
    monkeypatch.setattr(pq, "write_table", refuse_to_write)
    run, _ = searcher.search(queries, SearchRequest(4, False))
    assert run[["query_id", "doc_id", "rank"]].equals(stored[["query_id", "doc_id", "rank"]])
    np.testing.assert_allclose(run.score, stored.score, rtol=1e-6)
