"""End to end: the most common first run, one system on one dataset, from the official source
(read offline from ../shared) to the report. Apart from test_workflow's shared run, so that it
runs on an xdist worker beside the other end-to-end files."""

from __future__ import annotations

import re

import matplotlib.image
import pytest
from conftest import CORES, REPORT_PLOTS, official_scifact_config
from test_workflow import PUBLISHED, read_result, snakemake

pytestmark = pytest.mark.e2e


def test_one_retriever_on_one_dataset_runs_to_the_report(tmp_path, shared_datasets):
    """The most common first run: one system, one dataset. Every stage, the plots and the
    report must cope with nothing to compare."""
    config = official_scifact_config(shared_datasets)
    snakemake(tmp_path, config, "--cores", CORES)
    report_log = snakemake(tmp_path, config, "--report", "results/report.html")
    assert "Missing metadata" not in report_log  # every output of the run's graph was made
    summary = read_result(tmp_path, "summary").set_index(["dataset", "system", "metric"])
    ndcg = summary.loc[("scifact", "bm25", "ndcg_cut_10"), "value"]
    assert ndcg == pytest.approx(PUBLISHED[("scifact", "bm25", "ndcg_cut_10")], abs=5e-4)
    assert read_result(tmp_path, "significance").empty  # one system: no pair to test
    for plot in REPORT_PLOTS:
        image = matplotlib.image.imread(tmp_path / "results" / "plots" / f"{plot}.png")
        assert image.shape[0] > 100 and image.std() > 0, plot  # drawn, not blank
    report = (tmp_path / "results" / "report.html").read_text()
    embedded = set(re.findall(r"data:image/png;[^,]*?filename=([^;,]+);base64,", report))
    assert embedded == {f"{plot}.png" for plot in REPORT_PLOTS}
    table = (tmp_path / "results" / "report" / "significance_table.html").read_text()
    assert "Nothing to compare" in table
