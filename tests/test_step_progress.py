"""Progress of each long step as log lines (irflow.core.progress), on the real code path with
IRFLOW_PROGRESS_SECONDS=0 (a line per update): BM25's indexing and search over SciFact, faiss'
IVF training, a bi-encoder's and a late-interaction model's reranking, a model's download from a
hub on 127.0.0.1. Each line names the step and gives the count done of the total and the rate;
the results are those the step gives without them."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from bm25_index import indexed
from conftest import TINY_CORPUS, index_spec, minilm_spec, schema_defaults
from tiny_models import build_tiny_colbert

from irflow.core import contracts
from irflow.core.progress import SECONDS_VARIABLE
from irflow.encoding.models import Encoder
from irflow.retrieval.bm25 import BM25Retriever
from irflow.retrieval.index import index_file
from irflow.retrieval.late_interaction import TokenEncoder
from irflow.retrieval.maxsim_rerank import MaxSimScorer
from irflow.retrieval.rerank import rerank
from irflow.retrieval.scorers import BiEncoderScorer

SCIFACT_DOCUMENTS = 5183
BM25 = {"type": "bm25"}
DOCUMENTS = {d["_id"]: contracts.document_text(d["title"], d["text"]) for d in TINY_CORPUS}
QUERIES = {"q1": "why do cats purr", "q2": "what is the sun", "q3": "dogs and fish"}


@pytest.fixture(autouse=True)
def every_update_logged(monkeypatch, caplog):
    monkeypatch.setenv(SECONDS_VARIABLE, "0")
    caplog.set_level(logging.INFO)


def progress(caplog, desc: str, unit: str) -> list[tuple[int, int]]:
    return progress_of([record.getMessage() for record in caplog.records], desc, unit)


def progress_of(lines: list[str], desc: str, unit: str) -> list[tuple[int, int]]:
    """(done, total) of each of ``desc``'s progress lines; each after the first has a rate."""
    found = []
    for line in lines:
        if match := re.fullmatch(
            rf"{re.escape(desc)}: (\d+)/(\d+) {unit} \(\d+ %\) in \S+, +(\S+){unit}/s, \S+ left",
            line,
        ):
            done, total, rate = match.groups()
            assert rate == "?" if not found else float(rate) > 0, line
            found.append((int(done), int(total)))
    return found


@pytest.fixture(scope="module")
def scifact_tables(shared_datasets, tmp_path_factory):
    """SciFact's corpus and test queries as corpus and queries tables."""
    folder = tmp_path_factory.mktemp("scifact")
    shared = shared_datasets / "scifact"
    with gzip.open(shared / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        corpus = [json.loads(line) for line in lines]
    tested = set(pd.read_csv(shared / "qrels" / "test.tsv", sep="\t", dtype=str)["query-id"])
    with (shared / "queries.jsonl").open(encoding="utf-8") as lines:
        queries = [q for q in map(json.loads, lines) if q["_id"] in tested]
    corpus_path, queries_path = folder / "corpus.parquet", folder / "queries.parquet"
    rows = [{"doc_id": d["_id"], "title": d["title"], "text": d["text"]} for d in corpus]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus_path)
    rows = [{"query_id": q["_id"], "text": q["text"]} for q in queries]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.QUERIES), queries_path)
    return corpus_path, queries_path


def test_bm25_indexing_and_search_log_their_progress(scifact_tables, caplog):
    """On main: no line (bm25s' own bars are switched off, show_progress=False)."""
    corpus, queries = scifact_tables
    spec = schema_defaults(BM25)
    folder, facts = indexed(corpus, spec)
    # A batch of 4,096 documents at a time (BM25_BATCH_ROWS), in both passes.
    batches = [(0, SCIFACT_DOCUMENTS), (4096, SCIFACT_DOCUMENTS)]
    finished = [(SCIFACT_DOCUMENTS, SCIFACT_DOCUMENTS)] * 2  # the last update, then the close
    assert progress(caplog, "bm25 tokenise", "documents") == batches + finished
    assert progress(caplog, "bm25 score", "documents") == batches + finished
    assert facts["documents"] == SCIFACT_DOCUMENTS

    texts = contracts.read_table(queries).column("text").to_pylist()
    retriever = BM25Retriever.load(folder, spec)
    caplog.clear()
    hits = retriever.search(texts, 100)
    lines = progress(caplog, "bm25 search", "queries")
    assert lines[0] == (0, 300) and lines[-1] == (300, 300) and len(lines) == 302
    # One query at a time (as its latency is timed): no line, and the same hits.
    caplog.clear()
    for text, (rows, scores) in zip(texts, hits):
        [(alone_rows, alone_scores)] = retriever.search([text], 100)
        np.testing.assert_array_equal(alone_rows, rows)
        np.testing.assert_array_equal(alone_scores, scores)
    assert not caplog.records


def test_ivf_training_is_announced_and_timed(tmp_path, caplog):
    """faiss' k-means gives no progress: a line before and after, with lists and rows. On
    main: neither."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(4000, 16)).astype(np.float32)
    table = pa.table(
        {"id": [f"d{i}" for i in range(len(vectors))], "vector": contracts.vector_array(vectors)},
        schema=contracts.embeddings_schema(16),
    )
    contracts.write_table(table, tmp_path / "corpus.parquet")
    spec = index_spec(type="ivf", nlist=20, target_recall=None)
    facts = index_file(tmp_path / "corpus.parquet", spec, tmp_path / "index.faiss")
    rows = facts["train_rows"]  # every third row: about 64 a list (TRAIN_ROWS_PER_LIST)
    assert rows == 1334
    messages = [record.getMessage() for record in caplog.records]
    train = [line for line in messages if line.startswith("train ")]
    assert train[0] == f"train {tmp_path / 'corpus.parquet'}: 20 lists on {rows} rows"
    assert re.fullmatch(
        rf"train {re.escape(str(tmp_path / 'corpus.parquet'))}: 20 lists on {rows} rows in "
        r"\d+\.\d s",
        train[1],
    )
    # Then the adds, as before.
    assert progress(caplog, f"index {tmp_path / 'corpus.parquet'}", "rows")[-1] == (4000, 4000)


def candidates() -> pd.DataFrame:
    return pd.DataFrame(
        [(q, d, 1.0 / rank) for q in QUERIES for rank, d in enumerate(DOCUMENTS, 1)],
        columns=["query_id", "doc_id", "score"],
    )


def test_bi_encoder_rerank_logs_the_documents_it_encodes(minilm_path, caplog):
    """Four distinct candidates, in batches of 2 (chunks of 3): a line per batch the model
    runs. On main: none. The scores are, bit for bit, the dot products of the vectors of the
    same chunks, encoded without the progress."""
    encoder = Encoder.load(minilm_spec(minilm_path, batch_size=2, chunk_size=3))
    run, _ = rerank(candidates(), QUERIES, DOCUMENTS, BiEncoderScorer(encoder), k=4)
    assert progress(caplog, "rerank: encode documents", "documents") == [
        (0, 4),
        (2, 4),
        (3, 4),  # the first chunk's last document, a batch of its own
        (4, 4),
        (4, 4),
    ]
    texts = list(DOCUMENTS.values())
    vectors = np.concatenate([encoder.encode(texts[:3], ""), encoder.encode(texts[3:], "")])
    by_text = dict(zip(texts, vectors.astype(np.float64)))
    queries = dict(zip(QUERIES, encoder.encode(list(QUERIES.values()), "")))
    for query_id, rows in run.groupby("query_id"):
        matrix = np.stack([by_text[DOCUMENTS[d]] for d in rows["doc_id"]])
        expected = matrix @ queries[query_id].astype(np.float64)
        np.testing.assert_array_equal(rows["score"].to_numpy(), expected)


def test_late_interaction_rerank_logs_the_queries_it_scored(minilm_path, tmp_path, caplog):
    """A tiny ColBERT: one batch of queries (their candidates fit in memory together). On
    main: no line."""
    colbert = build_tiny_colbert(tmp_path / "colbert", minilm_path)
    spec = minilm_spec(colbert, batch_size=4, chunk_size=3, max_seq_length=None)
    encoder = TokenEncoder.load(spec | {"query_length": None, "document_length": None})
    run, _ = rerank(candidates(), QUERIES, DOCUMENTS, MaxSimScorer(encoder), k=4)
    assert progress(caplog, "rerank", "queries") == [(0, 3), (3, 3), (3, 3)]
    alone = MaxSimScorer(encoder)
    for query_id, rows in run.groupby("query_id"):
        texts = [DOCUMENTS[d] for d in rows["doc_id"]]
        np.testing.assert_array_equal(
            rows["score"].to_numpy(), alone.score(QUERIES[query_id], texts)
        )


class FolderHub(http.server.ThreadingHTTPServer):
    """A Hugging Face hub on 127.0.0.1 that holds one model, ``repo_id``, the files of
    ``folder`` at commit ``COMMIT``: the file list, the repository's metadata and each file,
    as huggingface_hub asks for them. Every request is kept."""

    def __init__(self, repo_id: str, folder: Path):
        self.repo_id, self.requests = repo_id, []
        self.files = {
            path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*"))
            if path.is_file()
        }
        super().__init__(("127.0.0.1", 0), FolderHubHandler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class FolderHubHandler(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self.answer(body=False)

    def do_GET(self) -> None:
        self.answer(body=True)

    def answer(self, body: bool) -> None:
        hub: FolderHub = self.server
        hub.requests.append(self.path)
        path = self.path.split("?")[0]
        api = f"/api/models/{hub.repo_id}"
        headers = {"Content-Type": "application/json", "X-Repo-Commit": COMMIT}
        if path.startswith(f"{api}/tree/"):
            content = json.dumps(
                [
                    {"type": "file", "path": name, "size": len(data), "oid": sha1(data)}
                    for name, data in hub.files.items()
                ]
            ).encode()
        elif path.startswith(f"{api}/revision/") or path == api:
            siblings = [{"rfilename": name} for name in hub.files]
            content = json.dumps({"id": hub.repo_id, "sha": COMMIT, "siblings": siblings}).encode()
        elif path.startswith(f"/{hub.repo_id}/resolve/"):
            name = path.split("/resolve/", 1)[1].split("/", 1)[1]
            content = hub.files[name]
            headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{sha1(content)}"'}
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        for header, value in headers.items():
            self.send_header(header, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        if body:
            self.wfile.write(content)

    def log_message(self, *_arguments) -> None:
        pass


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


# A job's logging (scripts/_common.py: irflow's lines at INFO), then the model's resolution.
RESOLVE = """
import json, logging, os, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s %(message)s")
logging.getLogger("irflow").setLevel(logging.INFO)
from irflow.encoding.models import resolve_model
print(json.dumps(resolve_model({"id": "org/tiny", "revision": None})), file=sys.stderr)
"""


def test_a_model_download_logs_its_progress(tmp_path):
    """A model from a hub on 127.0.0.1 (HF_ENDPOINT), online, into an empty cache, in a process
    of its own: the files fetched and the bytes written, as progress lines. On main: no line
    (huggingface_hub's own bars are switched off where stderr is no terminal)."""
    repo = tmp_path / "repo"
    (repo / "1_Pooling").mkdir(parents=True)
    (repo / "config.json").write_text("{}")
    (repo / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (repo / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    weights = np.random.default_rng(0).bytes(1 << 20)
    (repo / "model.safetensors").write_bytes(weights)
    (repo / "model.onnx").write_bytes(weights)  # a copy resolve_model leaves on the hub
    hub = FolderHub("org/tiny", repo)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    env = {name: value for name, value in os.environ.items() if name != "HF_HUB_OFFLINE"}
    env |= {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf"), SECONDS_VARIABLE: "0"}
    try:
        result = subprocess.run(
            [sys.executable, "-c", RESOLVE], capture_output=True, text=True, env=env, check=True
        )
    finally:
        hub.shutdown()
        hub.server_close()
    path, provenance = json.loads(result.stderr.splitlines()[-1])
    assert provenance == {"model": "org/tiny", "revision": COMMIT}
    fetched = {p.relative_to(path).as_posix(): p.read_bytes() for p in Path(path).rglob("*.*")}
    assert fetched == {name: data for name, data in hub.files.items() if name != "model.onnx"}
    lines = [line.removeprefix("irflow.progress ") for line in result.stdout.splitlines()]
    files = progress_of(lines, "download org/tiny: Fetching 4 files", "items")
    assert files[0] == (0, 4) and files[-1] == (4, 4)
    written = [
        line
        for line in lines
        if re.fullmatch(r"download org/tiny: Reconstructing: \S+ B in \S+, +\S+B/s", line)
    ]
    assert written[-1].startswith("download org/tiny: Reconstructing: 1.05M B in ")
