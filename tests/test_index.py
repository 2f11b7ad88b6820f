"""index: every faiss type built from the embeddings file in batches, checked against flat."""

from __future__ import annotations

import tracemalloc

import faiss
import numpy as np
import pyarrow as pa
import pytest
from conftest import index_spec, typed_index

import irflow.retrieval.index
from irflow.core import contracts
from irflow.core.errors import InputError
from irflow.core.settings_types import Index
from irflow.retrieval.index import Searcher, index_file, list_count, load_index, vector_batches

DIM = 32


def clustered_vectors(rows: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around 20 centres, like embeddings of documents on a few topics."""
    random = np.random.default_rng(seed)
    centres = random.normal(size=(20, DIM))
    vectors = centres[random.integers(0, 20, rows)] + 0.3 * random.normal(size=(rows, DIM))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def write_embeddings(path, vectors: np.ndarray):
    ids = [f"d{i}" for i in range(len(vectors))]
    array = pa.FixedSizeListArray.from_arrays(vectors.reshape(-1), vectors.shape[1])
    contracts.write_table(
        pa.table({"id": ids, "vector": array}, schema=contracts.embeddings_schema(DIM)), path
    )
    return path


@pytest.fixture
def embeddings(tmp_path):
    return write_embeddings(tmp_path / "e.parquet", clustered_vectors(3000))


def search(path, spec: dict, queries, k=10):
    typed = Index.model_validate(spec)
    return Searcher(load_index(path, typed), typed).search(queries, k)


def exact(embeddings, tmp_path, queries, k=10):
    spec = index_spec(type="flat")
    index_file(embeddings, spec, tmp_path / "flat.faiss")
    return search(tmp_path / "flat.faiss", spec, queries, k)


def test_ivf_probing_every_list_is_exact(embeddings, tmp_path):
    queries = clustered_vectors(50, seed=1)
    spec = index_spec(type="ivf", nlist=16, nprobe=16)
    stats = index_file(embeddings, spec, tmp_path / "ivf.faiss")
    assert stats["documents"] == 3000 and stats["lists"] == 16
    scores, rows = search(tmp_path / "ivf.faiss", spec, queries)
    exact_scores, exact_rows = exact(embeddings, tmp_path, queries)
    np.testing.assert_array_equal(rows, exact_rows)
    np.testing.assert_allclose(scores, exact_scores, atol=1e-5)


def test_ivf_list_count_is_four_root_n_capped_by_training_rows():
    assert list_count(typed_index(type="ivf"), 1_000_000) == 4000  # 4 * isqrt(10^6)
    assert list_count(typed_index(type="ivf", train_rows=39_000), 1_000_000) == 1000
    assert list_count(typed_index(type="ivf", nlist=500), 1_000_000) == 500
    assert list_count(typed_index(type="ivf"), 20) == 1


def test_lists_short_of_training_rows_are_capped_with_a_warning(embeddings, tmp_path, caplog):
    stats = index_file(embeddings, index_spec(type="ivf"), tmp_path / "ivf.faiss")
    # 4 * isqrt(3000) = 216 lists would get 13 rows each; faiss wants 39.
    assert (stats["lists"], stats["lists_wanted"], stats["train_rows"]) == (76, 216, 3000)
    assert "76 lists instead of 216" in caplog.text


def test_ivfpq_refuses_fewer_rows_than_centroids(tmp_path):
    embeddings = write_embeddings(tmp_path / "e.parquet", clustered_vectors(200))
    with pytest.raises(InputError, match="needs at least that many training rows; there are 200"):
        index_file(embeddings, index_spec(type="ivfpq", pq_m=8), tmp_path / "pq.faiss")
    # 4 bits: 16 centroids, which 200 rows can train.
    stats = index_file(embeddings, index_spec(type="ivfpq", pq_m=8, pq_bits=4), tmp_path / "pq")
    assert stats["documents"] == 200


def test_refine_rescores_ivfpq_candidates_exactly(embeddings, tmp_path):
    queries = clustered_vectors(50, seed=4)
    exact_scores, exact_rows = exact(embeddings, tmp_path, queries, k=100)
    overlaps = {}
    for refine in (False, True):
        spec = index_spec(type="ivfpq", nlist=16, nprobe=16, pq_m=4, refine=refine)
        index_file(embeddings, spec, tmp_path / f"pq-{refine}.faiss")
        scores, rows = search(tmp_path / f"pq-{refine}.faiss", spec, queries, k=100)
        overlaps[refine] = np.mean([len(set(a) & set(b)) for a, b in zip(rows, exact_rows)])
    # Refined scores are the exact inner products of the rows returned.
    vectors = clustered_vectors(3000)
    expected = np.einsum("qd,qkd->qk", queries, vectors[rows])
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    assert overlaps[True] > overlaps[False] and overlaps[True] >= 95


@pytest.mark.parametrize("kind", ["ivf", "ivfpq"])
def test_memory_mapped_search_equals_loaded_search(embeddings, tmp_path, kind):
    queries = clustered_vectors(50, seed=2)
    spec = index_spec(type=kind, nlist=16, nprobe=4, pq_m=8)
    index_file(embeddings, spec, tmp_path / "i.faiss")
    loaded = search(tmp_path / "i.faiss", spec, queries)
    mapped = search(tmp_path / "i.faiss", spec | {"mmap": True}, queries)
    np.testing.assert_array_equal(mapped[1], loaded[1])
    np.testing.assert_array_equal(mapped[0], loaded[0])


def test_ivfpq_is_small_and_finds_the_documents_themselves(embeddings, tmp_path):
    spec = index_spec(type="ivfpq", nlist=16, nprobe=16, pq_m=8, refine=False)
    stats = index_file(embeddings, spec, tmp_path / "pq.faiss")
    flat = index_file(embeddings, index_spec(type="flat"), tmp_path / "flat.faiss")
    assert stats["index_bytes"] < flat["index_bytes"] / 4  # 8 code bytes against 128
    documents = clustered_vectors(3000)[::30]  # 100 corpus rows as queries
    _, rows = search(tmp_path / "pq.faiss", spec, documents)
    found = [row in hits for row, hits in zip(range(0, 3000, 30), rows)]
    assert np.mean(found) >= 0.9


def test_hnsw_agrees_with_flat(embeddings, tmp_path):
    queries = clustered_vectors(50, seed=3)
    spec = index_spec(type="hnsw", M=16)
    index_file(embeddings, spec, tmp_path / "hnsw.faiss")
    _, rows = search(tmp_path / "hnsw.faiss", spec, queries)
    _, exact_rows = exact(embeddings, tmp_path, queries)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(rows, exact_rows)])
    assert overlap >= 0.95


def test_pq_sub_quantisers_must_divide_the_dimension(embeddings, tmp_path):
    with pytest.raises(ValueError, match="pq_m 7 must divide the dimension 32"):
        index_file(embeddings, index_spec(type="ivfpq", pq_m=7), tmp_path / "pq.faiss")


def test_training_sample_is_evenly_spaced(embeddings, monkeypatch):
    monkeypatch.setattr(irflow.retrieval.index, "READ_BATCH_ROWS", 7)  # steps cross batch borders
    vectors = clustered_vectors(3000)
    sample = np.concatenate(list(vector_batches(embeddings, step=10)))
    np.testing.assert_array_equal(sample, vectors[::10])


def test_the_build_never_holds_a_second_copy_of_the_vectors(tmp_path, monkeypatch):
    vectors = clustered_vectors(100_000)  # 12.8 MB; imports and set-up cost ~1.5 MB
    embeddings = write_embeddings(tmp_path / "e.parquet", vectors)
    monkeypatch.setattr(irflow.retrieval.index, "READ_BATCH_ROWS", 1000)
    tracemalloc.start()
    index_file(embeddings, index_spec(type="flat"), tmp_path / "flat.faiss")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # Python-side buffers stay at a few batches; the vectors themselves live inside faiss.
    assert peak < vectors.nbytes / 4
    index = faiss.read_index(str(tmp_path / "flat.faiss"))
    np.testing.assert_array_equal(faiss.rev_swig_ptr(index.get_xb(), vectors.size), vectors.ravel())


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "flat"},
        {"type": "hnsw", "M": 8, "ef_construction": 16},
        {"type": "ivfpq", "pq_m": 8},
    ],
)
def test_the_build_allocates_the_vectors_and_links_once(embeddings, monkeypatch, spec):
    # A std::vector that outgrows its capacity moves to one twice as large (both held at once):
    # the storage must not move while the batches are added.
    monkeypatch.setattr(irflow.retrieval.index, "READ_BATCH_ROWS", 100)
    built, moves = [], []
    make, batches = irflow.retrieval.index.empty_index, irflow.retrieval.index.vector_batches

    def storages(index) -> list[int]:
        index = faiss.downcast_index(index)
        if isinstance(index, faiss.IndexRefine):
            return [int(faiss.downcast_index(index.refine_index).codes.data())]
        if isinstance(index, faiss.IndexHNSW):
            storage = faiss.downcast_index(index.storage)
            return [int(storage.codes.data()), int(index.hnsw.neighbors.data())]
        return [int(index.codes.data())]

    def adding(path, step=1):
        for matrix in batches(path, step):
            if built[0].ntotal:  # adding (not training): where the rows added so far are
                moves.append(storages(built[0]))
            yield matrix

    monkeypatch.setattr(
        irflow.retrieval.index, "empty_index", lambda *a: built.append(make(*a)) or built[0]
    )
    monkeypatch.setattr(irflow.retrieval.index, "vector_batches", adding)
    index, _ = irflow.retrieval.index.build_index(embeddings, typed_index(**spec))
    assert index.ntotal == 3000 and len(moves) == 29
    assert all(places == storages(index) for places in moves)


def test_the_reserved_flat_index_is_faiss_own_byte_for_byte(embeddings, tmp_path):
    index_file(embeddings, index_spec(type="flat"), tmp_path / "flat.faiss")
    plain = faiss.IndexFlatIP(DIM)
    plain.add(clustered_vectors(3000))
    faiss.write_index(plain, str(tmp_path / "plain.faiss"))
    assert (tmp_path / "flat.faiss").read_bytes() == (tmp_path / "plain.faiss").read_bytes()


def test_a_users_train_rows_are_all_used(embeddings, tmp_path, capfd):
    # 16 lists: the default sample is 64 a list (1,024); 4,800 asked for is 300 a list, more
    # than the 256 faiss' k-means keeps (it would draw 4,096 and say so on stderr).
    stats = index_file(embeddings, index_spec(type="ivf", nlist=16), tmp_path / "a.faiss")
    assert stats["train_rows"] == 1500  # every second row (the step that gives >= 1,024)
    spec = index_spec(type="ivf", nlist=16, train_rows=2900)
    stats = index_file(embeddings, spec, tmp_path / "b.faiss")
    assert stats["train_rows"] == 3000  # every row: the step for 2,900 is 1
    assert "please provide at most" not in capfd.readouterr().err
