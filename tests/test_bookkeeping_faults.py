"""irflow's bookkeeping never switches itself off (issue 49): each fault of its own records, on
a small real run, ends the next run with an error naming the file and the fix, or is repaired
and what it guards redone; never exit 0 with the old numbers.

One default-target run (SciFact's first 20 test queries over 200 documents, BM25) is made
once; each test works on a copy of it (``copy_run``), with the config file outside the copies
so that each copy is the same experiment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import (
    TINY_CORPUS,
    TINY_QRELS,
    TINY_QUERIES,
    Done,
    environment,
    fill,
    mount_or_skip,
    run_command,
    scifact_subset,
    snakemake_command,
    write_beir,
)
from test_parquet_integrity import flip_bit_in_data_page

from irflow.core.fingerprint import folder_md5
from irflow.data.layouts import dataset_fingerprint

pytestmark = pytest.mark.e2e

SCORES = "results/scores/sub/bm25.parquet"
FILES_RECORD = "results/settings/download/sub.files.json"
QRELS = "sub/qrels/test.tsv"

# Snakemake, run by this Python; IRFLOW_TEST_RAISE="<rule>.<function>" makes that input function
# raise, IRFLOW_TEST_CALLED=<file> lists every input function called, one a line, and
# IRFLOW_TEST_HOLD=<file> holds the run in its first input function (after irflow's claim of the
# folder) until <file> exists, having made <file>.held, by wrapping each before irflow guards it
# (irflow.workflow.guard.guarded).
SNAKEMAKE = """
import functools, os, sys, time
from pathlib import Path
import irflow.workflow.guard as guard
original = guard.guarded
def guarded(rule_name, function, *before):
    key = f"{rule_name}.{function.__qualname__}"
    @functools.wraps(function)
    def inner(*args, **kwargs):
        if os.environ.get("IRFLOW_TEST_CALLED"):
            with open(os.environ["IRFLOW_TEST_CALLED"], "a") as called:
                called.write(key + "\\n")
        if os.environ.get("IRFLOW_TEST_RAISE") == key:
            raise RuntimeError("injected failure")
        if hold := os.environ.get("IRFLOW_TEST_HOLD"):
            Path(hold + ".held").touch()
            while not Path(hold).exists():
                time.sleep(0.05)
        return function(*args, **kwargs)
    return original(rule_name, inner, *before)
guard.guarded = guarded
from snakemake.cli import main
sys.argv[0] = "snakemake"
main()
"""


def command(workdir: Path, *arguments: str) -> list[str]:
    """Snakemake's command line in ``workdir``, with the config file beside it."""
    configfile = ["--configfile", str(workdir.parent / "config.yaml")]
    return snakemake_command(
        workdir, *arguments, *configfile, program=[sys.executable, "-c", SNAKEMAKE]
    )


def snakemake(workdir: Path, *arguments: str, **variables) -> Done:
    return run_command(command(workdir, *arguments), env=environment(**variables), check=False)


def ran(done: subprocess.CompletedProcess) -> set[str]:
    """The rules of the jobs a Snakemake call ran."""
    return set(re.findall(r"^(?:local)?rule (\w+):$", done.stdout + done.stderr, re.MULTILINE))


def ndcg10(workdir: Path) -> float:
    scores = pd.read_parquet(workdir / SCORES)
    return round(scores.loc[scores["metric"] == "ndcg_cut_10", "value"].mean(), 4)


@pytest.fixture(scope="module")
def made(shared_datasets, tmp_path_factory) -> Path:
    """The completed run, its config beside it (``../config.yaml``): the dataset's path is
    relative, so that a copy reads its own copy of the dataset."""
    root = tmp_path_factory.mktemp("bookkeeping")
    workdir = root / "made"
    scifact_subset(shared_datasets / "scifact", workdir / "sub")
    config = {
        "offline": True,
        "datasets": {"sub": {"source": {"type": "path", "path": "sub"}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    done = snakemake(workdir)
    assert done.returncode == 0, done.stderr
    return workdir


@pytest.fixture
def workdir(made) -> Iterator[Path]:
    """A copy of the completed run, its files' times kept. Its dataset files have new inodes
    and change times, so its next run hashes them against their checksum (and finds any edit
    a test made, with its modification time kept or not) and rebuilds the database."""
    copy = made.parent / f"copy-{os.urandom(4).hex()}"
    shutil.copytree(made, copy, symlinks=True)
    yield copy
    shutil.rmtree(copy, ignore_errors=True)


@pytest.fixture
def settled(workdir) -> Path:
    """The copy after one run: up to date, the database included."""
    done = snakemake(workdir)
    assert done.returncode == 0 and not ran(done) - {"database"}, done.stderr
    return workdir


def edit_qrels_keeping_time(workdir: Path, keep: int) -> None:
    """Cut the qrels to their first ``keep`` rows, the file's modification time kept (as
    ``touch -r`` or ``cp -p`` leave it)."""
    qrels = workdir / QRELS
    kept = qrels.stat()
    lines = qrels.read_text().splitlines()
    qrels.write_text("\n".join(lines[: keep + 1]) + "\n")
    os.utime(qrels, ns=(kept.st_atime_ns, kept.st_mtime_ns))


def scored_queries(workdir: Path) -> int:
    return pd.read_parquet(workdir / SCORES)["query_id"].nunique()


def test_every_input_function_that_raises_ends_the_run_naming_it(workdir):
    """On a complete results folder, each input function the run calls raises in turn (the
    settings stamp, the same function in every rule with params, in one of them): main dropped
    the job and everything after it and said "Nothing to be done" with exit 0."""
    called = workdir.parent / f"{workdir.name}-called.txt"
    done = snakemake(workdir, IRFLOW_TEST_CALLED=str(called))
    assert done.returncode == 0, done.stderr
    functions = sorted(set(called.read_text().split()))
    rules = {function.split(".")[0] for function in functions}
    assert {"download", "ingest", "filter", "retrieve_bm25", "score", "database", "all"} <= rules
    stamps = [function for function in functions if ".settings_stamp." in function]
    assert len(stamps) >= 14, stamps  # every rule with params, of which one raises below
    for function in [function for function in functions if function not in stamps[1:]]:
        rule, name = function.split(".", 1)
        done = snakemake(workdir, IRFLOW_TEST_RAISE=function)
        assert done.returncode != 0, (function, done.stdout + done.stderr)
        assert f"planning rule {rule}" in done.stderr, (function, done.stderr)
        assert f"input function {name}: RuntimeError: injected failure" in done.stderr


def rerun_sees_the_cut_qrels(workdir: Path, queries: int) -> None:
    """The next run reruns the dataset's download and everything after it, and scores the
    queries the cut qrels judge."""
    done = snakemake(workdir)
    assert done.returncode == 0, done.stderr
    assert {"download", "ingest", "filter", "retrieve_bm25", "score"} <= ran(done)
    assert scored_queries(workdir) == queries


def judged_queries(workdir: Path, rows: int) -> int:
    lines = (workdir / QRELS).read_text().splitlines()[1 : rows + 1]
    return len({line.split("\t")[0] for line in lines})


@pytest.fixture
def settings_on_a_full_disk(workdir, small_disk) -> Path:
    """The copy's results/settings on a real 1 MiB file system, filled up."""
    settings = workdir / "results" / "settings"
    shutil.copytree(settings, small_disk, dirs_exist_ok=True, copy_function=shutil.copy2)
    shutil.rmtree(settings)
    settings.symlink_to(small_disk)
    fill(small_disk, leave=0)
    return small_disk


def test_a_full_disk_under_results_stops_the_run_and_the_edit_is_seen_after(
    workdir, settings_on_a_full_disk
):
    """main: the record of the files' status could not be written, the download job left
    the graph and the run said "Nothing to be done" (exit 0), the old qrels scored."""
    before = scored_queries(workdir)
    edit_qrels_keeping_time(workdir, keep=12)
    queries = judged_queries(workdir, 12)
    assert queries < before
    done = snakemake(workdir)
    assert done.returncode != 0, done.stdout + done.stderr
    assert f"cannot write {FILES_RECORD} (No space left on device)" in done.stderr
    assert "planning rule download (dataset=sub)" in done.stderr
    (settings_on_a_full_disk / "filler").unlink()
    rerun_sees_the_cut_qrels(workdir, queries)


@pytest.fixture
def read_only_settings(workdir) -> Iterator[Path]:
    """The copy's results/settings, a real read-only bind mount of itself."""
    settings = workdir / "results" / "settings"
    mount_or_skip(["mount", "--bind", settings, settings], "a bind mount")
    mount_or_skip(["mount", "-o", "remount,ro,bind", settings], "a bind mount")
    try:
        yield settings
    finally:
        subprocess.run(["umount", settings], check=False)


def test_a_read_only_results_folder_stops_the_run_and_the_edit_is_seen_after(
    workdir, read_only_settings
):
    """main: as on a full disk, exit 0 and the old qrels scored."""
    edit_qrels_keeping_time(workdir, keep=12)
    done = snakemake(workdir)
    assert done.returncode != 0, done.stdout + done.stderr
    assert f"cannot write {FILES_RECORD} (Read-only file system)" in done.stderr
    subprocess.run(["umount", read_only_settings], check=True)
    rerun_sees_the_cut_qrels(workdir, judged_queries(workdir, 12))


DAMAGES = {
    "truncated files record": (FILES_RECORD, lambda data: data[: len(data) // 2]),
    "download stamp not UTF-8": ("results/settings/download/sub.json", lambda data: b"\xff" + data),
    "retrieve stamp not UTF-8": (
        "results/settings/retrieve_bm25/sub/bm25.json",
        lambda data: data[:10] + b"\xfe\xff" + data[10:],
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_bookkeeping_is_rebuilt_and_an_edit_still_seen(workdir, damage):
    """main: the damaged file raised in an input function, the job left the graph, exit 0
    with "Nothing to be done" and the old qrels scored, and so on every later run."""
    path, damaged = DAMAGES[damage]
    (workdir / path).write_bytes(damaged((workdir / path).read_bytes()))
    edit_qrels_keeping_time(workdir, keep=12)
    rerun_sees_the_cut_qrels(workdir, judged_queries(workdir, 12))
    assert json.loads((workdir / path).read_text())  # rebuilt
    again = snakemake(workdir, "--dry-run")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_the_same_files_copied_anew_rerun_nothing(settled):
    """A dataset copied anew (``cp`` without -p, provisioned again: new modification times, same
    bytes) reran its download job and everything after it by Snakemake's own rule; its checksum
    decides now (an edit is found by it, as the tests of an edit that keeps the time show).
    Snakemake compares a file up to ``--max-checksum-file-size`` (1 MB) by its own recorded
    checksum: SciFact's zipped corpus (2.8 MB) is past it, and so, with the limit at 1 byte, is
    this subset's qrels."""
    qrels = settled / QRELS
    scores = (settled / SCORES).stat().st_mtime_ns
    copy = qrels.with_name("copy.tsv")
    shutil.copyfile(qrels, copy)  # new modification time, same bytes
    os.replace(copy, qrels)
    assert qrels.stat().st_mtime_ns > scores
    done = snakemake(settled, "--max-checksum-file-size", "1")
    assert done.returncode == 0 and not ran(done), done.stdout + done.stderr
    assert (settled / SCORES).stat().st_mtime_ns == scores


def test_a_second_run_in_the_folder_is_told_which_run_holds_it(settled, tmp_path):
    """main: the second of two runs started at once planned beside the first, then met
    Snakemake's lock message ("Directory cannot be locked ... --unlock") while the first ran,
    or, when the first had not yet locked, both ran. The first run is held as it plans, so that
    it still runs, however loaded the machine, while the others start (unheld, a small run
    could end first)."""
    workdir, hold = settled, tmp_path / "release"
    first = subprocess.Popen(
        command(workdir, "--forceall"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment(IRFLOW_TEST_HOLD=str(hold)),
        start_new_session=True,
    )
    try:
        while not Path(f"{hold}.held").exists():
            assert first.poll() is None, "the first run ended before the second started"
            time.sleep(0.05)
        second = snakemake(workdir)
        # A dry run is not refused but told of the run at work (Snakemake stops a dry run
        # when a run replaces a file it plans from: irflow.workflow.interrupted).
        planned = snakemake(workdir, "--dry-run")
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert second.returncode != 0
    assert f"another run works in this folder ({workdir}): process {first.pid} on " in (
        second.stderr
    )
    assert f"stop it (kill {first.pid})" in second.stderr
    assert "Directory cannot be locked" not in second.stderr
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "another run works in this folder" not in planned.stderr
    assert f"beside a run at work in this folder (process {first.pid} on " in planned.stderr


def test_a_model_folder_copied_anew_reruns_nothing_and_an_edit_reruns_its_embed_job(
    tmp_path, minilm_path
):
    """Two models read from folders: one offline from its local_copy (no files_md5 pin, the
    Hugging Face cache empty), one whose id is the folder (its files are the embed job's
    inputs). The id folder copied anew (new modification times, same bytes) reran its embed
    job by Snakemake's own rule; it reruns nothing now. An edit reruns both: main ran nothing
    after the local copy's pooling was changed, the old vectors kept."""
    copy, folder = tmp_path / "minilm", tmp_path / "minilm-folder"
    shutil.copytree(minilm_path, copy)
    shutil.copytree(minilm_path, folder)
    data = write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = {
        "offline": True,
        "datasets": {"tiny": {"source": {"type": "path", "path": str(data)}}},
        "models": {
            "minilm": {
                "id": "sentence-transformers/all-MiniLM-L6-v2",
                "local_copy": {"path": str(copy)},
                "batch_size": 4,
            },
            "minilm-folder": {"id": str(folder), "batch_size": 4},
        },
        "retrievers": {
            "minilm": {"type": "dense", "model": "minilm"},
            "minilm-folder": {"type": "dense", "model": "minilm-folder"},
        },
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    workdir = tmp_path / "run"
    targets = [f"results/embeddings/tiny/{model}/corpus.parquet" for model in config["models"]]
    hub = {"HF_HOME": str(tmp_path / "empty-hf-home")}
    done = snakemake(workdir, *targets, **hub)
    assert done.returncode == 0 and "embed" in ran(done), done.stderr
    before = [pd.read_parquet(workdir / target) for target in targets]
    shutil.rmtree(folder)
    shutil.copytree(copy, folder, copy_function=shutil.copyfile)  # new times, same bytes
    assert (folder / "config.json").stat().st_mtime > (workdir / targets[1]).stat().st_mtime
    done = snakemake(workdir, *targets, **hub)
    assert done.returncode == 0 and not ran(done), done.stdout + done.stderr
    for model in copy, folder:
        pooling = model / "1_Pooling" / "config.json"
        settings = json.loads(pooling.read_text())
        settings |= {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}
        pooling.write_text(json.dumps(settings))
    done = snakemake(workdir, *targets, **hub)
    embeds = re.findall(r"^(?:local)?rule embed:$", done.stdout + done.stderr, re.MULTILINE)
    assert done.returncode == 0 and len(embeds) == 2, done.stdout + done.stderr
    for model, target, old in zip(config["models"], targets, before):
        after = pd.read_parquet(workdir / target)
        assert list(after["id"]) == list(old["id"])
        moved = [abs(a - b).max() for a, b in zip(after["vector"], old["vector"])]
        assert min(moved) > 1e-3, model
        manifest = workdir / f"results/manifests/embed/tiny/{model}/corpus.json"
        assert json.loads(manifest.read_text())["files_md5"] == folder_md5(copy)


def test_an_empty_corpus_is_refused_naming_the_file(workdir):
    """main: BM25 scored the empty corpus 0 (nDCG@10 0.0000) with exit 0, and the Average
    took it in; the dense path refused it only when it embedded."""
    (workdir / "sub" / "corpus.jsonl").write_text("")
    done = snakemake(workdir)
    assert done.returncode != 0, done.stdout + done.stderr
    log = (workdir / "results/logs/filter/sub.log").read_text()
    assert (
        "results/datasets/sub/corpus.parquet: the corpus holds no documents, so there is "
        "nothing to retrieve" in log
    )
    assert ndcg10(workdir) > 0.5  # the last good scores kept


def test_verify_and_the_database_build_find_a_flipped_bit_in_a_scores_file(settled):
    """main: no verify command, and the database rebuilt over the damaged file without a word
    (DuckDB's views verify no checksum), its per_query mean moved."""
    workdir = settled
    scores = workdir / SCORES
    kept = scores.stat()
    flip_bit_in_data_page(scores, "value")
    os.utime(scores, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert "Nothing to be done" in (done := snakemake(workdir)).stdout + done.stderr
    done = snakemake(workdir, "verify")
    assert done.returncode != 0
    damaged = f"{SCORES} is damaged"
    assert damaged in done.stderr and f"--forcerun={SCORES}" in done.stderr
    log = (workdir / "results/logs/verify.log").read_text()
    assert log.count(" is damaged") == 1 and damaged in log
    done = snakemake(workdir, "--forcerun", "database")
    assert done.returncode != 0
    assert damaged in (workdir / "results/logs/database.log").read_text()
    # The command the error gives rebuilds it, and verify then passes.
    assert snakemake(workdir, f"--forcerun={SCORES}").returncode == 0
    done = snakemake(workdir, "verify")
    assert done.returncode == 0, done.stderr
    assert re.search(r"\d+ files under results/ read back whole", done.stderr)


def test_a_truncated_manifest_stops_the_database_build(workdir):
    """main: the database was rebuilt, exit 0; ``SELECT ... FROM manifests`` then failed with
    "Malformed JSON"."""
    manifest = workdir / "results/manifests/ingest/sub.json"  # read by the database alone
    manifest.write_bytes(manifest.read_bytes()[:100])
    done = snakemake(workdir)
    assert done.returncode != 0, done.stdout + done.stderr
    log = (workdir / "results/logs/database.log").read_text()
    named = "results/manifests/ingest/sub.json is damaged (not JSON"
    assert named in log and "--forcerun=results/manifests/ingest/sub.json" in log
    done = snakemake(workdir, "--forcerun=results/manifests/ingest/sub.json")
    assert done.returncode == 0 and {"ingest", "database"} <= ran(done), done.stderr
    assert json.loads(manifest.read_text())["stage"] == "ingest"


def test_a_truncated_experiment_record_is_named_with_the_fix(workdir):
    """main: ``JSONDecodeError in file "Snakefile", line 54`` and a traceback."""
    record = workdir / "results/experiment.json"
    record.write_bytes(record.read_bytes()[:40])
    done = snakemake(workdir)
    assert done.returncode != 0
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("ConfigError: results/experiment.json is damaged (JSONDecodeError")
    )
    assert "delete it (rm results/experiment.json) and run the same command again" in done.stderr
    record.unlink()
    assert snakemake(workdir).returncode == 0
    assert json.loads(record.read_text())["config_files"] == [str(workdir.parent / "config.yaml")]


def test_a_run_killed_while_it_compares_a_datasets_files_loses_no_edit(tmp_path):
    """A real SIGKILL as soon as the new status of the dataset's files is recorded. main
    recorded it first and hashed second (100 MB here): the run killed while hashing left the
    edit recorded as seen, and every later run said "Nothing to be done"."""
    data = write_beir(tmp_path / "run" / "big", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    padding = {"_id": "padding", "title": "", "text": "x" * 100_000_000}
    with (data / "corpus.jsonl").open("a") as corpus:
        corpus.write(json.dumps(padding) + "\n")
    config = {
        "offline": True,
        "datasets": {"big": {"source": {"type": "path", "path": "big"}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    workdir, source = tmp_path / "run", "results/datasets/big/source.json"
    assert snakemake(workdir, source).returncode == 0
    record = workdir / "results/settings/download/big.files.json"
    seen = record.stat().st_mtime_ns
    qrels = data / "qrels" / "test.tsv"
    kept = qrels.stat()
    qrels.write_text(qrels.read_text().replace("q2\td1\t0", "q2\td1\t1"))
    os.utime(qrels, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    run = subprocess.Popen(
        command(workdir, source),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment(),
        start_new_session=True,
    )
    try:
        while record.stat().st_mtime_ns == seen and run.poll() is None:
            time.sleep(0.002)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert record.stat().st_mtime_ns != seen, "the run ended before it recorded the status"
    planned = snakemake(workdir, source, "--dry-run")
    checksum = json.loads((workdir / source).read_text())["checksum"]
    assert "download" in ran(planned) or checksum == dataset_fingerprint(data, "test")["checksum"]
