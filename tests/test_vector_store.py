"""The vector store shared by every experiment on a machine (issue 51, items 8 and 9):
irflow.core.store and irflow.encoding.vector_store. Before it, each experiment folder encoded
the same corpus with the same model again. Here two experiment folders, each with its own table
of the texts (written with other row groups), embed a 40-document SciFact subset with
all-MiniLM-L6-v2 as the embed job does: the second encodes nothing, and its vectors are the
first's bytes. tests/test_workflow.py runs the README's offline quickstart and then a second
experiment folder with Snakemake. The store's own guarantees are checked on small files: two
processes that need one key at once make it once, a damaged entry is made again, and the
documented commands list and prune it. Every store is a folder of the test's own
(tests/conftest.py turns the user's off).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SCHEMA, minilm_spec, scifact_subset

from irflow.core import contracts
from irflow.core.manifest import Manifest
from irflow.core.processes import HOST
from irflow.core.store import ENTRY, Store, parse_size, store_root
from irflow.encoding.embed import embed_file
from irflow.encoding.models import Encoder
from irflow.encoding.vector_store import stored_or_made

DOCUMENTS, QUERIES = 40, 10


def stored_files(root: Path) -> list[Path]:
    return sorted(root.glob(f"*/*/{ENTRY}"))


# ---- two experiment folders -------------------------------------------------------------


def corpus_table(data: Path, path: Path, row_group_size: int) -> Path:
    """The corpus of a BEIR folder as an experiment's filtered table, written with its own
    row groups: the store keys the texts, not the file's bytes."""
    rows = [
        {"doc_id": doc["_id"], "title": doc.get("title", ""), "text": doc["text"]}
        for doc in map(json.loads, (data / "corpus.jsonl").read_text().splitlines())
    ]
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), path, row_group_size)
    return path


def test_a_second_experiment_folder_encodes_nothing(tmp_path, shared_datasets, minilm_path, caplog):
    """Two experiment folders embed the same SciFact subset with all-MiniLM-L6-v2 through
    the embed job's hook (scripts/embed.py): the second encodes nothing, links the first's
    file, and its manifest (a valid embed record) and log say so."""
    data = scifact_subset(shared_datasets / "scifact", tmp_path / "data", QUERIES, DOCUMENTS)
    spec = minilm_spec(minilm_path, chunk_size=16)
    encoder = Encoder.load(spec)
    store, made = str(tmp_path / "store"), []

    def experiment(folder: Path, row_group_size: int) -> dict:
        texts = corpus_table(data, folder / "filtered/corpus.parquet", row_group_size)
        out = folder / "embeddings/corpus.parquet"
        out.parent.mkdir()
        make = partial(embed_file, encoder, texts, "corpus", out)
        facts = stored_or_made(
            store,
            encoder.spec,
            encoder.provenance,
            texts,
            "corpus",
            out,
            lambda: made.append(folder) or make(),
        )
        manifest = Manifest(folder / "corpus.json", stage="embed", dataset="d", model="m")
        manifest.add(side="corpus", settings=spec, **encoder.provenance, **facts)
        manifest.write()  # checked against the embed stage's record
        return json.loads((folder / "corpus.json").read_text())

    first = experiment(tmp_path / "first", 1000)
    theirs = tmp_path / "first/embeddings/corpus.parquet"
    os.utime(theirs, (1_000_000_000, 1_000_000_000))  # made long ago
    with caplog.at_level(logging.INFO, logger="irflow"):
        second = experiment(tmp_path / "second", 7)

    assert made == [tmp_path / "first"]  # the second made nothing
    assert first["rows_encoded"] == DOCUMENTS and first["vector_store"]["found"] is False
    assert second["rows_encoded"] == 0 and second["rows"] == DOCUMENTS
    assert second["vector_store"]["found"] is True
    assert second["vector_store"]["placed"] == {"vectors.parquet": "copy"}
    assert second["encode_seconds"] == first["encode_seconds"]  # the cost table's throughput
    assert f"the vector store holds these {DOCUMENTS} vectors" in caplog.text
    assert "nothing encoded" in caplog.text
    mine = tmp_path / "second/embeddings/corpus.parquet"
    assert mine.read_bytes() == theirs.read_bytes()
    # The second folder's file is dated now and the first's keeps its date: Snakemake reruns
    # nothing in the first experiment (a hard link, dated for the second, dated both).
    assert theirs.stat().st_mtime == 1_000_000_000 < mine.stat().st_mtime
    assert len(stored_files(tmp_path / "store")) == 1


# ---- the store's guarantees, on small files ------------------------------------------------

KEY = "0123456789abcdef0123456789abcdef"
# One process needing KEY: makes its file (slowly, counting each making) unless stored.
WRITER = """
import json, sys, time
from pathlib import Path
from irflow.core.processes import HOST
from irflow.core.store import Store

root, target, count = map(Path, sys.argv[1:4])

def make():
    with count.open("a") as handle:
        handle.write("made\\n")
    time.sleep(1.0)
    target.write_bytes(bytes(range(256)) * 64)
    return {"rows": 64}

facts, done = Store(root).obtain(sys.argv[4], {"vectors.parquet": target}, make, {})
print(json.dumps(done))
"""


def test_two_experiments_needing_one_key_at_once_make_it_once(tmp_path):
    root, count = tmp_path / "store", tmp_path / "count"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, root, tmp_path / f"out{i}", count, KEY],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    done = [json.loads(writer.communicate(timeout=120)[0]) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0]
    assert count.read_text() == "made\n"  # the second waited, then linked the first's
    assert sorted(d["found"] for d in done) == [False, True]
    assert (tmp_path / "out0").read_bytes() == (tmp_path / "out1").read_bytes()
    assert (tmp_path / "out0").read_bytes() == bytes(range(256)) * 64
    [entry] = Store(root).entries()
    assert entry.key == KEY
    # Nothing left beside it: no lock, no temporary.
    assert sorted(p.name for p in (root / KEY[:2]).iterdir()) == [KEY]


def damage_a_byte(entry: Path) -> None:
    with (entry / "vectors.parquet").open("r+b") as handle:
        handle.seek(100)
        byte = handle.read(1)
        handle.seek(100)
        handle.write(bytes([byte[0] ^ 0xFF]))


DAMAGES = {
    "a flipped byte": (damage_a_byte, "has the MD5"),
    "a truncated file": (lambda e: os.truncate(e / "vectors.parquet", 10), "holds 10 bytes"),
    "a missing file": (lambda e: (e / "vectors.parquet").unlink(), "is missing"),
    "an unreadable record": (lambda e: (e / ENTRY).write_text('{"files": '), "cannot be read"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_entry_is_made_again(tmp_path, damage, caplog):
    store, made = Store(tmp_path / "store"), []
    content = bytes(range(256)) * 64

    def make_into(target: Path):
        def make() -> dict:
            made.append(target)
            target.write_bytes(content)
            return {"rows": 64}

        return make

    first, second = tmp_path / "first.parquet", tmp_path / "second.parquet"
    _, done = store.obtain(KEY, {"vectors.parquet": first}, make_into(first), {})
    first.unlink()  # the experiment folder's link gone: the entry's file is its own
    damage_fn, said = DAMAGES[damage]
    damage_fn(Path(done["entry"]))

    facts, done = store.obtain(KEY, {"vectors.parquet": second}, make_into(second), {})
    assert made == [first, second]
    assert done["found"] is False and said in done["rebuilt"]
    assert said in caplog.text and "made again" in caplog.text
    assert second.read_bytes() == content
    # The entry made again is whole: the next experiment links it.
    third = tmp_path / "third.parquet"
    facts, done = store.obtain(KEY, {"vectors.parquet": third}, make_into(third), {})
    assert done["found"] is True and third.read_bytes() == content and len(made) == 2


def store_command(root: Path, *words: str) -> str:
    """The documented command (docs/vector-store.md) on the store at ``root``."""
    done = subprocess.run(
        [sys.executable, "-m", "irflow.core.store", "--root", str(root), *words],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_store_is_listed_and_pruned_by_age_and_size(tmp_path):
    root, now = tmp_path / "store", time.time()
    store = Store(root)
    # Three entries of 1, 2 and 3 MiB, last used 30, 5 and 0 days ago.
    keys = {}
    for days, mib in ((30, 1), (5, 2), (0, 3)):
        key = f"{days:02d}{mib:02d}" + "ab" * 14
        target = tmp_path / f"{key}.parquet"
        target.write_bytes(b"x" * (mib << 20))
        store.obtain(key, {"v": target}, dict, {"days": days})
        os.utime(store.folder(key) / ENTRY, (now - days * 86400, now - days * 86400))
        keys[days] = key
    # The temporaries of a writer killed on this host and of one on another host.
    dead = root / keys[0][:2] / f".{keys[0]}.{HOST}.{2**22 + 1}.1.tmp"
    elsewhere = root / keys[0][:2] / f".{keys[0]}.otherhost.{2**22 + 1}.1.tmp"
    dead.mkdir()
    elsewhere.mkdir()

    listed = store_command(root, "list")
    lines = listed.splitlines()
    assert [line.split()[0] for line in lines[:3]] == [keys[30], keys[5], keys[0]]  # oldest first
    assert "days=30" in lines[0] and "1.0M" in lines[0]
    assert lines[-1].startswith("3 entries, 6.0M")

    assert "would remove" in store_command(root, "prune", "--older-than", "10", "--dry-run")
    assert len(store.entries()) == 3
    printed = store_command(root, "prune", "--older-than", "10")
    assert keys[30] in printed and [e.key for e in store.entries()] == [keys[5], keys[0]]

    store_command(root, "prune", "--max-size", "4M")  # 5 MiB left: the older one goes
    assert [e.key for e in store.entries()] == [keys[0]]
    assert not dead.exists() and elsewhere.exists()  # another host's writer may be alive


def test_sizes_and_the_store_folder(tmp_path, monkeypatch):
    assert parse_size("500M") == 500 << 20 and parse_size("1.5G") == 3 << 29
    assert parse_size("20GiB") == 20 << 30 and parse_size("4096") == 4096
    assert store_root(str(tmp_path)) == tmp_path
    assert store_root(False) is None
    monkeypatch.setenv("IRFLOW_VECTOR_STORE", str(tmp_path / "env"))
    assert store_root(None) == store_root(True) == tmp_path / "env"
    monkeypatch.setenv("IRFLOW_VECTOR_STORE", "off")
    assert store_root(None) is None
    monkeypatch.delenv("IRFLOW_VECTOR_STORE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert store_root(None) == tmp_path / "cache" / "irflow" / "vectors"


def test_the_config_key_is_checked(tmp_path):
    from irflow.core.errors import ConfigError
    from irflow.workflow.config import validate_config

    config = {"datasets": {"d": {"source": {"type": "beir", "name": "scifact"}}}}
    config["retrievers"] = {"bm25": {"type": "bm25"}}
    assert validate_config(dict(config), SCHEMA)["vector_store"] is None
    with pytest.raises(ConfigError, match="vector_store"):
        validate_config(config | {"vector_store": 3}, SCHEMA)
