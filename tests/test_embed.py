"""embed: resumable chunked embedding with the real all-MiniLM-L6-v2."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TINY_CORPUS, minilm_spec

from irflow import contracts
from irflow.embed import Encoder, embed_file, read_embeddings


@pytest.fixture(scope="module")
def encoder(minilm_path):
    return Encoder.load(minilm_spec(minilm_path))


@pytest.fixture
def corpus(tmp_path):
    rows = [{"doc_id": d["_id"], "title": d["title"], "text": d["text"]} for d in TINY_CORPUS]
    path = tmp_path / "corpus.parquet"
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), path)
    return path


def test_documents_are_title_space_text_and_normalised(encoder, corpus, tmp_path):
    out = tmp_path / "emb.parquet"
    assert embed_file(encoder, corpus, "corpus", out)["rows"] == 4
    ids, vectors = read_embeddings(out)
    assert ids == ["d1", "d2", "d3", "d4"]
    assert pq.read_schema(out).field("vector").type == pa.list_(pa.float32(), 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    direct = encoder.model.encode(
        [
            "Cats Cats purr and sleep in the sun.",
            "The sun is a star at the centre of the solar system.",
        ],
        normalize_embeddings=True,
    )
    np.testing.assert_allclose(vectors[[0, 2]], direct, atol=1e-5)


def test_prompts_are_prepended(encoder, corpus, tmp_path):
    prompted = Encoder(
        encoder.model,
        encoder.spec | {"document_prompt": "passage: "},
        encoder.device,
        encoder.provenance,
    )
    embed_file(prompted, corpus, "corpus", tmp_path / "emb.parquet")
    _, vectors = read_embeddings(tmp_path / "emb.parquet")
    direct = encoder.model.encode(
        ["passage: Dogs Dogs bark at the postman."], normalize_embeddings=True
    )
    np.testing.assert_allclose(vectors[1], direct[0], atol=1e-5)


class Killed(RuntimeError):
    pass


def counting(encoder, fail_after: int | None = None):
    """An encoder that counts encode calls and can die after some of them, like a killed job."""
    calls = []

    class Counting(Encoder):
        def encode(self, texts, prompt):
            if fail_after is not None and len(calls) == fail_after:
                raise Killed
            calls.append(len(texts))
            return super().encode(texts, prompt)

    return Counting(encoder.model, dict(encoder.spec), encoder.device, encoder.provenance), calls


def test_killed_job_resumes_from_the_last_finished_chunk(encoder, corpus, tmp_path):
    out = tmp_path / "emb.parquet"
    dying, _ = counting(encoder, fail_after=1)
    with pytest.raises(Killed):
        embed_file(dying, corpus, "corpus", out)
    assert not out.exists()
    assert len(list(out.with_name("emb.parquet.parts").glob("part-*.parquet"))) == 1

    resumed, calls = counting(encoder)
    result = embed_file(resumed, corpus, "corpus", out)
    assert result | {"encode_seconds": None} == {
        "rows": 4,
        "chunks": 2,
        "chunks_resumed": 1,
        "rows_encoded": 2,
        "encode_seconds": None,
    }
    assert result["encode_seconds"] > 0
    assert calls == [2]  # only the second chunk was encoded
    embed_file(encoder, corpus, "corpus", tmp_path / "fresh.parquet")
    np.testing.assert_array_equal(
        read_embeddings(out)[1], read_embeddings(tmp_path / "fresh.parquet")[1]
    )
    assert not out.with_name("emb.parquet.parts").exists()


def test_parts_made_with_other_settings_are_discarded(encoder, corpus, tmp_path):
    out = tmp_path / "emb.parquet"
    dying, _ = counting(encoder, fail_after=1)
    with pytest.raises(Killed):
        embed_file(dying, corpus, "corpus", out)
    changed, calls = counting(encoder)
    changed.spec["document_prompt"] = "passage: "
    assert embed_file(changed, corpus, "corpus", out)["chunks_resumed"] == 0
    assert calls == [2, 2]


def test_empty_input_is_an_error(encoder, tmp_path):
    path = tmp_path / "queries.parquet"
    contracts.write_table(pa.Table.from_pylist([], contracts.QUERIES), path)
    with pytest.raises(ValueError, match="queries.parquet: no rows to embed"):
        embed_file(encoder, path, "queries", tmp_path / "out.parquet")
