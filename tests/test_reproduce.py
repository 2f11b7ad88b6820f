"""Before a release (CONTRIBUTING.md, "Test"): config/offline.yaml whole, BM25 and
all-MiniLM-L6-v2 on SciFact, NFCorpus and ArguAna, as docs/measured/agreement.yaml's command
runs it. Every number docs/validation.md shows is this run's, to four decimals, and every
reproduction meets its published value within its tolerance.

Not in CI, whose 25 minutes it would take most of (ArguAna's MiniLM encoding alone is six of
them): tests/test_workflow.py checks SciFact whole and an ArguAna subset, and
tests/test_first_run.py BM25 on NFCorpus and ArguAna whole. Run it with
``.venv/bin/python -m pytest -m reproduce tests/test_reproduce.py`` (about 17 minutes on 2
cores).
"""

from __future__ import annotations

import os

import pytest
import yaml
from conftest import REPO, SNAKEMAKE, schema_defaults
from test_readme import run_in_copy
from test_workflow import read_result

pytestmark = [pytest.mark.e2e, pytest.mark.reproduce]
AGREEMENT = yaml.safe_load((REPO / "docs" / "measured" / "agreement.yaml").read_text())


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory, shared_datasets):
    folder = tmp_path_factory.mktemp("reproduce")
    command = [*SNAKEMAKE, "--configfile", "config/offline.yaml", "--cores", str(os.cpu_count())]
    run_in_copy(folder, [*command, "--config", f"data_dir={shared_datasets}"])
    return folder


def test_agreement_yaml_names_this_command():
    assert AGREEMENT["command"].endswith("snakemake --cores all --configfile config/offline.yaml")


@pytest.mark.parametrize("dataset", sorted(AGREEMENT["measured"]))
def test_every_number_docs_validation_shows_is_this_runs(offline_run, dataset):
    summary = read_result(offline_run, "summary").set_index(["dataset", "system", "metric"])
    system_of = {"BM25": "bm25"}  # agreement.yaml's names as published systems are named
    for name, metrics in AGREEMENT["measured"][dataset].items():
        for metric, value in metrics.items():
            mine = summary.loc[(dataset, system_of.get(name, name), metric), "value"]
            assert round(mine, 4) == value, (dataset, name, metric)


def test_every_reproduction_is_within_its_tolerance(offline_run):
    comparison = read_result(offline_run, "published")
    reproductions = comparison[comparison["reproduction"]]
    # BM25's nDCG@10 (bm25s) and MiniLM's three metrics (MTEB) on each of the three datasets.
    assert len(reproductions) >= 3 * (1 + 3)
    assert reproductions["within"].all(), reproductions[~reproductions["within"]].to_string()


# Lucene's BM25 (the lucene family) on the three datasets whole, as config/reproduce/bm25.yaml
# runs it: docs/measured/lucene.yaml's numbers (docs/validation.md) and Pyserini's published ones.
LUCENE = yaml.safe_load((REPO / "docs" / "measured" / "lucene.yaml").read_text())


@pytest.fixture(scope="module")
def lucene_run(tmp_path_factory, shared_datasets):
    folder = tmp_path_factory.mktemp("reproduce-lucene")
    datasets = "datasets={beir: [" + ", ".join(sorted(LUCENE["measured"])) + "]}"
    command = [*SNAKEMAKE, "--configfile", "config/reproduce/bm25.yaml", "--cores", "2"]
    config = [f"data_dir={shared_datasets}", "offline=true", datasets]
    run_in_copy(folder, [*command, "--config", *config])
    return folder


def test_lucene_yaml_names_this_command():
    assert LUCENE["command"].startswith("snakemake --configfile config/reproduce/bm25.yaml")


@pytest.mark.parametrize("dataset", sorted(LUCENE["measured"]))
def test_every_lucene_number_docs_validation_shows_is_this_runs(lucene_run, dataset):
    summary = read_result(lucene_run, "summary").set_index(["dataset", "system", "metric"])
    for system, metrics in LUCENE["measured"][dataset].items():
        for metric, value in metrics.items():
            mine = summary.loc[(dataset, system, metric), "value"]
            assert round(mine, 4) == value, (dataset, system, metric)


def test_lucene_reproduces_pyserinis_flat_and_multifield_numbers(lucene_run):
    comparison = read_result(lucene_run, "published")
    lucene = comparison[comparison["system"].str.startswith("lucene-")]
    # nDCG@10 and Recall@100 of flat and multifield on each dataset, all reproductions.
    assert len(lucene[lucene["reproduction"]]) == 2 * 2 * len(LUCENE["measured"])
    assert lucene["within"].all(), lucene[~lucene["within"]].to_string()


def test_arguana_multifield_with_self_matches_kept_is_beirs_bm25(lucene_run):
    """BEIR's Table 2 and Table 9 ArguAna BM25 cells are the multifield run with each query's
    own argument left in (docs/validation.md): searched on the run's index, self-matches kept."""
    from irflow.core import contracts
    from irflow.evaluation.score import score_run
    from irflow.retrieval.runs import SearchRequest
    from irflow.workflow.families import family

    base = lucene_run / "results"
    spec = yaml.safe_load((REPO / "config" / "reproduce" / "bm25.yaml").read_text())
    settings = {"retriever": schema_defaults(spec["retrievers"]["lucene-multifield"])}
    searcher = family("lucene").open_searcher(
        {"index": base / "indexes" / "arguana" / "lucene.multifield"}, settings, threads=2
    )
    queries = contracts.read_table(base / "datasets" / "arguana" / "filtered" / "queries.parquet")
    run, _ = searcher.search(queries, SearchRequest(100, False))
    qrels = contracts.read_frame(base / "datasets" / "arguana" / "qrels.parquet")
    mine = score_run(run, qrels, ["ndcg_cut.10", "recall.100"]).groupby("metric")["value"].mean()
    expected = LUCENE["self_matches_kept"]["arguana"]["lucene-multifield"]
    assert {metric: round(mine[metric], 4) for metric in expected} == expected
