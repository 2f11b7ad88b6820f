"""End to end: the most common first run, one system on one dataset, from the official source
(read offline from ../shared) to the report, after the README's quickstart command scored BM25
on the same data in the same folder. Apart from test_workflow's shared run, so that it runs on
an xdist worker beside the other end-to-end files."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import matplotlib.image
import pandas as pd
import psutil
import pytest
import yaml
from conftest import CORES, REPO, REPORT_PLOTS, SNAKEMAKE, measured, official_scifact_config
from test_interrupted import killed_writing, writing
from test_readme import (
    QUICKSTART_TARGET,
    link_project,
    quickstart_bm25_command,
    run_in_copy,
)
from test_workflow import read_result

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def quickstart_folder(tmp_path_factory, shared_datasets):
    """A copy of the project (tests/test_readme.py) where the README's quickstart command, as
    written with one target and its offline override, has scored BM25 on SciFact for real."""
    folder = tmp_path_factory.mktemp("quickstart")
    run_in_copy(folder, quickstart_bm25_command(shared_datasets))
    return folder


def snakemake(folder: Path, config: dict, *args: str) -> str:
    """Snakemake on ``config`` in the project copy ``folder``. The config keeps its keys' order,
    the quickstart's (url before md5): Snakemake compares a job's params as written, so sorted
    keys would rerun the download, and every job after it, for nothing."""
    path = folder / "first_run.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return run_in_copy(folder, [*SNAKEMAKE, "--configfile", str(path), *args])


def test_the_quickstart_command_scores_bm25_on_scifact(quickstart_folder):
    """The cheap half of the quickstart, run for real, gives the published SciFact number
    (CONTRIBUTING.md, "The README's quickstart test")."""
    scores = pd.read_parquet(quickstart_folder / QUICKSTART_TARGET)
    ndcg = scores.loc[scores["metric"] == "ndcg_cut_10", "value"].mean()
    assert ndcg == pytest.approx(measured("scifact", "BM25", "ndcg_cut_10"), abs=5e-5)


def jobs_running(pid: int, script: str) -> list[psutil.Process]:
    """The live processes started by ``pid`` that run ``script`` (Snakemake runs a rule's
    script as .snakemake/scripts/<tmp>.<script>)."""
    jobs = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if any(part.endswith(f".{script}") for part in child.cmdline()):
                jobs.append(child)
        except psutil.Error:  # ended meanwhile
            continue
    return jobs


def kill_snakemake_while(command: list[str], folder: Path, script: str) -> None:
    """Run ``command`` in ``folder``, SIGKILL Snakemake alone while a job runs ``script``, and
    wait for that job, which outlives it: its outputs are written, but Snakemake never
    recorded them as finished."""
    run = subprocess.Popen(
        command,
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
    )
    deadline = time.monotonic() + 300
    while not (jobs := jobs_running(run.pid, script)):
        assert run.poll() is None and time.monotonic() < deadline, f"no job ran {script}"
        time.sleep(0.05)
    run.kill()
    run.wait()
    psutil.wait_procs(jobs, timeout=300)


def test_the_quickstart_command_resumes_a_run_killed_with_sigkill(
    quickstart_folder, shared_datasets, tmp_path
):
    """Snakemake SIGKILLed while its job runs leaves its lock and the job's outputs marked
    incomplete: the README's command, unchanged, resumes (no --unlock, no
    --rerun-incomplete), removes the temporary files of killed processes, keeps a live
    process's, and scores as the uninterrupted quickstart run did. The run starts from a copy
    of the quickstart's results and Snakemake's records without BM25's scores, so that one
    job runs, twice."""
    folder = tmp_path / "killed"
    for kept in ("results", ".snakemake"):
        shutil.copytree(
            quickstart_folder / kept, folder / kept, ignore=shutil.ignore_patterns("locks")
        )
    (folder / QUICKSTART_TARGET).unlink()
    link_project(folder)
    command = quickstart_bm25_command(shared_datasets)
    kill_snakemake_while(command, folder, "score.py")
    # The job wrote the scores, but Snakemake never recorded them as finished.
    assert (folder / QUICKSTART_TARGET).exists()
    assert list((folder / ".snakemake" / "incomplete").iterdir())
    assert list((folder / ".snakemake" / "locks").glob("*.lock"))  # the lock is left behind
    # A process SIGKILLed half-way through writing a BM25 index, and one still writing one.
    dead = killed_writing(folder / "results" / "indexes" / "scifact" / "old")
    process, kept = writing(folder / "results" / "indexes" / "scifact" / "other")
    try:
        output = run_in_copy(folder, command)
        assert not dead.exists() and kept.is_dir()
    finally:
        process.kill()
        process.wait()
    assert "removed the stale lock" in output and dead.name in output
    assert not [path for path in (folder / "results").rglob(".*.tmp") if path != kept]
    assert not list((folder / ".snakemake" / "incomplete").iterdir())  # the job ran again
    resumed = pd.read_parquet(folder / QUICKSTART_TARGET)
    pd.testing.assert_frame_equal(resumed, pd.read_parquet(quickstart_folder / QUICKSTART_TARGET))


def test_one_retriever_on_one_dataset_runs_to_the_report(quickstart_folder, shared_datasets):
    """The most common first run: one system, one dataset. Every stage, the plots and the
    report must cope with nothing to compare. Its dataset and BM25 are the quickstart's, so the
    jobs up to BM25's scores are the quickstart's own, reused, and its other stages run here."""
    folder = quickstart_folder
    config = official_scifact_config(shared_datasets)
    printed = snakemake(folder, config, "--cores", CORES)
    # Its end shows results.md's first table, and the report's command for this config; the
    # project copy's Snakefile is a link to the repository's, so the command names it and the
    # working directory (irflow.workflow.run_end).
    results = (folder / "results" / "results.md").read_text(encoding="utf-8")
    first_table = results.split("\n## ")[1]
    table = "\n".join(line for line in first_table.splitlines() if line.startswith("|"))
    assert table.startswith("| system | scifact | Average |") and f"\n{table}\n" in printed
    [command] = re.findall(r"is made by:\n +(.+)\n", printed)
    workdir = folder.resolve()
    assert shlex.split(command) == [
        "snakemake",
        "--report",
        str(workdir / "results" / "report.html"),
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(workdir / "first_run.yaml"),
    ]
    report_log = run_in_copy(folder, [*SNAKEMAKE, *shlex.split(command)[1:]])
    assert "Missing metadata" not in report_log  # every output of the run's graph was made
    summary = read_result(folder, "summary").set_index(["dataset", "system", "metric"])
    ndcg = summary.loc[("scifact", "bm25", "ndcg_cut_10"), "value"]
    assert ndcg == pytest.approx(measured("scifact", "BM25", "ndcg_cut_10"), abs=5e-5)
    [bm25s] = read_result(folder, "published").query("reproduction").itertuples()
    assert bm25s.within and bm25s.metric == "ndcg_cut_10"  # the bm25s benchmarks' SciFact
    assert read_result(folder, "significance").empty  # one system: no pair to test
    for plot in REPORT_PLOTS:
        image = matplotlib.image.imread(folder / "results" / "plots" / f"{plot}.png")
        assert image.shape[0] > 100 and image.std() > 0, plot  # drawn, not blank
    report = (folder / "results" / "report.html").read_text()
    embedded = set(re.findall(r"data:image/png;[^,]*?filename=([^;,]+);base64,", report))
    assert embedded == {f"{plot}.png" for plot in REPORT_PLOTS}
    table = (folder / "results" / "report" / "significance_table.html").read_text()
    assert "Nothing to compare" in table


def test_bm25_on_arguana_and_nfcorpus_whole_scores_as_the_bm25s_benchmark(
    tmp_path, shared_datasets
):
    """ArguAna and NFCorpus by their BEIR names, whole, with BM25: the scores are those the
    bm25s benchmarks published, and each ArguAna query's own argument is dropped from its hits,
    as BEIR and MTEB drop it (tests/test_workflow.py runs a subset of ArguAna and no NFCorpus,
    which spares CI their MiniLM encodings; tests/test_reproduce.py checks those)."""
    config = official_scifact_config(shared_datasets)
    config["datasets"] = {
        name: {"source": {"type": "beir", "name": name}} for name in ("arguana", "nfcorpus")
    }
    path = tmp_path / "arguana.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    target = "results/published.parquet"
    run_in_copy(tmp_path, [*SNAKEMAKE, target, "--configfile", str(path), "--cores", CORES])
    summary = read_result(tmp_path, "summary").set_index(["dataset", "system", "metric"])
    for dataset in config["datasets"]:
        for metric in ("ndcg_cut_10", "recall_100", "map"):
            value = summary.loc[(dataset, "bm25", metric), "value"]
            assert round(value, 4) == measured(dataset, "BM25", metric), (dataset, metric)
    # The bm25s benchmarks' nDCG@10 of each.
    reproductions = read_result(tmp_path, "published").query("reproduction")
    assert sorted(reproductions["dataset"]) == ["arguana", "nfcorpus"]
    assert reproductions["within"].all() and (reproductions["metric"] == "ndcg_cut_10").all()
    run = pd.read_parquet(tmp_path / "results" / "runs" / "arguana" / "bm25.parquet")
    assert not (run["query_id"] == run["doc_id"]).any()
    assert run["query_id"].nunique() == 1406 and run.groupby("query_id").size().max() == 1000
    manifest = tmp_path / "results" / "manifests" / "retrieve" / "arguana" / "bm25.json"
    assert json.loads(manifest.read_text())["self_matches_removed"] > 1000
