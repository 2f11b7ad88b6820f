"""rerank: the code path with a tiny random cross-encoder, quality with the real MiniLM.

No cross-encoder weights exist offline, so a two-layer BERT with random weights and the MiniLM
tokenizer stands in; it checks plumbing only, never ranking quality.
"""

from __future__ import annotations

import gzip
import json
import logging

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TINY_CORPUS, index_spec, minilm_spec
from pydantic import ValidationError
from tiny_models import build_tiny_cross_encoder

import irflow.retrieval.scorers
from irflow.core import contracts
from irflow.core.fingerprint import folder_md5
from irflow.encoding.embed import embed_file, query_latency
from irflow.encoding.models import Encoder
from irflow.retrieval.index import index_file
from irflow.retrieval.rerank import load_scorer, rerank, top_candidates
from irflow.retrieval.rerankers import reranker_type
from irflow.retrieval.retrieve import dense_search
from irflow.retrieval.scorers import BiEncoderScorer, CrossEncoderScorer, VectorCache

CROSS_SPEC = {
    "type": "cross-encoder",
    "revision": None,
    "max_length": None,
    "batch_size": 4,
    "dtype": "float32",
    "device": "cpu",
}
DOCUMENTS = {d["_id"]: contracts.document_text(d["title"], d["text"]) for d in TINY_CORPUS}
QUERIES = {"q1": "why do cats purr", "q2": "what is the sun"}


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory, minilm_path):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"), minilm_path)


@pytest.fixture(scope="module")
def cross_scorer(tiny_cross_encoder):
    return CrossEncoderScorer.load(CROSS_SPEC | {"id": str(tiny_cross_encoder)})


def first_stage() -> pd.DataFrame:
    """Rows out of order, with a tie at the cut for q1 that trec_eval breaks as d3 > d2."""
    return pd.DataFrame(
        {
            "query_id": ["q2", "q1", "q1", "q1", "q1", "q2", "q2"],
            "doc_id": ["d4", "d1", "d2", "d3", "d4", "d3", "d1"],
            "score": [0.1, 0.9, 0.5, 0.5, 0.2, 0.8, 0.7],
        }
    )


def test_top_candidates_follow_trec_eval_order():
    top = top_candidates(first_stage(), 2)
    assert top[["query_id", "doc_id", "rank"]].values.tolist() == [
        ["q1", "d1", 1],
        ["q1", "d3", 2],
        ["q2", "d3", 1],
        ["q2", "d1", 2],
    ]


def transformers_logits(folder, query: str, documents: list[str]) -> np.ndarray:
    """The model's own logits, computed with transformers alone."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    inputs = tokenizer([query] * len(documents), documents, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**inputs).logits[:, 0].numpy()


def test_cross_encoder_scores_are_the_raw_logits(cross_scorer, tiny_cross_encoder):
    documents = list(DOCUMENTS.values())
    scores = cross_scorer.score("why do cats purr", documents)
    assert scores.shape == (len(documents),)
    assert scores.dtype == np.float64
    np.testing.assert_array_equal(scores, cross_scorer.score("why do cats purr", documents))
    logits = transformers_logits(tiny_cross_encoder, "why do cats purr", documents)
    np.testing.assert_allclose(scores, logits, rtol=1e-5, atol=1e-6)


def test_large_cross_encoder_logits_do_not_saturate_into_ties(tmp_path, tiny_cross_encoder):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    # A logit of about 40 is exactly 1.0 after a float32 sigmoid, whatever the document.
    model = AutoModelForSequenceClassification.from_pretrained(tiny_cross_encoder)
    model.classifier.bias.data.fill_(40.0)
    model.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_cross_encoder).save_pretrained(tmp_path)
    scorer = CrossEncoderScorer.load(CROSS_SPEC | {"id": str(tmp_path)})
    documents = list(DOCUMENTS.values())
    scores = scorer.score("why do cats purr", documents)
    assert len(set(scores.tolist())) == len(documents)
    np.testing.assert_allclose(
        scores, transformers_logits(tmp_path, "why do cats purr", documents), rtol=1e-5
    )


def test_cross_encoder_provenance_and_max_length(cross_scorer, tiny_cross_encoder):
    assert cross_scorer.provenance == {
        "model": str(tiny_cross_encoder),
        "files_md5": folder_md5(tiny_cross_encoder),
        "device": "cpu",
        "dtype": "float32",
        "max_length": cross_scorer.model.max_seq_length,
        "backend": "torch",  # CROSS_SPEC names none: a cross-encoder runs on torch by default
    }
    short = CrossEncoderScorer.load(CROSS_SPEC | {"id": str(tiny_cross_encoder), "max_length": 16})
    assert short.model.max_seq_length == 16
    assert short.provenance["max_length"] == 16


def test_rerank_keeps_exactly_the_k_candidates(cross_scorer):
    reranked, latencies = rerank(first_stage(), QUERIES, DOCUMENTS, cross_scorer, 2, 1)
    assert list(reranked.columns) == ["query_id", "doc_id", "score", "rank"]
    assert reranked["rank"].dtype == "int32"
    for query_id, candidates in (("q1", {"d1", "d3"}), ("q2", {"d3", "d1"})):
        rows = reranked[reranked["query_id"] == query_id]
        assert set(rows["doc_id"]) == candidates
        assert rows["rank"].tolist() == [1, 2]
        expected = cross_scorer.score(QUERIES[query_id], [DOCUMENTS[d] for d in rows["doc_id"]])
        # Scored in one batch across queries (as BEIR's reranker does), equal to one query at
        # a time up to float32 rounding: padding to another length changes the last bits.
        np.testing.assert_allclose(rows["score"].to_numpy(), expected, rtol=1e-6)
        assert rows["score"].is_monotonic_decreasing
    # Only the first query (in the queries' order) is timed one at a time.
    assert list(latencies) == [next(iter(QUERIES))] and latencies[next(iter(QUERIES))] > 0


def test_rerank_names_a_candidate_without_text(cross_scorer):
    documents = {k: v for k, v in DOCUMENTS.items() if k != "d3"}
    with pytest.raises(ValueError, match=r"document id\(s\) without text: \['d3'\]"):
        rerank(first_stage(), QUERIES, documents, cross_scorer, k=2)


def test_the_built_in_reranker_types_type_their_entries(cross_scorer, tiny_cross_encoder):
    """Each built-in type types its entry where a method receives it
    (irflow.core.settings_types): a cross-encoder that names only its type and id gets the
    schema's batch size, dtype and backend (a dict's lookups failed at the first key absent)
    and scores as the full entry; a key the schema lacks is refused, named, where a dict's
    lookup read the model and went on."""
    bare = load_scorer({"type": "cross-encoder", "id": str(tiny_cross_encoder)}, {}, DOCUMENTS)
    assert bare.batch_size == 32
    assert (bare.provenance["dtype"], bare.provenance["backend"]) == ("float32", "torch")
    documents = list(DOCUMENTS.values())
    np.testing.assert_allclose(
        bare.score("why do cats purr", documents),
        cross_scorer.score("why do cats purr", documents),
        rtol=1e-5,
        atol=1e-6,
    )
    misspelled = {"model": "m", "modle": "n"}
    with pytest.raises(ValidationError, match="modle"):
        reranker_type("bi-encoder").embeddings_model({"type": "bi-encoder"} | misspelled)
    with pytest.raises(ValidationError, match="modle"):
        entry = {"type": "late-interaction"} | misspelled
        reranker_type("late-interaction").problems("r", entry, {"models": {}})


@pytest.fixture(scope="module")
def encoder(minilm_path):
    return Encoder.load(minilm_spec(minilm_path))


@pytest.fixture(scope="module")
def corpus_embeddings(encoder, tmp_path_factory):
    folder = tmp_path_factory.mktemp("embeddings")
    rows = [{"doc_id": d["_id"], "title": d["title"], "text": d["text"]} for d in TINY_CORPUS]
    corpus = folder / "corpus.parquet"
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus)
    embed_file(encoder, corpus, "corpus", folder / "corpus-emb.parquet")
    return folder / "corpus-emb.parquet"


def test_bi_encoder_cached_scores_equal_on_the_fly(encoder, corpus_embeddings, monkeypatch):
    documents = DOCUMENTS | {"d5": "Tax law Income tax is levied on earnings."}
    texts = list(documents.values())
    on_the_fly = BiEncoderScorer(encoder).score("why do cats purr", texts)

    cached = BiEncoderScorer(encoder, corpus_embeddings, documents)
    encoded = []
    original = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda t, p: encoded.append(t) or original(t, p))
    scores = cached.score("why do cats purr", texts)
    assert scores.dtype == np.float64
    np.testing.assert_allclose(scores, on_the_fly, atol=1e-5)
    # Only d5, which the embeddings file lacks, and the query were encoded.
    assert encoded == [[documents["d5"]], ["why do cats purr"]]
    assert cached.provenance["documents_from_embeddings"] == 4
    assert cached.provenance["documents_encoded"] == 1


def test_bi_encoder_reads_only_the_candidates_vectors(encoder, corpus_embeddings, monkeypatch):
    candidates = {doc_id: DOCUMENTS[doc_id] for doc_id in ("d3", "d1")}
    read = []
    original = irflow.retrieval.scorers.read_embeddings

    def recording(*args, **kwargs):
        ids, vectors = original(*args, **kwargs)
        read.extend(ids)
        return ids, vectors

    monkeypatch.setattr(irflow.retrieval.scorers, "read_embeddings", recording)
    cached = BiEncoderScorer(encoder, corpus_embeddings, candidates)
    assert sorted(read) == ["d1", "d3"]  # the file holds d1 to d4
    texts = list(candidates.values())
    full = BiEncoderScorer(encoder, corpus_embeddings, DOCUMENTS)
    np.testing.assert_array_equal(
        cached.score("why do cats purr", texts), full.score("why do cats purr", texts)
    )


def test_bi_encoder_puts_the_relevant_document_first(encoder):
    cat = "Cats Cats purr, hunt mice and sleep in the sun for most of the day."
    tax = "Tax law Capital gains are taxed when an asset is sold at a profit."
    scores = BiEncoderScorer(encoder).score("what do cats do", [tax, cat])
    assert scores[1] > scores[0]


def test_bi_encoder_cache_needs_the_documents(encoder, corpus_embeddings):
    with pytest.raises(ValueError, match="needs the texts"):
        BiEncoderScorer(encoder, corpus_embeddings)


def test_bi_encoder_rerank_names_a_missing_document(encoder):
    run = pd.DataFrame({"query_id": ["q1"], "doc_id": ["nowhere"], "score": [1.0]})
    with pytest.raises(ValueError, match="nowhere"):
        rerank(run, QUERIES, DOCUMENTS, BiEncoderScorer(encoder), k=10)


def recording_encoder(encoder, monkeypatch) -> list[list[str]]:
    """The texts of each call to ``encoder.encode``, as the calls happen."""
    calls = []
    original = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda t, p: calls.append(list(t)) or original(t, p))
    return calls


def shared_candidates() -> tuple[pd.DataFrame, dict[str, str]]:
    """Three queries whose candidate lists overlap, over five documents of which d5 repeats
    d1's text under another id."""
    documents = DOCUMENTS | {"d5": DOCUMENTS["d1"]}
    run = pd.DataFrame(
        {
            "query_id": ["q1"] * 4 + ["q2"] * 3 + ["q3"] * 2,
            "doc_id": ["d1", "d2", "d3", "d5", "d1", "d3", "d4", "d2", "d4"],
            "score": [4.0, 3.0, 2.0, 1.0, 3.0, 2.0, 1.0, 2.0, 1.0],
        }
    )
    return run, documents


def test_bi_encoder_encodes_each_distinct_candidate_once_in_chunks(encoder, monkeypatch):
    run, documents = shared_candidates()
    queries = QUERIES | {"q3": "dogs and fish"}
    scorer = BiEncoderScorer(encoder)
    calls = recording_encoder(encoder, monkeypatch)
    reranked, latency = rerank(run, queries, documents, scorer, 10, 1)
    distinct = [documents[d] for d in ("d1", "d2", "d3", "d4")]  # d5 is d1's text
    # Documents first, in chunks of the model's chunk_size (2), then the queries together, then
    # the first query alone for its latency.
    asked = [queries["q1"], queries["q2"], queries["q3"]]
    assert calls == [distinct[:2], distinct[2:], asked, [queries["q1"]]]
    assert list(latency) == ["q1"]
    assert scorer.provenance["documents_distinct"] == 4
    assert scorer.provenance["documents_encoded"] == 4
    # The scores are those of encoding every candidate anew for its query.
    for query_id, rows in reranked.groupby("query_id"):
        texts = [documents[d] for d in rows["doc_id"]]
        expected = BiEncoderScorer(encoder).score(queries[query_id], texts)
        np.testing.assert_allclose(rows["score"].to_numpy(), expected, atol=1e-6)
    q1 = reranked[reranked["query_id"] == "q1"].set_index("doc_id")["score"]
    assert q1["d1"] == q1["d5"]  # one text, one vector


def test_vector_cache_serves_a_rerun_and_counts_it(encoder, tmp_path, monkeypatch, caplog):
    run, documents = shared_candidates()
    queries = QUERIES | {"q3": "dogs and fish"}
    first = BiEncoderScorer(encoder, cache=VectorCache(tmp_path, encoder))
    cold, _ = rerank(run, queries, documents, first, k=10)
    calls = recording_encoder(encoder, monkeypatch)
    second = BiEncoderScorer(encoder, cache=VectorCache(tmp_path, encoder))
    with caplog.at_level(logging.INFO, logger="irflow.retrieval.scorers"):
        warm, _ = rerank(run, queries, documents, second, k=10)
    assert calls == [[queries["q1"], queries["q2"], queries["q3"]]]  # no document
    pd.testing.assert_frame_equal(warm, cold)
    assert {key: second.provenance[key] for key in COUNTS} == {
        "documents_distinct": 4,
        "documents_from_embeddings": 0,
        "documents_from_cache": 4,
        "documents_encoded": 0,
    }
    assert (
        "4 distinct documents: 0 vectors from the embeddings file, 4 from the cache, 0 encoded"
        in caplog.text
    )
    # A new document is encoded and joins the cache; the cached ones are not encoded again.
    more = BiEncoderScorer(encoder, cache=VectorCache(tmp_path, encoder))
    more.prepare([documents["d1"], "Tax law Income tax is levied on earnings."])
    assert calls[-1] == ["Tax law Income tax is levied on earnings."]
    assert more.provenance["documents_from_cache"] == 1


COUNTS = (
    "documents_distinct",
    "documents_from_embeddings",
    "documents_from_cache",
    "documents_encoded",
)


@pytest.mark.parametrize(
    "change", [{"document_prompt": "passage: "}, {"similarity": "dot"}, {"max_seq_length": 8}]
)
def test_vector_cache_is_keyed_by_the_settings_that_change_vectors(
    encoder, minilm_path, tmp_path, change
):
    texts = list(DOCUMENTS.values())
    BiEncoderScorer(encoder, cache=VectorCache(tmp_path, encoder)).prepare(texts)
    other = Encoder.load(minilm_spec(minilm_path, batch_size=3, **change))
    assert VectorCache(tmp_path, other).folder != VectorCache(tmp_path, encoder).folder
    scorer = BiEncoderScorer(other, cache=VectorCache(tmp_path, other))
    scorer.prepare(texts)
    assert scorer.provenance["documents_encoded"] == len(texts)
    # Batch size and chunk size do not change vectors: the same folder serves them.
    same = Encoder.load(minilm_spec(minilm_path, batch_size=3, chunk_size=5))
    assert VectorCache(tmp_path, same).folder == VectorCache(tmp_path, encoder).folder


def test_vector_cache_records_the_resolved_dtype(encoder, tmp_path):
    cache = VectorCache(tmp_path, encoder)
    settings = json.loads((cache.folder / "_settings.json").read_text())
    assert settings["dtype"] == "float32"
    assert cache.get(["0" * 32]) == {}  # an empty cache answers nothing


def scifact_tables(shared, folder, queries: int, documents: int):
    """The first SciFact documents and queries as corpus and queries tables."""
    with gzip.open(shared / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        corpus = [json.loads(line) for _, line in zip(range(documents), lines)]
    with (shared / "scifact" / "queries.jsonl").open(encoding="utf-8") as lines:
        asked = [json.loads(line) for _, line in zip(range(queries), lines)]
    corpus_path, queries_path = folder / "corpus.parquet", folder / "queries.parquet"
    contracts.write_table(
        pa.Table.from_pylist(
            [{"doc_id": d["_id"], "title": d["title"], "text": d["text"]} for d in corpus],
            contracts.CORPUS,
        ),
        corpus_path,
    )
    contracts.write_table(
        pa.Table.from_pylist(
            [{"query_id": q["_id"], "text": q["text"]} for q in asked], contracts.QUERIES
        ),
        queries_path,
    )
    return corpus_path, queries_path


def test_bi_encoder_rerank_of_a_dense_run_reproduces_it(
    shared_datasets, minilm_path, tmp_path, monkeypatch
):
    """Prompts and unnormalised vectors: a reranker that dropped either would score otherwise."""
    spec = minilm_spec(
        minilm_path,
        query_prompt="query: ",
        document_prompt="passage: ",
        similarity="dot",
        max_seq_length=64,  # keeps the test short; both sides read the same window
        batch_size=32,
    )
    encoder = Encoder.load(spec | {"chunk_size": 64})
    corpus, queries = scifact_tables(shared_datasets, tmp_path, queries=6, documents=100)
    embed_file(encoder, corpus, "corpus", tmp_path / "corpus-emb.parquet")
    embed_file(encoder, queries, "queries", tmp_path / "queries-emb.parquet")
    index = index_spec(type="flat")
    index_file(tmp_path / "corpus-emb.parquet", index, tmp_path / "index.faiss")
    dense, _ = dense_search(
        tmp_path / "index.faiss",
        index,
        tmp_path / "corpus-emb.parquet",
        tmp_path / "queries-emb.parquet",
        top_k=25,
        remove_self_matches=False,
        batch_size=16,
        latency_queries=1,
    )
    table = pq.read_table(corpus).to_pydict()
    documents = dict(zip(table["doc_id"], contracts.document_texts(table["title"], table["text"])))
    table = pq.read_table(queries).to_pydict()
    scorer = load_scorer(
        {"type": "bi-encoder", "model": "m"}, {"m": spec}, documents, cache_root=tmp_path / "c"
    )
    reranked, _ = rerank(dense, dict(zip(table["query_id"], table["text"])), documents, scorer, 25)
    assert scorer.provenance["documents_encoded"] == dense["doc_id"].nunique()
    expected = dense.sort_values(["query_id", "rank"]).reset_index(drop=True)
    got = reranked.sort_values(["query_id", "rank"]).reset_index(drop=True)
    assert got[["query_id", "doc_id", "rank"]].equals(expected[["query_id", "doc_id", "rank"]])
    assert len(got) == 6 * 25
    np.testing.assert_allclose(got["score"], expected["score"], rtol=0, atol=1e-5)
    assert scorer.provenance["queries_from_embeddings"] == 0
    # With the model's vector files (as the workflow gives them), nothing is encoded but the
    # latency query, and the ranking is again the dense run's.
    query_texts = dict(zip(table["query_id"], table["text"]))

    def from_vector_files(query_manifest=None):
        return load_scorer(
            {"type": "bi-encoder", "model": "m"},
            {"m": spec},
            documents,
            embeddings=tmp_path / "corpus-emb.parquet",
            cache_root=None,
            queries=query_texts,
            query_embeddings=tmp_path / "queries-emb.parquet",
            query_manifest=query_manifest,
        )

    reused = from_vector_files()
    again, latency = rerank(dense, query_texts, documents, reused, 25, 1)
    again = again.sort_values(["query_id", "rank"]).reset_index(drop=True)
    assert again[["query_id", "doc_id", "rank"]].equals(expected[["query_id", "doc_id", "rank"]])
    np.testing.assert_allclose(again["score"], expected["score"], rtol=0, atol=1e-5)
    assert {key: reused.provenance[key] for key in COUNTS + ("queries_from_embeddings",)} == {
        "documents_distinct": dense["doc_id"].nunique(),
        "documents_from_embeddings": dense["doc_id"].nunique(),
        "documents_from_cache": 0,
        "documents_encoded": 0,
        "queries_from_embeddings": 6,
    }
    assert len(latency) == 1
    # With the embed job's record of the queries too (each timed query's encoding seconds, and
    # the model that made the vectors), the model is never loaded: a latency is that job's
    # encoding of the query plus this scoring.
    record = tmp_path / "queries.json"
    encoding = query_latency(encoder, queries, 1)
    record.write_text(json.dumps(encoder.provenance | {"latency": encoding}))
    monkeypatch.setattr(Encoder, "load", classmethod(lambda cls, spec: pytest.fail("loaded")))
    unloaded = from_vector_files(record)
    third, latency = rerank(dense, query_texts, documents, unloaded, 25, 1)
    third = third.sort_values(["query_id", "rank"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(third, again)
    [(query_id, seconds)] = latency.items()
    assert list(encoding) == [query_id]
    assert encoding[query_id] < seconds < encoding[query_id] + 0.5
    provenance = unloaded.provenance
    assert provenance["model_loaded"] is False and provenance["latency_encodings_from_embed"] == 1
    assert provenance["queries_encoded"] == 0 and provenance["documents_encoded"] == 0
    assert {key: provenance[key] for key in encoder.provenance} == encoder.provenance

    # The embed job timed the first two queries of the file, and the first has no candidates
    # (NFCorpus: 15 of its 323 queries have no BM25 run): only the second is timed, and the
    # model is still never loaded. Before, the third query was timed too, encoded here, the
    # model loaded inside its clock (4.8 s of a 12 ms median on NFCorpus).
    record.write_text(
        json.dumps(encoder.provenance | {"latency": query_latency(encoder, queries, 2)})
    )
    first, second = table["query_id"][:2]
    without_first = dense[dense["query_id"] != first]
    _, latency = rerank(without_first, query_texts, documents, from_vector_files(record), 25, 2)
    assert list(latency) == [second]
