"""Without Snakemake's records: a changed setting still reruns what it decides, and a dataset
file edited with its modification time kept still reruns its ingest (issue 39, items 3 and 4).

Snakemake's params trigger lives in .snakemake/metadata; deleted, only modification times were
left, and a changed top_k or BM25 setting reran nothing but the database ("Nothing to be done"
for a target run, the old numbers kept). The graph is a 200-document SciFact subset searched by
BM25, run once for both tests (in file order); each Snakemake call takes a few seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil

import pandas as pd
import pytest
from conftest import scifact_subset, snakemake

pytestmark = pytest.mark.e2e  # five Snakemake calls, about 60 s of CPU on this machine

RUN = "results/runs/sub/bm25.parquet"
SCORES = "results/scores/sub/bm25.parquet"


def ran(output: str) -> set[str]:
    """The rules of the jobs a Snakemake call ran (or, dry, would run)."""
    return set(re.findall(r"^(?:local)?rule (\w+):$", output, re.MULTILINE))


def ndcg10(workdir) -> float:
    scores = pd.read_parquet(workdir / SCORES)
    return round(scores.loc[scores["metric"] == "ndcg_cut_10", "value"].mean(), 4)


def config_of(folder, **settings) -> dict:
    return {
        "offline": True,
        "datasets": {"sub": {"source": {"type": "path", "path": str(folder)}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    } | settings


@pytest.fixture(scope="module")
def workdir(shared_datasets, tmp_path_factory):
    """One run of the graph, for the tests below in turn: SciFact's first 20 test queries over
    200 documents, in BEIR layout, searched by BM25 and scored."""
    workdir = tmp_path_factory.mktemp("lost_records")
    subset = scifact_subset(shared_datasets / "scifact", workdir / "sub")
    first = snakemake(workdir, SCORES, config=config_of(subset)).output
    assert {"download", "ingest", "filter", "index_bm25", "retrieve_bm25", "score"} <= ran(first)
    return workdir


def test_a_dataset_file_edited_with_its_time_kept_reruns_its_ingest(workdir):
    config = config_of(workdir / "sub")
    corpus = workdir / "sub" / "corpus.jsonl"
    documents = [json.loads(line) for line in corpus.read_text().splitlines()]
    documents[0]["text"] = "edited"
    kept = corpus.stat()
    corpus.write_text("".join(json.dumps(document) + "\n" for document in documents))
    os.utime(corpus, ns=(kept.st_atime_ns, kept.st_mtime_ns))  # as touch -r or cp -p leave it
    # main: "Nothing to be done", the old corpus kept.
    rerun = ran(snakemake(workdir, SCORES, config=config).output)
    assert {"download", "ingest", "filter", "index_bm25", "retrieve_bm25", "score"} <= rerun
    ingested = pd.read_parquet(workdir / "results/datasets/sub/corpus.parquet")
    assert ingested.set_index("doc_id").loc[documents[0]["_id"], "text"] == "edited"


def test_a_changed_setting_reruns_its_jobs_after_snakemakes_records_are_deleted(workdir):
    config = config_of(workdir / "sub")
    # An unchanged config plans nothing without the records: no stamp was rewritten, and the
    # dataset's files, checked once after their edit, are neither hashed nor rerun again.
    shutil.rmtree(workdir / ".snakemake")
    assert "Nothing to be done" in snakemake(workdir, SCORES, "--dry-run", config=config).output
    assert pd.read_parquet(workdir / RUN).groupby("query_id").size().max() > 2
    full = ndcg10(workdir)

    # top_k 1000 -> 2 with the records gone: main said "Nothing to be done", kept up to 142
    # hits a query and the old nDCG@10.
    shutil.rmtree(workdir / ".snakemake")
    assert ran(snakemake(workdir, SCORES, config=config | {"top_k": 2}).output) == {
        "retrieve_bm25",
        "score",
    }
    assert pd.read_parquet(workdir / RUN).groupby("query_id").size().max() == 2
    assert ndcg10(workdir) < full
    # The run's manifest carries the settings it was made with: planning compares the two.
    stamp = workdir / "results/settings/retrieve_bm25/sub/bm25.json"
    assert json.loads(stamp.read_text())["settings"]["top_k"] == 2
    made = json.loads((workdir / "results/manifests/retrieve/sub/bm25.json").read_text())
    assert made["settings_md5"] == hashlib.md5(stamp.read_bytes()).hexdigest()

    # A BM25 setting, the records gone again: the index is rebuilt with it, then searched.
    shutil.rmtree(workdir / ".snakemake")
    k1 = config | {"top_k": 2, "retrievers": {"bm25": {"type": "bm25", "k1": 0.1, "b": 0.0}}}
    assert ran(snakemake(workdir, SCORES, config=k1).output) == {
        "index_bm25",
        "retrieve_bm25",
        "score",
    }
    built = json.loads((workdir / "results/manifests/index_bm25/sub/bm25.json").read_text())
    assert (built["settings"]["k1"], built["settings"]["b"]) == (0.1, 0.0)


def test_a_dry_run_of_a_changed_setting_changes_nothing(workdir):
    """A dry run explores: one of a changed setting leaves every file as it was, so the config
    as it was still plans nothing (before, the dry run dated the run 1970)."""
    config = config_of(workdir / "sub") | {
        "top_k": 2,
        "retrievers": {"bm25": {"type": "bm25", "k1": 0.1, "b": 0.0}},
    }
    snakemake(workdir, SCORES, config=config)  # as the test above left it, with the records
    changed = config | {"top_k": 3}
    assert ran(snakemake(workdir, SCORES, "--dry-run", config=changed).output) == {
        "retrieve_bm25",
        "score",
    }
    assert "Nothing to be done" in snakemake(workdir, SCORES, "--dry-run", config=config).output


def test_a_dataset_moved_with_the_records_gone_reruns_its_download(workdir):
    """The dataset's folder changes (a copy with the same files and times) while Snakemake's
    records are gone: only the download's settings stamp sees it, and it dates source.json
    1970 while the run plans. Its files, marked ancient when unchanged, are then ordinary
    inputs again; had they been marked before the stamp acted, the run would say "Nothing to
    be done" with source.json naming the old folder."""
    config = config_of(workdir / "sub") | {
        "top_k": 2,
        "retrievers": {"bm25": {"type": "bm25", "k1": 0.1, "b": 0.0}},
    }
    moved = workdir / "sub-moved"
    shutil.copytree(workdir / "sub", moved)  # copy2: the files' times kept
    shutil.rmtree(workdir / ".snakemake")
    # Only modification times decide, as without any record of Snakemake's.
    moved_config = config | {"datasets": config_of(moved)["datasets"]}
    done = snakemake(workdir, SCORES, "--rerun-triggers", "mtime", config=moved_config)
    assert "download" in ran(done.output), done.output
    source = json.loads((workdir / "results/datasets/sub/source.json").read_text())
    assert "sub-moved" in source["corpus"], source
