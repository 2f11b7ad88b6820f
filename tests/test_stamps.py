"""Settings stamps and the dataset files check (irflow.workflow.stamps), on real files: what
is rewritten, what is only touched, and what is left as it is, so that Snakemake reruns a job
by modification times alone exactly when its settings or its dataset changed."""

from __future__ import annotations

import json
import os

import pytest
from conftest import TINY_CORPUS, TINY_QRELS, TINY_QUERIES, write_beir

from irflow.data.download import dataset_fingerprint
from irflow.workflow import stamps

PAST = 1_000_000_000  # 2001: older than anything a test writes


class Wildcards(dict):
    """Snakemake's wildcards as input functions see them: values by name, in output order."""

    def __getattr__(self, name):
        return self[name]


def test_a_stamp_is_the_jobs_params_with_their_functions_called_on_its_wildcards():
    wildcards = Wildcards(dataset="scifact", system="bm25")
    params = {"settings": lambda wc: {"system": wc.system, "top_k": 10}, "side": "corpus"}
    assert stamps.job_settings(params, wildcards) == {
        "settings": {"system": "bm25", "top_k": 10},
        "side": "corpus",
    }
    path = stamps.stamp_path("retrieve_bm25", wildcards)
    assert path.as_posix() == "results/settings/retrieve_bm25/scifact/bm25.json"
    assert stamps.stamp_path("database", Wildcards()).as_posix() == "results/settings/database.json"


def test_a_stamp_is_rewritten_only_when_its_settings_change(tmp_path):
    path, manifest = tmp_path / "stamp.json", tmp_path / "manifest.json"
    text = stamps.settings_text({"top_k": 10})
    stamps.update_stamp(path, text, manifest)  # new: dated 1970, it reruns nothing on its own
    assert path.stat().st_mtime == 0 and path.read_text() == text
    stamps.update_stamp(path, text, manifest)
    assert path.stat().st_mtime == 0  # unchanged: no rerun
    stamps.update_stamp(path, stamps.settings_text({"top_k": 100}), manifest)
    assert path.stat().st_mtime > PAST and json.loads(path.read_text()) == {"top_k": 100}


@pytest.mark.parametrize(
    "recorded, touched",
    [({"top_k": 5}, True), (None, False), ({"top_k": 10}, False)],
    ids=["other-settings", "before-stamps", "same-settings"],
)
def test_an_output_whose_manifest_records_other_settings_is_made_again(tmp_path, recorded, touched):
    """Results copied in from another experiment keep their manifests: the settings they
    record, not their times, decide. A manifest of before the stamps records none."""
    path, manifest = tmp_path / "stamp.json", tmp_path / "manifest.json"
    text = stamps.settings_text({"top_k": 10})
    path.write_text(text)
    os.utime(path, (PAST, PAST))
    facts = {"stage": "retrieve"}
    if recorded:
        facts["settings_md5"] = stamps.text_md5(stamps.settings_text(recorded))
    manifest.write_text(json.dumps(facts))
    stamps.update_stamp(path, text, manifest)
    assert (path.stat().st_mtime > PAST) is touched
    assert path.read_text() == text


@pytest.fixture
def dataset(tmp_path):
    """A BEIR folder, its source.json as the download job writes it (its checksum), and the
    record of its files' status, the two older than now."""
    folder = write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    source, record = tmp_path / "source.json", tmp_path / "tiny.files.json"
    source.write_text(json.dumps(dataset_fingerprint(folder, "test")))
    stamps.check_dataset_files(folder, "test", source, record)
    for path in (source, record):
        os.utime(path, (PAST, PAST))
    return folder, source, record


def check(dataset) -> float:
    """The record's modification time after a check: newer than source.json reruns the
    download job."""
    folder, source, record = dataset
    stamps.check_dataset_files(folder, "test", source, record)
    return record.stat().st_mtime


def test_a_file_edited_with_its_modification_time_kept_is_found(dataset):
    corpus = dataset[0] / "corpus.jsonl"
    kept = corpus.stat()
    corpus.write_text(corpus.read_text().replace("Cats purr", "Cats hiss"))
    os.utime(corpus, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert corpus.stat().st_mtime_ns == kept.st_mtime_ns and corpus.stat().st_size == kept.st_size
    assert check(dataset) > PAST  # newer than source.json: download, ingest, ... rerun
    assert check(dataset) > PAST  # and stays so until the download job records the edit


def test_an_unchanged_dataset_is_not_hashed_and_reruns_nothing(dataset, monkeypatch):
    def hashing(*_):
        raise AssertionError("hashed")

    monkeypatch.setattr(stamps, "dataset_fingerprint", hashing)
    assert check(dataset) == PAST


def test_a_status_change_alone_is_hashed_once_and_reruns_nothing(dataset):
    """chmod (or a copy with the same bytes) changes the file's change time, not its content."""
    corpus = dataset[0] / "corpus.jsonl"
    corpus.chmod(0o600)
    assert check(dataset) == PAST  # hashed, same checksum: the record takes source.json's time
    status = json.loads(dataset[2].read_text())["status"][str(corpus)]
    assert status[2] == corpus.stat().st_ctime_ns  # recorded: the next check hashes nothing
