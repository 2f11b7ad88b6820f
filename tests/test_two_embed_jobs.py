"""Two live embed jobs on one output (issue 39, item 1): a job whose Snakemake was killed -9
keeps running, and the rerun after ``--unlock`` starts a second one on the same output.

Two real processes (this one and a child) embed one 200-document corpus in chunks of 20 into
the same file, the second starting once the first has finished a part. Before a job held its
parts folder alone, the first to finish deleted it, the other gathered only the parts it wrote
after that, and its manifest still counted every row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import minilm_spec

from irflow.core import contracts
from irflow.core.errors import InputError
from irflow.core.locks import lock_file
from irflow.core.processes import HOST
from irflow.encoding.embed import embed_file, gather
from irflow.encoding.models import Encoder

DOCUMENTS, CHUNK = 200, 20
TIMEOUT_S = 300

# The second embed job: loads the model, says so, waits until the first job has a finished
# part, embeds, prints the facts it would put in its manifest.
SECOND_JOB = """
import json, sys, time
from pathlib import Path
import torch
from irflow.encoding.embed import embed_file
from irflow.encoding.models import Encoder

spec, corpus, out, ready = json.loads(sys.argv[1]), *map(Path, sys.argv[2:5])
torch.set_num_threads(1)
encoder = Encoder.load(spec)
ready.touch()
while not any(out.with_name(out.name + ".parts").glob("part-*.parquet")):
    time.sleep(0.01)
print(json.dumps(embed_file(encoder, corpus, "corpus", out)))
"""
# A process holding a parts folder, as a job does while it embeds.
HOLDER = """
import sys, time
from pathlib import Path
from irflow.core import locks

with locks.holding(Path(sys.argv[1])):
    Path(sys.argv[2]).touch()
    time.sleep(600)
"""


@pytest.fixture(scope="module")
def encoder(minilm_path):
    return Encoder.load(minilm_spec(minilm_path, chunk_size=CHUNK, batch_size=CHUNK))


def write_corpus(path: Path) -> Path:
    rows = [
        {"doc_id": f"d{i:03d}", "title": f"Topic {i}", "text": f"Document {i} is about {i}."}
        for i in range(DOCUMENTS)
    ]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), path)
    return path


def started(code: str, *arguments, ready: Path) -> subprocess.Popen:
    """A Python process running ``code``, once it has made the file ``ready``."""
    process = subprocess.Popen(
        [sys.executable, "-c", code, *map(str, arguments)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + TIMEOUT_S
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.01)
    return process


def test_two_live_jobs_on_one_output_write_every_row_once(encoder, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.parquet")
    out = tmp_path / "embeddings" / "corpus.parquet"
    parts = out.with_name(out.name + ".parts")
    ready = tmp_path / "second-job-ready"
    second = started(SECOND_JOB, encoder.spec.model_dump_json(), corpus, out, ready, ready=ready)
    first_facts = embed_file(encoder, corpus, "corpus", out)  # this process is the first job
    output, second_log = second.communicate(timeout=TIMEOUT_S)
    assert second.returncode == 0, second_log
    second_facts = json.loads(output.splitlines()[-1])

    written = pq.read_table(out)
    # Every corpus row once, in corpus order; each job's counts are those of the file.
    counted = (first_facts["rows"], second_facts["rows"], written.num_rows)
    assert counted == (DOCUMENTS, DOCUMENTS, DOCUMENTS)
    assert written.column("id").to_pylist() == [f"d{i:03d}" for i in range(DOCUMENTS)]
    # The second job waited for the first, then started from the result the first kept: it
    # encoded nothing again.
    assert f"waiting for {parts}: it is being written by process {os.getpid()} on" in second_log
    assert (second_facts["rows_encoded"], second_facts["rows_resumed"]) == (0, DOCUMENTS)
    assert not parts.exists() and not list(tmp_path.rglob("*.lock"))


def test_a_killed_holder_does_not_hold_up_the_next_job(encoder, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.parquet")
    out = tmp_path / "corpus.embeddings.parquet"
    parts = out.with_name(out.name + ".parts")
    ready = tmp_path / "holding"
    holder = started(HOLDER, parts, ready, ready=ready)
    assert lock_file(parts).read_text().startswith(f"process {holder.pid} on {HOST}, since")
    holder.kill()  # SIGKILL: the kernel drops its lock, the lock file stays
    holder.wait()
    facts = embed_file(encoder, corpus, "corpus", out)
    assert pq.read_metadata(out).num_rows == facts["rows"] == DOCUMENTS
    assert not parts.exists() and not lock_file(parts).exists()


def test_the_gather_refuses_a_shard_short_of_the_rows_its_manifest_counts(encoder, tmp_path):
    """The state the two jobs left behind: a shard file of 40 rows whose manifest counts all of
    its 100. The gather counts the rows in the files, not in the manifests, and names the file."""
    corpus = write_corpus(tmp_path / "corpus.parquet")
    paths, manifests = [], []
    for shard in range(2):
        paths.append(tmp_path / f"{shard}-of-2.parquet")
        facts = embed_file(encoder, corpus, "corpus", paths[-1], shard=(shard, 2))
        manifests.append({"shard": str(shard), **encoder.provenance, **facts})
    whole_shard = pq.read_table(paths[0])
    pq.write_table(whole_shard.slice(60), paths[0])  # its last 40 rows
    out = tmp_path / "corpus.embeddings.parquet"
    with pytest.raises(InputError, match=rf"{paths[0]}: holds 40 rows, its manifest counts 100"):
        gather(paths, manifests, corpus, "corpus", out)
    # Its rows, all there but out of order: the file's ids must be the table's, in order.
    pq.write_table(whole_shard.take(list(range(99, -1, -1))), paths[0])
    with pytest.raises(InputError, match=rf"{out}: .* row 0 is 'd099', the input's 'd000'"):
        gather(paths, manifests, corpus, "corpus", out)
    assert not out.exists()
