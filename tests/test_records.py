"""records: each stage's manifest is a declared type; writing one checks it, and the cost
table reads its typed fields, one name per concept."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO, schema_defaults
from test_aggregate import run_scripts

from irflow.core import contracts
from irflow.core.manifest import Manifest
from irflow.core.records import TYPES, RecordError, read_record, record_type
from irflow.evaluation.cost import CostModel
from irflow.retrieval.bm25 import build_index
from irflow.retrieval.index import index_file
from irflow.workflow.families import family

BM25_INDEX = {
    "stage": "index_bm25",
    "dataset": "d",
    "system": "bm25",
    "settings": {"k1": 0.9},
    "device": "cpu",
    "index_bytes": 100,
    "documents": 3,
    "terms": 5,
    "postings": 9,
}


def written(path, facts: dict) -> dict:
    Manifest(path, **facts).write()
    return json.loads(path.read_text())


def test_a_record_with_a_misspelt_field_is_refused_and_not_written(tmp_path):
    path = tmp_path / "index_bm25.json"
    with pytest.raises(ValueError, match=r"index_bm25 record has no field 'index_second'") as e:
        written(path, BM25_INDEX | {"index_second": 2.0})
    assert "did you mean 'index_seconds'?" in str(e.value)
    assert not path.exists()
    assert written(path, BM25_INDEX | {"index_seconds": 2.0})["index_seconds"] == 2.0


def test_a_missing_or_mistyped_field_is_refused_naming_the_stage_and_field(tmp_path):
    path = tmp_path / "m.json"
    with pytest.raises(ValueError, match=r"the index_bm25 record lacks its field 'index_seconds'"):
        written(path, BM25_INDEX)
    with pytest.raises(ValueError, match=r"index_bm25 record's field 'index_bytes' is '100'"):
        written(path, BM25_INDEX | {"index_seconds": 2.0, "index_bytes": "100"})
    # An open record (a model's provenance beside its declared fields) refuses a near-miss.
    embed = {"stage": "embed", "rows": 4, "rows_encoded": 4, "rows_resumed": 0}
    embed |= {"device": "cpu", "revision": "abc", "similarity_from": "model"}
    with pytest.raises(ValueError, match=r"embed record has no field 'encode_second'"):
        written(path, embed | {"encode_second": 1.0})
    assert written(path, embed | {"encode_seconds": 1.0})["revision"] == "abc"


def test_a_numpy_integer_is_refused_where_the_record_declares_an_int(tmp_path):
    """json.dumps writes a numpy integer through its default=str, as a string ("3"): msgspec's
    strict int refuses it before it is written (the hand-written check took any
    numbers.Integral for an int, and the manifest said "documents": "3")."""
    path = tmp_path / "m.json"
    facts = BM25_INDEX | {"index_seconds": 2.0, "documents": np.int64(3)}
    refused = rf"index_bm25 record's field 'documents' is {re.escape(repr(np.int64(3)))} \(int64\)"
    with pytest.raises(RecordError, match=refused + ", not int"):
        written(path, facts)
    assert not path.exists()
    assert written(path, facts | {"documents": 3})["documents"] == 3


def test_the_index_jobs_of_every_family_name_their_build_time_index_seconds(tmp_path):
    """faiss' index job named it build_seconds, BM25's index_seconds (patched per family in
    the cost table): both writers now give index_seconds, and their records are accepted."""
    vectors = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    embeddings = tmp_path / "embeddings.parquet"
    ids = [f"d{i}" for i in range(50)]
    table = {"id": ids, "vector": contracts.vector_array(vectors)}
    contracts.write_table(pa.table(table, schema=contracts.embeddings_schema(8)), embeddings)
    faiss_facts = index_file(embeddings, {"type": "flat"}, tmp_path / "flat.faiss")
    corpus = tmp_path / "corpus.parquet"
    rows = [{"doc_id": f"d{i}", "title": "", "text": f"word{i} shared"} for i in range(5)]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus)
    settings = schema_defaults({"type": "bm25"})
    bm25_facts = build_index(corpus, settings, tmp_path / "bm25")
    assert "index_seconds" in faiss_facts and "index_seconds" in bm25_facts
    wildcards = {"dataset": "d", "model": "m"}
    written(tmp_path / "i.json", {"stage": "index", "device": "cpu"} | wildcards | faiss_facts)
    written(
        tmp_path / "b.json",
        {"stage": "index_bm25", "settings": settings, "device": "cpu"} | bm25_facts,
    )


CONFIG = {
    "models": {"m": {"id": "m", "long_documents": {"strategy": "truncate"}}, "s": {}, "c": {}},
    "indexes": {"flat": {"type": "flat", "shard_rows": None}},
    "retrievers": {
        "bm25": {"type": "bm25"},
        "dense": {"type": "dense", "model": "m", "index": "flat"},
        "splade": {"type": "sparse", "model": "s"},
        "colbert": {"type": "late-interaction", "model": "c"},
        "mine": {"type": "python", "class": "x:Y"},
    },
}
KINDS = {name: spec["type"] for name, spec in CONFIG["retrievers"].items()}


def manifests(tmp_path, build_time: str) -> dict:
    """The manifests of every family's jobs, as JSON files written by Manifest, each build
    time under the name ``build_time``; every other fact a reader needs beside it."""
    encoded = {"rows": 10, "rows_encoded": 10, "rows_resumed": 0, "encode_seconds": 2.0}
    encoded |= {"device": "cpu", "latency": {"q1": 0.01}}
    searched = {"settings": {}, "device": "cpu", "rows": 10, "queries": 1, "search_seconds": 0.1}
    searched |= {"ms_per_query_batched": 100.0, "self_matches_removed": 0, "short_queries": 0}
    searched |= {"short_query_examples": {}, "latency": {"q1": 0.02}}
    built = {"index_bytes": 64, build_time: 7.0}
    faiss = {"index": {"type": "flat"}, "device": "cpu", "dimension": 8, "documents": 10}
    faiss |= {"faiss_version": "1.8"}
    records = {
        ("index_bm25", "d", "bm25"): BM25_INDEX | built,
        ("index", "d", "m", "flat"): {"stage": "index"} | faiss | built,
        ("embed", "d", "m", "corpus"): {"stage": "embed"} | encoded,
        ("embed", "d", "m", "queries"): {"stage": "embed"} | encoded,
        ("sparse", "d", "s", "corpus"): {"stage": "encode_vectors"} | encoded,
        ("sparse", "d", "s", "queries"): {"stage": "encode_vectors"} | encoded,
        ("tokens", "d", "c", "corpus"): {"stage": "encode_vectors"} | encoded,
        ("tokens", "d", "c", "queries"): {"stage": "encode_vectors"} | encoded,
        ("retrieve", "d", "bm25"): {"stage": "retrieve"} | searched,
        ("retrieve", "d", "dense"): {"stage": "retrieve"} | searched,
    }
    for system in ("splade", "colbert", "mine"):
        records[("retrieve", "d", system)] = {"stage": "retrieve"} | searched | built
    paths = {}
    for key, facts in records.items():
        paths[key] = tmp_path / "_".join(key)
        paths[key].write_text(json.dumps(facts))
    return paths


def cost_table(paths: dict):
    model = CostModel(CONFIG, KINDS, lambda *key: read_record(paths[key]), family)
    return model.table(["d"]).set_index("system")


def test_every_family_reads_its_index_build_time_from_index_seconds(tmp_path):
    table = cost_table(manifests(tmp_path, "index_seconds"))
    assert table["index_build_seconds"].to_dict() == {s: 7.0 for s in sorted(KINDS)}
    assert (table["index_bytes"].drop("mine").dropna() == 64).all()
    # Encoding throughput, one rule for every family that encodes: rows over encode_seconds.
    encoders = ["colbert", "dense", "splade"]
    assert table.loc[encoders, "encode_docs_per_second"].tolist() == [5.0, 5.0, 5.0]


def test_an_older_faiss_index_manifest_reads_its_build_seconds_as_index_seconds(tmp_path):
    paths = manifests(tmp_path, "index_seconds")
    older = json.loads(paths[("index", "d", "m", "flat")].read_text())
    older["build_seconds"] = older.pop("index_seconds")
    paths[("index", "d", "m", "flat")].write_text(json.dumps(older))
    assert cost_table(paths).loc["dense", "index_build_seconds"] == 7.0


def test_a_rerank_record_takes_its_scorers_provenance(tmp_path, minilm_path):
    """Rerank's record is open: the cross-encoder's provenance (model, files_md5, dtype,
    max_length, backend) sits beside its declared fields, as scripts/rerank.py writes it."""
    from tiny_models import build_tiny_cross_encoder

    from irflow.retrieval.rerank import CrossEncoderScorer

    model = build_tiny_cross_encoder(tmp_path / "cross-encoder", minilm_path)
    spec = {"type": "cross-encoder", "id": str(model), "revision": None, "batch_size": 4}
    scorer = CrossEncoderScorer.load(spec | {"dtype": "float32", "device": "cpu"})
    job = {"stage": "rerank", "dataset": "d", "system": "bm25+ce@10", "settings": {}}
    job |= {"first_stage": "bm25", "k": 10, "latency": {"q1": 0.1}, "rows": 10}
    assert written(tmp_path / "rerank.json", job | scorer.provenance)["backend"] == "torch"
    del job["first_stage"]
    with pytest.raises(ValueError, match="rerank record lacks its field 'first_stage'"):
        written(tmp_path / "rerank.json", job | scorer.provenance)


def stage_names(argument: ast.expr) -> set[str]:
    """The stages a start_job argument names: a string, or either of a conditional's (an
    f-string is the shared helper's, which passes on its caller's stage)."""
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return {argument.value}
    if isinstance(argument, ast.IfExp):
        return stage_names(argument.body) | stage_names(argument.orelse)
    return set()


def script_stages() -> set[str]:
    """Every stage a script under scripts/ names to start_job or start_encode_job (its
    ``_shard`` too), read from the source: each string its stage argument can take."""
    stages = set()
    for script in (REPO / "scripts").glob("*.py"):
        for call in ast.walk(ast.parse(script.read_text(), str(script))):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            if call.func.id not in ("start_job", "start_encode_job") or len(call.args) < 2:
                continue
            named = stage_names(call.args[1])
            stages |= named
            if call.func.id == "start_encode_job":
                stages |= {f"{stage}_shard" for stage in named}
    return stages


def test_every_stage_a_script_starts_has_a_declared_record_type():
    stages = script_stages()
    assert {"filter", "embed_shard", "qc_votes", "encode_vectors"} <= stages  # the parse reads
    missing = sorted(stages - set(TYPES))
    assert missing == [], f"stages without a record type: {missing}"


def test_a_stage_without_a_declared_type_is_refused_and_not_written(tmp_path):
    path = tmp_path / "m.json"
    with pytest.raises(RecordError, match=r"stage 'reindex' has no declared record type"):
        written(path, {"stage": "reindex", "dataset": "d"})
    assert not path.exists()
    with pytest.raises(RecordError, match=r"stage 'reindex' has no declared record type"):
        record_type("reindex")


# Of each stage typed last, the first field its record requires and a value of the wrong type.
MISTYPED = {
    "curate": ("base", 1),
    "derive": ("kind", 1),
    "expand": ("base_checksum", 1),
    "external_run": ("settings", "top_k=10"),
    "filter": ("documents_in", "5"),
    "generate": ("llm", "fake"),
    "ingest": ("files", ["corpus.jsonl"]),
    "label_audit": ("settings", "depth 30"),
    "negatives": ("split", 1),
    "onnx_export": ("settings", "minilm"),
    "passages": ("settings", "maxp"),
    "positionalize": ("base_checksum", 1),
    "qc_candidates": ("split", None),
    "qc_votes": ("settings", "ce"),
    "quality_control": ("llm", ["fake"]),
}


@pytest.mark.parametrize(("stage", "name", "wrong"), [(s, *f) for s, f in MISTYPED.items()])
def test_a_misspelt_or_mistyped_field_of_each_stage_is_refused_naming_both(
    tmp_path, stage, name, wrong
):
    """Open stages (a model's or a scorer's provenance beside the declared fields) refuse a
    near-miss of a declared name; the others any undeclared name."""
    path = tmp_path / "m.json"
    misspelt = name + name[-1]  # basee, rows_readd
    with pytest.raises(RecordError, match=rf"the {stage} record has no field '{misspelt}'"):
        written(path, {"stage": stage, misspelt: 1})
    mistyped = rf"the {stage} record's field '{name}' is {re.escape(repr(wrong))} "
    with pytest.raises(RecordError, match=mistyped):
        written(path, {"stage": stage, name: wrong})
    assert not path.exists()


def test_a_qc_candidates_job_writes_its_stages_record(tmp_path, monkeypatch):
    """scripts/qc_candidates.py, run as its rule runs it (no workflow test reaches it: it
    retrieves a generated dataset's dev split), writes a record its type accepts."""
    rows = {
        "corpus": [{"doc_id": f"d{i}", "title": "", "text": f"word{i} shared"} for i in range(3)],
        "queries": [{"query_id": "q1", "text": "word1 shared"}, {"query_id": "q2", "text": "w"}],
        "qrels": [{"query_id": "q1", "doc_id": "d1", "relevance": 1}],
    }
    inputs = {}
    for name, table in rows.items():
        inputs[name] = str(tmp_path / f"{name}.parquet")
        schema = getattr(contracts, name.upper())
        contracts.write_table(pa.Table.from_pylist(table, schema), Path(inputs[name]))
    settings = schema_defaults({"type": "bm25"})
    build_index(Path(inputs["corpus"]), settings, tmp_path / "index")
    job = {
        "input": inputs | {"index": str(tmp_path / "index")},
        "output": {"run": "dev.parquet", "manifest": "manifest.json"},
        "wildcards": {"dataset": "gen", "split": "dev"},
        "params": {"retrieval": {"retriever": settings, "top_k": 2, "remove_self_matches": False}},
        "rule": "qc_candidates",
        "threads": 1,
        "config": {"models": {}},
    }
    monkeypatch.chdir(tmp_path)
    run_scripts({"qc_candidates": job})
    record = read_record(tmp_path / "manifest.json")
    assert (record.stage, record.split, record.model) == ("qc_candidates", "dev", None)
    assert (record.queries, record.queries_with_candidates, record.rows) == (1, 1, 2)
