"""End to end: the most common first run, one system on one dataset, from the official source
(read offline from ../shared) to the report, after the README's quickstart command scored BM25
on the same data in the same folder. Apart from test_workflow's shared run, so that it runs on
an xdist worker beside the other end-to-end files."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
import yaml
from conftest import CORES, REPORT_PLOTS, measured, official_scifact_config
from test_readme import QUICKSTART_TARGET, SNAKEMAKE, quickstart_bm25_command, run_in_copy
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


def test_one_retriever_on_one_dataset_runs_to_the_report(quickstart_folder, shared_datasets):
    """The most common first run: one system, one dataset. Every stage, the plots and the
    report must cope with nothing to compare. Its dataset and BM25 are the quickstart's, so the
    jobs up to BM25's scores are the quickstart's own, reused, and its other stages run here."""
    folder = quickstart_folder
    config = official_scifact_config(shared_datasets)
    snakemake(folder, config, "--cores", CORES)
    report_log = snakemake(folder, config, "--report", "results/report.html")
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
