"""irflow.resources: the memory each rule's job asks for, from its inputs' Parquet metadata."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from irflow import contracts, resources
from irflow.resources import MIB


def embeddings(path, rows: int, dim: int):
    matrix = np.zeros((rows, dim), dtype=np.float32)
    ids = pa.array([f"d{i}" for i in range(rows)])
    pq.write_table(pa.table({"id": ids, "vector": contracts.vector_array(matrix)}), path)
    return path


def expected(peak_mib: float) -> int:
    return max(resources.MIN_MB, math.ceil(peak_mib * resources.HEADROOM))


@pytest.fixture(autouse=True)
def no_cap(monkeypatch):
    monkeypatch.delenv(resources.CAP_VARIABLE, raising=False)


def test_a_request_is_the_peak_with_headroom_doubled_per_attempt_and_capped(monkeypatch):
    assert resources.request_mb(4000) == 5000
    assert [resources.request_mb(4000, attempt) for attempt in (1, 2, 3)] == [5000, 10000, 20000]
    assert resources.request_mb(10) == resources.MIN_MB  # never below the floor
    monkeypatch.setenv(resources.CAP_VARIABLE, "12000")
    assert [resources.request_mb(4000, attempt) for attempt in (1, 2, 3)] == [5000, 10000, 12000]


def test_index_memory_grows_with_rows_times_dimension_not_file_size(tmp_path):
    path = embeddings(tmp_path / "corpus.parquet", 100_000, 8)
    vectors_mib = 100_000 * 8 * 4 / MIB
    flat = resources.FLAT_INDEX_BASE_MIB + resources.FLAT_INDEX_PER_VECTOR_MIB * vectors_mib
    assert resources.index_mb(path, {"type": "flat"}) == expected(flat)
    # HNSW's links: 2 x M of 4 bytes per row (M 512: 390 MiB here).
    hnsw = flat + 100_000 * 512 * resources.HNSW_LINK_BYTES / MIB
    assert resources.index_mb(path, {"type": "hnsw", "M": 512}) == expected(hnsw) > 1200
    ivfpq = resources.IVFPQ_INDEX_BASE_MIB + resources.IVFPQ_INDEX_PER_VECTOR_MIB * vectors_mib
    assert resources.index_mb(path, {"type": "ivfpq", "refine": False}) == expected(ivfpq)
    # Refining keeps the full vectors as well.
    refined = ivfpq + resources.FLAT_INDEX_PER_VECTOR_MIB * vectors_mib
    assert resources.index_mb(path, {"type": "ivfpq", "refine": True}) == expected(refined)


def test_the_models_at_ms_marco_size_stay_what_the_measurements_say():
    # 8.8 M x 384 float32 (all-MiniLM-L6-v2) is 12.6 GiB of vectors: a flat index asks for
    # about 18 GB, an IVF-PQ build about 6 GB (no file read: the model alone).
    vectors_mib = 8_841_823 * 384 * 4 / MIB
    flat = resources.FLAT_INDEX_BASE_MIB + resources.FLAT_INDEX_PER_VECTOR_MIB * vectors_mib
    assert 17_000 < resources.request_mb(flat) < 19_000
    ivfpq = resources.IVFPQ_INDEX_BASE_MIB + resources.IVFPQ_INDEX_PER_VECTOR_MIB * vectors_mib
    assert 5_000 < resources.request_mb(ivfpq) < 6_500


def test_dense_search_holds_the_index_unless_it_is_memory_mapped(tmp_path):
    queries = embeddings(tmp_path / "queries.parquet", 100, 384)
    index = tmp_path / "flat.faiss"
    with index.open("wb") as file:
        file.truncate(2000 * MIB)  # sparse: its size, not its bytes, is what counts
    queries_mib = 100 * 384 * 4 / MIB
    in_memory = resources.SEARCH_BASE_MIB + resources.SEARCH_PER_INDEX_MIB * 2000 + queries_mib
    assert resources.dense_search_mb(index, queries, {"mmap": False}) == expected(in_memory)
    assert expected(in_memory) > 3000
    mapped = resources.SEARCH_BASE_MIB + queries_mib
    assert resources.dense_search_mb(index, queries, {"mmap": True}) == expected(mapped)


def test_table_models_read_rows_and_uncompressed_text_from_the_metadata(tmp_path):
    texts = [f"document {i} " + "word " * 200 for i in range(5000)]
    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"doc_id": [str(i) for i in range(5000)], "text": texts}), corpus)
    metadata = pq.read_metadata(corpus)
    text_mb = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    assert resources.text_mb(corpus) == text_mb / 1e6
    assert text_mb > 5 * corpus.stat().st_size  # compressed on disk: not what is modelled
    bm25 = resources.BM25_BASE_MIB + resources.BM25_MIB_PER_TEXT_MB * text_mb / 1e6
    assert resources.bm25_mb(corpus, attempt=2) == 2 * expected(bm25)
    run = tmp_path / "run.parquet"
    pq.write_table(pa.table({"query_id": ["q"] * 3_000_000}), run)
    score = resources.SCORE_BASE_MIB + resources.SCORE_MIB_PER_RUN_ROW * 3_000_000
    assert resources.score_mb(run) == expected(score) > 1024


def test_ingest_reads_the_corpus_file_named_by_source_json(tmp_path):
    corpus = tmp_path / "corpus.jsonl.gz"
    corpus.write_bytes(b"\0" * 50_000_000)
    source = tmp_path / "source.json"
    source.write_text(json.dumps({"corpus": str(corpus)}))
    peak = resources.INGEST_BASE_MIB + resources.INGEST_MIB_PER_FILE_MB * 50
    assert resources.ingest_mb(source) == expected(peak)


def test_a_missing_input_is_named_so_snakemake_waits_for_it(tmp_path):
    # Snakemake leaves the value to be determined when the error names one of the job's inputs.
    missing = str(tmp_path / "corpus.parquet")
    with pytest.raises(FileNotFoundError) as error:
        resources.bm25_mb(missing)
    assert error.value.filename == missing
