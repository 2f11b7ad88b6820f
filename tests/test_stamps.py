"""Settings stamps and the dataset files check (irflow.workflow.stamps), on real files: what
is rewritten, what is only touched, and what is left as it is, so that Snakemake reruns a job
by modification times alone exactly when its settings or its dataset changed."""

from __future__ import annotations

import json
import os

import pytest
from conftest import TINY_CORPUS, TINY_QRELS, TINY_QUERIES, write_beir

from irflow.data.layouts import dataset_files, dataset_fingerprint
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
    assert not stamps.update_stamp(path, text, manifest)  # new: it reruns nothing on its own
    assert path.read_text() == text
    assert not stamps.update_stamp(path, text, manifest)  # unchanged: no rerun
    assert stamps.update_stamp(path, stamps.settings_text({"top_k": 100}), manifest)
    assert json.loads(path.read_text()) == {"top_k": 100}


@pytest.mark.parametrize(
    "recorded, again",
    [({"top_k": 5}, True), (None, False), ({"top_k": 10}, False)],
    ids=["other-settings", "before-stamps", "same-settings"],
)
def test_an_output_whose_manifest_records_other_settings_is_made_again(tmp_path, recorded, again):
    """Results copied in from another experiment keep their manifests: the settings they
    record, not their times, decide. A manifest of before the stamps records none."""
    path, manifest = tmp_path / "stamp.json", tmp_path / "manifest.json"
    text = stamps.settings_text({"top_k": 10})
    path.write_text(text)
    facts = {"stage": "retrieve"}
    if recorded:
        facts["settings_md5"] = stamps.text_md5(stamps.settings_text(recorded))
    manifest.write_text(json.dumps(facts))
    assert stamps.update_stamp(path, text, manifest) is again
    assert path.read_text() == text


def test_outputs_made_again_are_dated_1970_and_kept(tmp_path):
    """A file, and a directory output by the timestamp file Snakemake dates it by."""
    run, tables = tmp_path / "run.parquet", tmp_path / "tables"
    run.write_text("kept")
    tables.mkdir()
    (tables / ".snakemake_timestamp").touch()
    stamps.make_again([run, tables, tmp_path / "never-made.parquet"])
    assert run.stat().st_mtime == stamps.MADE_AGAIN and run.read_text() == "kept"
    assert (tables / ".snakemake_timestamp").stat().st_mtime == stamps.MADE_AGAIN


@pytest.fixture
def dataset(tmp_path):
    """A BEIR folder, its source.json as the download job writes it (its checksum), and the
    record of its files' status, source.json dated PAST."""
    folder = write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    source, record = tmp_path / "source.json", tmp_path / "tiny.files.json"
    source.write_text(json.dumps(dataset_fingerprint(folder, "test")))
    stamps.check_dataset_files(folder, "test", source, record)
    os.utime(source, (PAST, PAST))
    return folder, source, record


def check(dataset) -> float:
    """source.json's modification time after a check: dated 1970, the download job reruns."""
    folder, source, record = dataset
    stamps.check_dataset_files(folder, "test", source, record)
    return source.stat().st_mtime


def test_a_file_edited_with_its_modification_time_kept_is_found(dataset):
    corpus = dataset[0] / "corpus.jsonl"
    kept = corpus.stat()
    corpus.write_text(corpus.read_text().replace("Cats purr", "Cats hiss"))
    os.utime(corpus, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert corpus.stat().st_mtime_ns == kept.st_mtime_ns and corpus.stat().st_size == kept.st_size
    assert check(dataset) == stamps.MADE_AGAIN  # 1970: download, ingest, ... rerun
    # And it stays so until the download job records the edit.
    assert check(dataset) == stamps.MADE_AGAIN


def test_an_unchanged_dataset_is_not_hashed_and_reruns_nothing(dataset, monkeypatch):
    def hashing(*_):
        raise AssertionError("hashed")

    monkeypatch.setattr(stamps, "dataset_fingerprint", hashing)
    assert check(dataset) == PAST


def test_a_status_change_alone_is_hashed_once_and_reruns_nothing(dataset):
    """chmod (or a copy with the same bytes) changes the file's change time, not its content."""
    corpus = dataset[0] / "corpus.jsonl"
    corpus.chmod(0o600)
    assert check(dataset) == PAST  # hashed, same checksum: nothing reruns
    status = json.loads(dataset[2].read_text())["status"][str(corpus)]
    assert status[2] == corpus.stat().st_ctime_ns  # recorded: the next check hashes nothing


def edit_keeping_time(corpus) -> None:
    kept = corpus.stat()
    corpus.write_text(corpus.read_text().replace("Cats purr", "Cats hiss"))
    os.utime(corpus, ns=(kept.st_atime_ns, kept.st_mtime_ns))


@pytest.mark.parametrize("damage", ["truncated", "not UTF-8", "not the record"])
def test_a_damaged_record_is_rebuilt_and_an_edit_still_found(dataset, damage):
    """Issue 49: main raised on a damaged record (in an input function, where Snakemake drops
    the error), and every later check too."""
    record = dataset[2]
    text = record.read_bytes()
    record.write_bytes(
        {"truncated": text[:20], "not UTF-8": b"\xff" + text, "not the record": b"[]"}[damage]
    )
    edit_keeping_time(dataset[0] / "corpus.jsonl")
    assert check(dataset) == stamps.MADE_AGAIN
    files = dataset_files(dataset[0], "test")
    status = {str(path): stamps.file_status(path) for path in files}
    assert json.loads(record.read_text())["status"] == status


def test_a_damaged_source_reruns_its_download(dataset):
    folder, source, record = dataset
    source.write_bytes(source.read_bytes()[:10])
    record.unlink()  # as after any change of the files' status
    assert check(dataset) == stamps.MADE_AGAIN


def test_the_status_is_recorded_only_after_the_comparison_is_acted_on(dataset, monkeypatch):
    """Issue 49: main recorded the new status first and hashed second, so a run killed while
    hashing lost the edit; a hash that fails here stands for the kill."""
    edit_keeping_time(dataset[0] / "corpus.jsonl")
    before = dataset[2].read_bytes()

    def killed(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(stamps, "dataset_fingerprint", killed)
    with pytest.raises(KeyboardInterrupt):
        check(dataset)
    assert dataset[2].read_bytes() == before
    monkeypatch.undo()
    assert check(dataset) == stamps.MADE_AGAIN


def test_a_stamp_that_is_not_utf8_is_rewritten_and_its_outputs_made_again(tmp_path):
    path = tmp_path / "stamp.json"
    text = stamps.settings_text({"top_k": 10})
    path.write_bytes(b"\xfe" + text.encode())
    assert stamps.update_stamp(path, text, None) is True
    assert path.read_text() == text
    assert stamps.update_stamp(path, text, None) is False


def test_a_record_that_cannot_be_written_names_the_file_and_the_fix(tmp_path):
    """(A full disk and a read-only mount: tests/test_bookkeeping_faults.py.)"""
    (tmp_path / "file").write_text("")
    with pytest.raises(stamps.UnwritableRecordError) as error:
        stamps.write_record(tmp_path / "file" / "stamp.json", "{}")
    assert str(error.value).startswith(f"cannot write {tmp_path / 'file' / 'stamp.json'} (")
    assert str(error.value).endswith("make it writable, then run the same command again.")
