"""Killed anywhere, resumed: a download SIGKILLed mid-file and an embed shard SIGKILLed
mid-shard; the rerun resumes both and gives an uninterrupted run's results, with no duplicate
rows and no partial file left behind.

The dataset is a 100-document SciFact subset served as a zip by a slow loopback server; its
documents are embedded in two shards of four chunks each.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import psutil
import pyarrow.parquet as pq
import pytest
from conftest import scifact_subset, snakemake_command
from loopback_http import serving

from irflow.core.progress import SECONDS_VARIABLE as PROGRESS_SECONDS
from irflow.data.download_cache import cached_file_name

pytestmark = pytest.mark.e2e

TARGETS = ["results/runs/sub/bm25.parquet", "results/runs/sub/minilm.parquet"]
DOCUMENTS, CHUNK = 100, 13  # a shard of 50 rows in four chunks (13, 13, 13, 11)
SHARD_PARTS = "results/embeddings/sub/minilm/corpus.shards/0-of-2.parquet.parts"
SHARD_LOG = "results/logs/embed/sub/minilm/corpus.shards/0-of-2.log"
RUN_TIMEOUT = 600
# Online, for the loopback download (HF_HUB_OFFLINE would make irflow offline too); the model
# is a local folder, so nothing else is fetched.
ONLINE_ENVIRONMENT = {
    name: value
    for name, value in os.environ.items()
    if name not in ("HF_HUB_OFFLINE", "IRFLOW_OFFLINE")
} | {"no_proxy": "127.0.0.1", PROGRESS_SECONDS: "0"}  # a progress line per batch


def zipped(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, f"sub/{path.relative_to(folder).as_posix()}")
    return buffer.getvalue()


def start(workdir: Path, config: dict) -> subprocess.Popen:
    workdir.mkdir(exist_ok=True)
    return subprocess.Popen(
        snakemake_command(workdir, *TARGETS, config=config),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ONLINE_ENVIRONMENT,
    )


def finish(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=RUN_TIMEOUT)
    assert process.returncode == 0, output
    return output


def kill_job_when(process: subprocess.Popen, script: str, ready: Callable[[], bool]) -> str:
    """SIGKILL the job running ``script`` (Snakemake runs it as .snakemake/scripts/<tmp>.
    <script>) once ``ready()``; returns Snakemake's output, which must report the failure."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while not ready():
        assert process.poll() is None, f"finished before the kill:\n{process.communicate()[0]}"
        assert time.monotonic() < deadline, "the job never reached the point of the kill"
        time.sleep(0.02)
    jobs = [
        child
        for child in psutil.Process(process.pid).children(recursive=True)
        if any(part.endswith(f".{script}") for part in child.cmdline())
    ]
    assert jobs, f"no process runs {script}"
    for job in jobs:
        job.kill()
    output, _ = process.communicate(timeout=RUN_TIMEOUT)
    assert process.returncode != 0, output
    return output


def leftovers(workdir: Path) -> list[str]:
    """Partial downloads, unfinished embedding parts and half-written temporary files."""
    return sorted(
        str(path.relative_to(workdir))
        for pattern in ("*.part", "*.parts", ".*.tmp")
        for path in workdir.rglob(pattern)
        if ".snakemake" not in path.parts
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shared_datasets, minilm_path):
    root = tmp_path_factory.mktemp("kill-resume")
    archive = zipped(scifact_subset(shared_datasets / "scifact", root / "data", 20, DOCUMENTS))
    with serving() as server:
        server.files["/sub.zip"] = archive
        config = {
            "download_dir": "downloads",
            "datasets": {
                "sub": {
                    "source": {
                        "type": "url",
                        "url": server.url("/sub.zip"),
                        "md5": hashlib.md5(archive).hexdigest(),
                    },
                    "embed_shards": 2,
                }
            },
            "models": {
                "minilm": {"id": str(minilm_path), "batch_size": CHUNK, "chunk_size": CHUNK}
            },
            "retrievers": {
                "bm25": {"type": "bm25"},
                "minilm": {"type": "dense", "model": "minilm"},
            },
        }
        finish(start(root / "uninterrupted", config))
        # The next run, the dataset now in the download cache, which its download job fetched.
        again = finish(start(root / "uninterrupted", config))

        server.chunk_delay_s = 4 / (len(archive) / 2048)  # about 4 s for the whole file
        killed = root / "killed"
        zip_name = cached_file_name(server.url("/sub.zip"), "sub.zip")
        partial = killed / "downloads" / f"{zip_name}.part"
        download_kill = kill_job_when(
            start(killed, config),
            "download.py",
            lambda: partial.exists() and partial.stat().st_size > len(archive) // 4,
        )
        part_bytes = partial.stat().st_size
        server.chunk_delay_s = 0
        parts = killed / SHARD_PARTS
        embed_kill = kill_job_when(
            start(killed, config),
            "embed.py",
            lambda: parts.is_dir() and any(parts.glob("part-*.parquet")),
        )
        parts_left = sorted(path.name for path in parts.glob("part-*.parquet"))
        killed_shard_log = (killed / SHARD_LOG).read_text()  # before the rerun rewrites it
        # The rerun that resumed the download (the next one finds it done).
        download_log = (killed / "results/logs/download/sub.log").read_text()
        finish(start(killed, config))
        ranges = [r for path, r in server.requests if path == "/sub.zip"]
    return {
        "root": root,
        "archive_bytes": len(archive),
        "part_bytes": part_bytes,
        "ranges": ranges,
        "parts_left": parts_left,
        "download_log": download_log,
        "killed_shard_log": killed_shard_log,
        "outputs": (download_kill, embed_kill),
        "again": again,
    }


def test_the_run_after_a_download_into_the_cache_runs_nothing(runs):
    """The download job fetched the dataset into the download cache, so Snakemake recorded no
    input files for it; the next run listed the cache's files as its inputs and reran every job
    of the dataset once ("Set of input files has changed since last execution")."""
    assert "Nothing to be done" in runs["again"], runs["again"][-3000:]


def test_the_download_resumed_from_the_bytes_it_had(runs):
    assert 0 < runs["part_bytes"] < runs["archive_bytes"]
    # The uninterrupted run, the killed one, then the rerun asking for the rest.
    assert runs["ranges"] == [None, None, f"bytes={runs['part_bytes']}-"]
    log = runs["download_log"]
    assert "resuming http://127.0.0.1:" in log and f"at byte {runs['part_bytes']}" in log


def test_the_killed_shard_resumed_from_its_finished_parts(runs):
    assert 1 <= len(runs["parts_left"]) < 4  # killed mid-shard
    shard = runs["root"] / "killed/results/manifests/embed/sub/minilm/corpus.shards/0-of-2.json"
    facts = json.loads(shard.read_text())
    shard_rows = DOCUMENTS // 2
    assert facts["rows"] == shard_rows
    assert facts["rows_resumed"] == CHUNK * len(runs["parts_left"])
    assert facts["rows_encoded"] == shard_rows - facts["rows_resumed"]


def test_the_killed_shards_log_says_how_far_it_got(runs):
    """Each batch the model encoded is a progress line (IRFLOW_PROGRESS_SECONDS=0 here): rows
    done of the shard's, the share, the rate and the time left, up to the kill."""
    shard_rows = DOCUMENTS // 2
    lines = re.findall(
        rf"embed corpus: (\d+)/{shard_rows} rows \(\d+ %\) in \S+, +(\S+?)rows/s, \S+ left",
        runs["killed_shard_log"],
    )
    done = [int(rows) for rows, _ in lines]
    # From nothing, a batch (CHUNK rows) at a time, past the parts it finished, never to the end.
    assert done[0] == 0 and done[1:] == [CHUNK * n for n in range(1, len(done))]
    assert CHUNK * len(runs["parts_left"]) <= done[-1] < shard_rows
    assert all(float(rate) > 0 for _, rate in lines[1:])


def test_results_equal_the_uninterrupted_run(runs):
    for system in ("bm25", "minilm"):
        killed = pd.read_parquet(runs["root"] / "killed" / TARGETS[0].replace("bm25", system))
        clean = pd.read_parquet(runs["root"] / "uninterrupted" / TARGETS[0].replace("bm25", system))
        pd.testing.assert_frame_equal(killed.drop(columns="score"), clean.drop(columns="score"))
        assert (killed["score"] - clean["score"]).abs().max() < 1e-6
    embeddings = pd.read_parquet(
        runs["root"] / "killed/results/embeddings/sub/minilm/corpus.parquet"
    )
    assert len(embeddings) == DOCUMENTS and embeddings["id"].is_unique


def test_nothing_partial_is_left(runs):
    killed = runs["root"] / "killed"
    assert leftovers(killed) == []
    for path in (killed / "results").rglob("*.parquet"):
        pq.read_metadata(path)  # a complete file, footer and all
    # The shards were temporary: only the gathered file remains.
    assert not list((killed / "results/embeddings").rglob("*-of-2.parquet"))
