"""Learned sparse retrieval: encoding (resumable, sharded) and exact search, on a tiny SPLADE
model built here; scores checked against the dot products of the library's own vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from conftest import minilm_spec
from tiny_models import build_tiny_splade

from irflow.core.records import check
from irflow.encoding import encode_parts
from irflow.encoding.encode_parts import SideEncoder, encode_file, gather
from irflow.retrieval import sparse
from irflow.retrieval.runs import SearchRequest
from irflow.retrieval.sparse import SparseIndex, SparseModel, read_sparse, sparse_search
from irflow.workflow.families import family

TEXTS = [
    "a cat sat on the mat",
    "dogs run in the park",
    "the mat is red, and the cat is black.",
    "stock markets fell sharply",
    "cats (and dogs) are pets!",
    "red wine with cheese",
    "quantum computers factor numbers",
]
QUERIES = ["cat on a mat", "pets", "wine"]


@pytest.fixture(scope="module")
def splade(tmp_path_factory, minilm_path) -> Path:
    return build_tiny_splade(tmp_path_factory.mktemp("splade"), minilm_path)


@pytest.fixture(scope="module")
def model(splade) -> SparseModel:
    return SparseModel.load(minilm_spec(splade, batch_size=4, chunk_size=3))


def write_tables(folder: Path) -> tuple[Path, Path]:
    corpus = pa.table(
        {
            "doc_id": [f"d{i}" for i in range(len(TEXTS))],
            "title": [""] * len(TEXTS),
            "text": TEXTS,
        }
    )
    queries = pa.table({"query_id": [f"q{i}" for i in range(len(QUERIES))], "text": QUERIES})
    pq.write_table(corpus, folder / "corpus.parquet")
    pq.write_table(queries, folder / "queries.parquet")
    return folder / "corpus.parquet", folder / "queries.parquet"


def encode_and_search(model, search, folder: Path):
    """Encode ``TEXTS`` and ``QUERIES`` with ``model`` and ``search`` the queries' top 4 in
    query batches of 2: (run, timing)."""
    corpus, queries = write_tables(folder)
    encode_file(model, corpus, "corpus", folder / "docs.parquet")
    encode_file(model, queries, "queries", folder / "query-vectors.parquet")
    return search(folder / "docs.parquet", folder / "query-vectors.parquet", 4, False, 2)


def test_search_scores_are_the_dot_products_of_the_library_vectors(model, tmp_path):
    run, timing = encode_and_search(model, sparse_search, tmp_path)

    # The bare library call: dense vocabulary-sized vectors, dot products in float64. Documents
    # in irflow's parts of 3 (chunk_size), as texts padded to another width differ in float32.
    docs = np.concatenate(
        [
            model.model.encode_document(TEXTS[start : start + 3], convert_to_tensor=True)
            .to_dense()
            .numpy()
            for start in range(0, len(TEXTS), 3)
        ]
    )
    qs = model.model.encode_query(QUERIES, convert_to_tensor=True).to_dense().numpy()
    direct = qs.astype(np.float64) @ docs.astype(np.float64).T
    shares_a_term = (qs > 0).astype(int) @ (docs > 0).astype(int).T > 0
    for q, query_id in enumerate(f"q{i}" for i in range(len(QUERIES))):
        mine = run[run.query_id == query_id]
        candidates = [(direct[q, d], f"d{d}") for d in range(len(TEXTS)) if shares_a_term[q, d]]
        # trec_eval's order: score descending, then doc id descending.
        expected = sorted(candidates, reverse=True)[:4]
        assert mine.doc_id.tolist() == [doc for _, doc in expected]
        np.testing.assert_allclose(mine.score, [s for s, _ in expected], rtol=1e-12)
    assert timing["nnz_per_document"] == pytest.approx((docs > 0).sum() / len(TEXTS))
    assert timing["index_bytes"] == (docs > 0).sum() * 12 + (docs.shape[1] + 1) * 4
    check({"stage": "retrieve", "settings": {}, "device": "cpu", "rows": len(run)} | timing)
    # A query sharing terms with fewer than 4 documents is short, and that is expected.
    short = sum(shares_a_term[q].sum() < 4 for q in range(len(QUERIES)))
    assert timing["short_queries"] == short
    assert (timing["short_queries_reason"] or "").startswith("expected: " if short else "")


def test_stored_vectors_are_the_library_vectors(model, tmp_path):
    corpus, _ = write_tables(tmp_path)
    encode_file(model, corpus, "corpus", tmp_path / "docs.parquet")
    ids, stored = read_sparse(
        tmp_path / "docs.parquet", vocabulary=model.model.get_embedding_dimension()
    )
    direct = model.model.encode_document(TEXTS, convert_to_tensor=True).to_dense().numpy()
    assert ids.to_pylist() == [f"d{i}" for i in range(len(TEXTS))]
    np.testing.assert_allclose(stored.toarray(), direct, rtol=1e-6, atol=1e-7)


def test_ties_at_the_cut_go_by_doc_id_and_batches_do_not_change_the_run(monkeypatch):
    # Documents 1 and 2 tie with the query; trec_eval keeps the larger doc id first.
    documents = sp.csr_matrix(np.array([[1.0, 0, 0], [0, 2.0, 0], [0, 2.0, 0], [0, 0, 5.0]]))
    queries = sp.csr_matrix(np.array([[0.5, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 1.0]]))
    index = SparseIndex(documents.astype(np.float32))
    hits = index.search(queries.astype(np.float32), depth=1, batch_size=10)
    assert sorted(hits[0][0].tolist()) == [1, 2]  # both tied rows are kept for the cut
    assert hits[1][0].tolist() == [3]  # only document 3 shares a term with query 1
    monkeypatch.setattr(sparse, "MAX_SCORE_ENTRIES", 4)  # one query per batch
    again = index.search(queries.astype(np.float32), depth=1, batch_size=10)
    for (rows, scores), (rows2, scores2) in zip(hits, again):
        assert rows.tolist() == rows2.tolist() and scores.tolist() == scores2.tolist()


def test_encoding_resumes_after_a_kill(model, tmp_path, monkeypatch):
    corpus, _ = write_tables(tmp_path)
    whole = tmp_path / "whole.parquet"
    encode_file(model, corpus, "corpus", whole)
    calls = []
    real = encode_parts._encode_part

    def killed_after_two_parts(*args):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(args)
        real(*args)

    monkeypatch.setattr(encode_parts, "_encode_part", killed_after_two_parts)
    resumed = tmp_path / "resumed.parquet"
    with pytest.raises(KeyboardInterrupt):
        encode_file(model, corpus, "corpus", resumed)
    monkeypatch.setattr(encode_parts, "_encode_part", real)
    facts = encode_file(model, corpus, "corpus", resumed)
    assert (facts["rows_resumed"], facts["rows_encoded"]) == (6, 1)  # parts of 3 rows
    assert facts["encode_seconds"] > 0
    assert pq.read_table(resumed).equals(pq.read_table(whole))


def test_shards_gather_into_the_file_one_job_writes(model, tmp_path):
    corpus, _ = write_tables(tmp_path)
    encode_file(model, corpus, "corpus", tmp_path / "whole.parquet")
    shards, manifests = [], []
    for shard in range(3):
        path = tmp_path / f"{shard}-of-3.parquet"
        facts = encode_file(model, corpus, "corpus", path, (shard, 3))
        shards.append(path)
        manifests.append(facts | {"shard": shard, "device": "cpu", "model": "tiny"})
    facts = gather(shards, manifests, corpus, tmp_path / "gathered.parquet")
    assert facts["rows"] == len(TEXTS) and facts["shards"] == 3
    whole, gathered = (
        read_sparse(tmp_path / "whole.parquet"),
        read_sparse(tmp_path / "gathered.parquet"),
    )
    assert whole[0].equals(gathered[0])
    np.testing.assert_allclose(whole[1].toarray(), gathered[1].toarray(), rtol=1e-6, atol=1e-7)
    manifests[1]["model"] = "other"
    with pytest.raises(Exception, match="shard 1 was encoded with model 'other'"):
        gather(shards, manifests, corpus, tmp_path / "refused.parquet")


# Each side encoded as the other: what a swap of queries and documents in irflow would do.
SWAPPED_SIDES = {"queries": "corpus", "corpus": "queries"}


def encode_swapped(monkeypatch):
    """Make irflow encode queries as documents and documents as queries."""
    encode_side = SideEncoder.encode_side
    monkeypatch.setattr(
        SideEncoder,
        "encode_side",
        lambda self, texts, side, **options: encode_side(
            self, texts, SWAPPED_SIDES[side], **options
        ),
    )


def test_query_vectors_are_the_static_term_weights(splade, model, tmp_path):
    """Inference-free SPLADE: a query's vector is the static weight of each of its terms (the
    query side's ``SparseStaticEmbedding``), computed here from the weights and the tokenizer
    alone; a document's is the masked-LM head's (SPLADE v2: "w_j = max_{i in t} log(1 +
    ReLU(w_ij))"), which the tests above take from the library."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    encode_and_search(model, sparse_search, tmp_path)
    _, stored = read_sparse(tmp_path / "query-vectors.parquet")
    query_side = splade / "query_0_SparseStaticEmbedding"
    [weights] = load_file(query_side / "model.safetensors").values()
    tokenizer = AutoTokenizer.from_pretrained(query_side)
    for row, query in enumerate(QUERIES):
        terms = sorted(set(tokenizer(query)["input_ids"]) - set(tokenizer.all_special_ids))
        assert stored[row].indices.tolist() == terms
        np.testing.assert_array_equal(stored[row].data, weights.numpy()[terms])


def refuse_to_write(*args, **kwargs):
    raise AssertionError("a Parquet file was written")


def assert_a_swap_changes_the_run(model, search, folder: Path, monkeypatch) -> None:
    """``model``'s run (``encode_and_search``) differs when each side is encoded as the
    other: so the tests that compare irflow's run with the library's sides would catch a
    swap."""
    (folder / "right").mkdir()
    right, _ = encode_and_search(model, search, folder / "right")
    encode_swapped(monkeypatch)
    (folder / "swapped").mkdir()
    swapped, _ = encode_and_search(model, search, folder / "swapped")
    assert not np.allclose(swapped.score, right.score)


def test_encoding_either_side_as_the_other_changes_the_run(model, tmp_path, monkeypatch):
    assert_a_swap_changes_the_run(model, sparse_search, tmp_path, monkeypatch)


def test_its_searcher_encodes_query_texts_as_the_encode_job_and_searches_them(
    model, splade, tmp_path, monkeypatch
):
    """The sparse family's searcher, on a query table of texts (another split's, in a
    negatives or qc_candidates job): the same run as the search of the encode job's query
    vectors, searched in memory."""
    stored, _ = encode_and_search(model, sparse_search, tmp_path)
    retriever = {"type": "sparse", "model": "m", "query_batch_size": 2}
    searcher = family("sparse").open_searcher(
        {"corpus": tmp_path / "docs.parquet"},
        {"retriever": retriever},
        1,
        models={"m": minilm_spec(splade, batch_size=4, chunk_size=3)},
    )
    queries = pq.read_table(tmp_path / "queries.parquet")
    # The encoded queries are searched in memory: no file is written for them.
    monkeypatch.setattr(pq, "write_table", refuse_to_write)
    run, _ = searcher.search(queries, SearchRequest(4, False))
    assert run[["query_id", "doc_id", "rank"]].equals(stored[["query_id", "doc_id", "rank"]])
    np.testing.assert_allclose(run.score, stored.score, rtol=1e-6)


def test_its_searcher_reads_the_schemas_defaults_of_the_entries_it_types(model, splade, tmp_path):
    """The retriever's entry (irflow.core.settings_types.Sparse) and its model's
    (irflow.core.settings_types.ModelModel, typed by irflow.encoding.encode_parts.SideEncoder)
    are typed where the job receives them: entries that name neither the query batch size nor
    the model's settings search with the schema's defaults, as the full entries do (a dict's
    lookups failed at the first key absent)."""
    stored, _ = encode_and_search(model, sparse_search, tmp_path)
    searcher = family("sparse").open_searcher(
        {"corpus": tmp_path / "docs.parquet"},
        {"retriever": {"type": "sparse", "model": "m"}},
        1,
        models={"m": {"id": str(splade)}},
    )
    queries = pq.read_table(tmp_path / "queries.parquet")
    run, _ = searcher.search(queries, SearchRequest(4, False))
    assert run[["query_id", "doc_id", "rank"]].equals(stored[["query_id", "doc_id", "rank"]])
    np.testing.assert_allclose(run.score, stored.score, rtol=1e-6)
    assert searcher.encoder.spec.batch_size == 64
