"""Tests for the download stage, against a loopback HTTP server that can misbehave on request."""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import stat
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
from conftest import SCHEMA, minimal_config, validated
from loopback_http import serving

from irflow.core.errors import ConfigError, DownloadError
from irflow.data import download, download_cache, fetch
from irflow.data.download import safe_extract_zip
from irflow.data.download_cache import cached_file_name
from irflow.data.fetch import fetch_url
from irflow.data.ir_datasets_fields import (
    DOCUMENT_FIELDS,
    FIELDS_REVISION,
    HTML_DOCUMENTS,
    document_fields,
)
from irflow.data.layouts import dataset_files, dataset_fingerprint, dataset_layout
from irflow.data.sources import ir_datasets as ir_datasets_source
from irflow.data.sources import locate_dataset
from irflow.workflow.config import validate_config

CORPUS = [
    {"_id": "d1", "title": "Aspirin", "text": "Aspirin reduces fever."},
    {"_id": "d2", "title": "Water", "text": "Water boils at 100 C."},
]
QUERIES = [{"_id": "q1", "text": "what reduces fever"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def beir_members(prefix: str = "scifact/") -> dict[str, bytes]:
    return {
        f"{prefix}corpus.jsonl.gz": gzip.compress(jsonl(CORPUS), mtime=0),
        f"{prefix}queries.jsonl": jsonl(QUERIES),
        f"{prefix}qrels/test.tsv": QRELS.encode(),
    }


def zip_bytes(members: dict[str, bytes], symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name, link_target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3  # unix, so external_attr carries the file mode
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, link_target)
    return buffer.getvalue()


def write_beir(folder: Path) -> Path:
    for name, data in beir_members(prefix="").items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def md5_of(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


ZIP = zip_bytes(beir_members())
ZIP_MD5 = md5_of(ZIP)


@pytest.fixture
def server():
    with serving() as state:
        yield state


@pytest.fixture(autouse=True)
def isolated(monkeypatch):
    """No real waits, no proxy for loopback, and no offline mode leaking in from the shell."""
    sleeps: list[float] = []
    monkeypatch.setattr(fetch, "_sleep", sleeps.append)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    for var in ("HF_HUB_OFFLINE", "IRFLOW_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    return sleeps


@pytest.fixture
def dirs(tmp_path):
    return tmp_path / "data", tmp_path / "cache"


def contents(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*"))


def assert_scifact(folder: Path) -> None:
    assert dataset_layout(folder, "test") == "beir"
    assert gzip.decompress((folder / "corpus.jsonl.gz").read_bytes()) == jsonl(CORPUS)
    assert (folder / "qrels" / "test.tsv").read_text() == QRELS


# --- layouts and fingerprint -----------------------------------------------------------------


def write_posir(folder: Path, split: str = "test") -> Path:
    """The three PosIR files; their content does not matter to layout detection."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for name in ("corpus.parquet", "queries.parquet", f"qrels/{split}.parquet"):
        (folder / name).write_bytes(b"PAR1")
    return folder


def test_beir_files_in_order_and_missing_file_named(tmp_path):
    folder = write_beir(tmp_path / "scifact")
    assert dataset_layout(folder, "test") == "beir"
    assert dataset_files(folder, "test") == [
        folder / "corpus.jsonl.gz",
        folder / "queries.jsonl",
        folder / "qrels" / "test.tsv",
    ]
    assert dataset_layout(folder, "dev") is None
    with pytest.raises(DownloadError, match=r"BEIR layout lacks qrels/dev\.tsv"):
        dataset_files(folder, "dev")
    assert dataset_layout(tmp_path / "absent", "test") is None


def test_posir_layout_is_detected_from_its_file_names(tmp_path):
    folder = write_posir(tmp_path / "eng-Latn" / "biology")
    assert dataset_layout(folder, "test") == "posir"
    assert dataset_files(folder, "test") == [
        folder / "corpus.parquet",
        folder / "queries.parquet",
        folder / "qrels" / "test.parquet",
    ]
    assert sorted(dataset_fingerprint(folder, "test")["files"]) == [
        "corpus.parquet",
        "qrels/test.parquet",
        "queries.parquet",
    ]
    (folder / "queries.parquet").unlink()
    assert dataset_layout(folder, "test") is None
    with pytest.raises(DownloadError) as raised:
        dataset_files(folder, "test")
    assert "PosIR layout lacks queries.parquet" in str(raised.value)
    assert "BEIR" not in str(raised.value)  # a PosIR folder is told of PosIR's files alone


def test_partial_other_layout_does_not_confuse_detection(tmp_path):
    folder = write_posir(tmp_path / "d")
    (folder / "queries.jsonl").write_bytes(jsonl(QUERIES))  # a stray BEIR file
    assert dataset_layout(folder, "test") == "posir"


def test_folder_complete_in_both_layouts_is_refused(tmp_path):
    folder = write_posir(write_beir(tmp_path / "both"))
    with pytest.raises(DownloadError, match="both BEIR and PosIR layout") as raised:
        dataset_layout(folder, "test")
    assert "qrels/test.parquet" in str(raised.value) and "qrels/test.tsv" in str(raised.value)


def test_local_posir_folder_is_used_in_place(dirs, tmp_path):
    data_dir, cache_dir = dirs
    folder = write_posir(tmp_path / "PosIR-Benchmark-v1" / "eng-Latn" / "biology")
    found = locate_dataset(
        "biology",
        {"type": "path", "path": str(folder)},
        split="test",
        data_dir=data_dir,
        cache_dir=cache_dir,
    )
    assert found == folder


def test_posir_zip_is_unpacked_into_cache(dirs, tmp_path):
    data_dir, cache_dir = dirs
    members = {f"biology/{n}": b"PAR1" for n in ("corpus.parquet", "queries.parquet")}
    local_zip = tmp_path / "biology.zip"
    local_zip.write_bytes(zip_bytes(members | {"biology/qrels/test.parquet": b"PAR1"}))
    found = locate_dataset(
        "biology",
        {"type": "path", "path": str(local_zip)},
        split="test",
        data_dir=data_dir,
        cache_dir=cache_dir,
    )
    assert found == cache_dir / "biology"
    assert dataset_layout(found, "test") == "posir"


def test_fingerprint_is_stable_and_tracks_changes(tmp_path):
    folder = write_beir(tmp_path / "scifact")
    first = dataset_fingerprint(folder, "test")
    assert first == dataset_fingerprint(folder, "test")
    assert sorted(first["files"]) == ["corpus.jsonl.gz", "qrels/test.tsv", "queries.jsonl"]
    assert first["files"]["queries.jsonl"] == md5_of(jsonl(QUERIES))

    (folder / "qrels" / "test.tsv").write_text(QRELS + "q1\td2\t0\n")
    second = dataset_fingerprint(folder, "test")
    assert second["checksum"] != first["checksum"]
    assert second["files"]["qrels/test.tsv"] != first["files"]["qrels/test.tsv"]
    assert second["files"]["queries.jsonl"] == first["files"]["queries.jsonl"]


# --- locate_dataset ---------------------------------------------------------------------------


def test_data_dir_is_used_without_fetching(server, dirs):
    data_dir, cache_dir = dirs
    write_beir(data_dir / "scifact")
    source = {"type": "url", "url": server.url("/scifact.zip"), "md5": ZIP_MD5}
    found = locate_dataset("scifact", source, split="test", data_dir=data_dir, cache_dir=cache_dir)
    assert found == data_dir / "scifact"
    assert server.requests == []


def test_url_download_verifies_extracts_and_is_cached(server, dirs):
    data_dir, cache_dir = dirs
    server.files["/scifact.zip"] = ZIP
    source = {"type": "url", "url": server.url("/scifact.zip"), "md5": ZIP_MD5, "mirrors": []}

    found = locate_dataset("scifact", source, split="test", data_dir=data_dir, cache_dir=cache_dir)
    assert found == cache_dir / "scifact"
    assert_scifact(found)
    # No .part file, its record or staging folder is left behind.
    zip_name = cached_file_name(source["url"], "scifact.zip")
    assert sorted(path.name for path in cache_dir.iterdir()) == [zip_name, "scifact"]
    assert len(server.requests) == 1

    again = locate_dataset("scifact", source, split="test", data_dir=data_dir, cache_dir=cache_dir)
    assert again == found
    assert len(server.requests) == 1


def test_truncated_transfer_resumes_with_range(server, tmp_path, isolated):
    server.files["/scifact.zip"] = ZIP
    server.drop_first_after["/scifact.zip"] = 100
    dest = tmp_path / "scifact.zip"

    fetch_url(server.url("/scifact.zip"), dest, md5=ZIP_MD5, backoff_s=0.25)

    assert server.requests == [("/scifact.zip", None), ("/scifact.zip", "bytes=100-")]
    assert isolated == [0.25]
    assert dest.read_bytes() == ZIP
    assert not dest.with_name("scifact.zip.part").exists()


def test_server_ignoring_range_restarts_from_zero(server, tmp_path):
    server.files["/scifact.zip"] = ZIP
    server.drop_first_after["/scifact.zip"] = 32
    dest = tmp_path / "scifact.zip"
    with pytest.raises(DownloadError):
        fetch_url(server.url("/scifact.zip"), dest, md5=ZIP_MD5, retries=0)
    server.ignore_range = True

    fetch_url(server.url("/scifact.zip"), dest, md5=ZIP_MD5)

    assert server.requests == [("/scifact.zip", None), ("/scifact.zip", "bytes=32-")]
    assert dest.read_bytes() == ZIP


def test_verified_dest_is_not_fetched_again(server, tmp_path):
    dest = tmp_path / "scifact.zip"
    dest.write_bytes(ZIP)
    assert fetch_url(server.url("/scifact.zip"), dest, md5=ZIP_MD5) == dest
    assert server.requests == []


def test_checksum_mismatch_names_both_md5s_and_leaves_nothing(server, dirs):
    data_dir, cache_dir = dirs
    server.files["/scifact.zip"] = ZIP
    server.wrong_bytes.add("/scifact.zip")
    source = {"type": "url", "url": server.url("/scifact.zip"), "md5": ZIP_MD5}

    with pytest.raises(DownloadError) as raised:
        locate_dataset("scifact", source, split="test", data_dir=data_dir, cache_dir=cache_dir)

    assert ZIP_MD5 in str(raised.value)
    assert md5_of(bytes(len(ZIP))) in str(raised.value)
    assert list(cache_dir.iterdir()) == []
    assert len(server.requests) == 1  # a wrong checksum is not retried on the same URL


@pytest.mark.parametrize("failure", ["always_500", "wrong_bytes"])
def test_failing_url_falls_back_to_mirror(server, dirs, isolated, failure):
    data_dir, cache_dir = dirs
    server.files["/broken/scifact.zip"] = server.files["/mirror/scifact.zip"] = ZIP
    getattr(server, failure).add("/broken/scifact.zip")
    source = {
        "type": "url",
        "url": server.url("/broken/scifact.zip"),
        "md5": ZIP_MD5,
        "mirrors": [server.url("/mirror/scifact.zip")],
    }

    found = locate_dataset(
        "scifact",
        source,
        split="test",
        data_dir=data_dir,
        cache_dir=cache_dir,
        retries=2,
        backoff_s=0.5,
    )

    assert_scifact(found)
    paths = [path for path, _ in server.requests]
    broken_attempts = 3 if failure == "always_500" else 1
    assert paths == ["/broken/scifact.zip"] * broken_attempts + ["/mirror/scifact.zip"]
    assert isolated == ([0.5, 1.0] if failure == "always_500" else [])


def test_every_url_failing_is_an_error(server, dirs):
    data_dir, cache_dir = dirs
    source = {
        "type": "url",
        "url": server.url("/missing.zip"),
        "mirrors": [server.url("/also-missing.zip")],
    }
    with pytest.raises(DownloadError, match="HTTP 404") as raised:
        locate_dataset("scifact", source, split="test", data_dir=data_dir, cache_dir=cache_dir)
    assert "also-missing.zip" in str(raised.value)
    assert "\n" not in str(raised.value)  # a job reports it as one line
    assert not (cache_dir / "scifact").exists()


@pytest.mark.parametrize("with_data_dir", [True, False])
def test_a_failed_download_says_how_to_run_without_the_network(server, dirs, with_data_dir):
    """The error names the config keys (data_dir, offline) and where each file goes."""
    data_dir, cache_dir = dirs
    source = {"type": "url", "url": server.url("/missing.zip")}
    with pytest.raises(DownloadError) as raised:
        locate_dataset(
            "scifact",
            source,
            split="test",
            data_dir=data_dir if with_data_dir else None,
            cache_dir=cache_dir,
        )
    folder = f"{data_dir}/scifact/" if with_data_dir else "<folder>/scifact/ and set data_dir: "
    zip_name = cached_file_name(source["url"], "scifact.zip")
    assert (
        "; to run without the network, place the dataset in BEIR layout (corpus.jsonl[.gz], "
        f"queries.jsonl[.gz], qrels/test.tsv) at {folder}"
    ) in str(raised.value)
    assert (
        f"or place {zip_name} at {cache_dir / zip_name}, and set offline: true (or "
        "--config offline=true) so that nothing is fetched"
    ) in str(raised.value)


@pytest.mark.parametrize("how", ["flag", "HF_HUB_OFFLINE", "IRFLOW_OFFLINE"])
def test_offline_without_local_copy_says_what_to_place_where(server, dirs, monkeypatch, how):
    data_dir, cache_dir = dirs
    if how != "flag":
        monkeypatch.setenv(how, "1")
    source = {"type": "url", "url": server.url("/datasets/scifact.zip"), "md5": ZIP_MD5}

    with pytest.raises(DownloadError) as raised:
        locate_dataset(
            "scifact",
            source,
            split="test",
            data_dir=data_dir,
            cache_dir=cache_dir,
            offline=how == "flag",
        )

    message = str(raised.value)
    for expected in (
        str(data_dir / "scifact"),
        "corpus.jsonl",
        "queries.jsonl",
        "qrels/test.tsv",
        str(cache_dir / cached_file_name(source["url"], "scifact.zip")),
        ZIP_MD5,
    ):
        assert expected in message
    assert server.requests == []


def test_offline_uses_a_verified_cached_zip(server, dirs):
    data_dir, cache_dir = dirs
    cache_dir.mkdir()
    source = {"type": "url", "url": server.url("/scifact.zip"), "md5": ZIP_MD5}
    (cache_dir / cached_file_name(source["url"], "scifact.zip")).write_bytes(ZIP)

    found = locate_dataset(
        "scifact", source, split="test", data_dir=data_dir, cache_dir=cache_dir, offline=True
    )
    assert_scifact(found)
    assert server.requests == []

    source = {"type": "url", "url": server.url("/other.zip"), "md5": ZIP_MD5}
    (cache_dir / cached_file_name(source["url"], "other.zip")).write_bytes(b"not the right zip")
    with pytest.raises(DownloadError, match="checksum mismatch"):
        locate_dataset(
            "other", source, split="test", data_dir=data_dir, cache_dir=cache_dir, offline=True
        )


def test_local_folder_source_is_returned_as_is(dirs, tmp_path):
    data_dir, cache_dir = dirs
    folder = write_beir(tmp_path / "my-beir")
    source = {"type": "path", "path": str(folder)}
    found = locate_dataset("mine", source, split="test", data_dir=data_dir, cache_dir=cache_dir)
    assert found == folder

    (folder / "queries.jsonl").unlink()
    with pytest.raises(DownloadError, match=r"queries\.jsonl"):
        locate_dataset("mine", source, split="test", data_dir=data_dir, cache_dir=cache_dir)


def test_local_zip_source_with_files_at_its_root(dirs, tmp_path):
    data_dir, cache_dir = dirs
    local_zip = tmp_path / "mine.zip"
    local_zip.write_bytes(zip_bytes(beir_members(prefix="")))
    source = {"type": "path", "path": str(local_zip)}

    found = locate_dataset("mine", source, split="test", data_dir=data_dir, cache_dir=cache_dir)

    assert found == cache_dir / "mine"
    assert_scifact(found)
    assert [path.name for path in cache_dir.iterdir()] == ["mine"]


def test_zip_not_in_beir_layout_names_zip_and_missing_files(dirs, tmp_path):
    data_dir, cache_dir = dirs
    local_zip = tmp_path / "partial.zip"
    local_zip.write_bytes(zip_bytes({"partial/corpus.jsonl": jsonl(CORPUS)}))
    source = {"type": "path", "path": str(local_zip)}

    with pytest.raises(DownloadError) as raised:
        locate_dataset("partial", source, split="test", data_dir=data_dir, cache_dir=cache_dir)

    assert str(local_zip) in str(raised.value)
    assert "queries.jsonl" in str(raised.value)
    assert "qrels/test.tsv" in str(raised.value)
    assert list(cache_dir.iterdir()) == []


def test_unknown_source_shape_is_rejected(dirs):
    data_dir, cache_dir = dirs
    with pytest.raises(ValueError, match="no dataset source type 'ftp'; known: beir, huggingface"):
        source = {"type": "ftp", "url": "ftp://x"}
        locate_dataset("x", source, split="test", data_dir=data_dir, cache_dir=cache_dir)


# --- Hugging Face -----------------------------------------------------------------------------


def fake_snapshot(monkeypatch, write) -> list[dict]:
    calls: list[dict] = []

    def snapshot_download(**kwargs):
        calls.append(kwargs)
        write(Path(kwargs["local_dir"]))
        return str(kwargs["local_dir"])

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return calls


def test_huggingface_source_moves_snapshot_into_cache(monkeypatch, dirs):
    data_dir, cache_dir = dirs
    calls = fake_snapshot(monkeypatch, write_beir)
    source = {"type": "huggingface", "repo": "BeIR/scifact", "revision": "abc123"}

    found = locate_dataset("scifact", source, split="test", data_dir=data_dir, cache_dir=cache_dir)

    assert found == cache_dir / "scifact"
    assert_scifact(found)
    assert [path.name for path in cache_dir.iterdir()] == ["scifact"]
    assert calls[0]["repo_id"] == "BeIR/scifact"
    assert calls[0]["repo_type"] == "dataset"
    assert calls[0]["revision"] == "abc123"


def test_huggingface_failure_is_one_line(monkeypatch, dirs):
    data_dir, cache_dir = dirs

    def snapshot_download(**kwargs):
        # As huggingface_hub words a missing repository: several lines.
        raise OSError(
            "404 Client Error.\n\nRepository Not Found for url: "
            "https://huggingface.co/api/datasets/someone/missing.\nPlease make sure you "
            "specified the correct `repo_id` and `repo_type`."
        )

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    source = {"type": "huggingface", "repo": "someone/missing", "revision": None}
    with pytest.raises(DownloadError) as raised:
        locate_dataset("x", source, split="test", data_dir=data_dir, cache_dir=cache_dir)
    assert str(raised.value) == (
        "Hugging Face dataset someone/missing: 404 Client Error. Repository Not Found for url: "
        "https://huggingface.co/api/datasets/someone/missing. Please make sure you specified "
        "the correct `repo_id` and `repo_type`; to run without the network, place the dataset "
        f"in BEIR layout (corpus.jsonl[.gz], queries.jsonl[.gz], qrels/test.tsv) at {data_dir}/x/, "
        "and set offline: true (or --config offline=true) so that nothing is fetched"
    )
    assert list(cache_dir.iterdir()) == []


def test_huggingface_repo_not_in_beir_layout_names_missing_files(monkeypatch, dirs):
    data_dir, cache_dir = dirs
    fake_snapshot(monkeypatch, lambda folder: (folder / "corpus.jsonl").write_text("{}\n"))
    source = {"type": "huggingface", "repo": "someone/not-beir", "revision": None}

    with pytest.raises(DownloadError) as raised:
        locate_dataset("x", source, split="test", data_dir=data_dir, cache_dir=cache_dir)

    assert "someone/not-beir" in str(raised.value)
    assert "queries.jsonl" in str(raised.value)
    assert "qrels/test.tsv" in str(raised.value)
    assert list(cache_dir.iterdir()) == []


# --- safe extraction --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "member",
    ["../evil.txt", "scifact/../../evil.txt", "/tmp/evil.txt", "C:/evil.txt", "C:\\evil.txt"],
)
def test_zip_member_outside_target_is_refused(tmp_path, member):
    archive = tmp_path / "bad.zip"
    archive.write_bytes(zip_bytes({**beir_members(), member: b"gotcha"}))
    extract_to = tmp_path / "out" / "scifact"

    with pytest.raises(DownloadError, match="refusing member") as raised:
        safe_extract_zip(archive, extract_to)

    assert member in str(raised.value) or repr(member) in str(raised.value)
    assert contents(tmp_path) == ["bad.zip", "out"]


def test_zip_symlink_member_is_refused(tmp_path):
    archive = tmp_path / "link.zip"
    archive.write_bytes(zip_bytes(beir_members(), symlinks={"scifact/etc": "/etc"}))
    with pytest.raises(DownloadError, match="scifact/etc"):
        safe_extract_zip(archive, tmp_path / "out")
    assert contents(tmp_path) == ["link.zip"]


def test_corrupt_zip_is_an_error_naming_the_file(tmp_path):
    archive = tmp_path / "broken.zip"
    archive.write_bytes(ZIP[: len(ZIP) // 2])
    with pytest.raises(DownloadError, match=r"broken\.zip"):
        safe_extract_zip(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_huggingface_offline_fetches_nothing(monkeypatch, dirs):
    data_dir, cache_dir = dirs
    calls = fake_snapshot(monkeypatch, write_beir)
    source = {"type": "huggingface", "repo": "BeIR/scifact", "revision": None}
    with pytest.raises(DownloadError, match="not available offline") as raised:
        locate_dataset(
            "scifact", source, split="test", data_dir=data_dir, cache_dir=cache_dir, offline=True
        )
    assert str(data_dir / "scifact") in str(raised.value)
    assert calls == []


# --- ir_datasets document types: title once, body from the type's own fields ----------------


class FixtureDataset:
    """An ir_datasets dataset holding the documents given, one query and its judgement."""

    def __init__(self, docs: list):
        from ir_datasets.formats import GenericQuery, TrecQrel

        self.docs = docs
        self.queries = [GenericQuery("q1", "statins and breast cancer")]
        self.qrels = [TrecQrel("q1", docs[0].doc_id, 2, "0")]

    def has_docs(self):
        return True

    has_queries = has_qrels = has_docs

    def docs_iter(self):
        return iter(self.docs)

    def queries_iter(self):
        return iter(self.queries)

    def qrels_iter(self):
        return iter(self.qrels)


def doc_class(dataset_id: str):
    """The document type ir_datasets registers for ``dataset_id`` (no download needed)."""
    import ir_datasets

    return ir_datasets.load(dataset_id).docs_cls()


ABSTRACT = "Recent studies have suggested that statins may reduce the risk of recurrence."
TITLE = "Statin Use after Diagnosis of Breast Cancer and Survival"


@pytest.mark.parametrize(
    ("dataset_id", "fields", "text"),
    [
        (
            "nfcorpus/test",
            {"doc_id": "MED-10", "url": "http://www.ncbi.nlm.nih.gov/pubmed/25329299"}
            | {"title": TITLE, "abstract": ABSTRACT},
            ABSTRACT,
        ),
        (
            "cord19/trec-covid",
            {"doc_id": "ug7v899j", "doi": "10.1186/1471-2334-1-6", "date": "2001-07-04"}
            | {"title": TITLE, "abstract": ABSTRACT},
            ABSTRACT,
        ),
        (
            "msmarco-document/trec-dl-2019",
            {"doc_id": "D1555982", "url": "https://example.org/statins", "title": TITLE}
            | {"body": ABSTRACT},
            ABSTRACT,
        ),
        (
            "wapo/v2/trec-core-2018",
            {"doc_id": "w1", "url": "u", "title": TITLE, "author": "A. Writer"}
            | {"published_date": 0, "kicker": "Health", "body": ABSTRACT}
            | {"body_paras_html": (f"<p>{ABSTRACT}</p>",), "body_media": ()},
            ABSTRACT,
        ),
        (
            "nyt/trec-core-2017",
            {"doc_id": "n1", "headline": TITLE, "body": ABSTRACT, "source_xml": "<nitf/>"},
            ABSTRACT,
        ),
    ],
)
def test_an_ir_datasets_document_is_written_with_its_title_once(
    monkeypatch, dirs, dataset_id, fields, text
):
    """Document types without a ``text`` field: default_text() begins with the title, so a
    BEIR record's text must come from the body fields, not from it."""
    import ir_datasets

    doc = doc_class(dataset_id)(**fields)
    assert doc.default_text().startswith(TITLE)  # what was written as the text before
    monkeypatch.setattr(ir_datasets, "load", lambda name: FixtureDataset([doc]))
    _, cache_dir = dirs
    folder = locate_dataset(
        "irds",
        {"type": "ir_datasets", "id": dataset_id},
        split="test",
        data_dir=None,
        cache_dir=cache_dir,
        offline=True,
    )
    records = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    assert records == [{"_id": fields["doc_id"], "title": TITLE, "text": text}]


@functools.cache
def registered_document_types() -> dict[str, type]:
    """Every document type ir_datasets registers, by class name (no download needed)."""
    import ir_datasets

    types = {}
    for name in ir_datasets.registry:
        dataset = ir_datasets.registry[name]
        if dataset.has_docs():
            types[dataset.docs_cls().__name__] = dataset.docs_cls()
    return types


# Document types without text (touche-image holds images) are refused, naming their fields.
WITHOUT_TEXT = {"ToucheImageDoc"}


def test_every_ir_datasets_document_type_has_its_fields_named():
    types = registered_document_types()
    named = set(DOCUMENT_FIELDS) | HTML_DOCUMENTS
    assert set(types) - WITHOUT_TEXT == named  # each type named, and no name of no type
    for kind in DOCUMENT_FIELDS:
        title, body = DOCUMENT_FIELDS[kind]
        assert {title, *body} - {None} <= set(types[kind]._fields), kind
    image = types["ToucheImageDoc"](*[None] * len(types["ToucheImageDoc"]._fields))
    with pytest.raises(DownloadError, match=r"ToucheImageDoc \(fields: doc_id, png, webp"):
        document_fields(image)


def fixture_value(kind, label: str):
    """A value of annotation ``kind`` whose text is words unique to ``label``: a string, a list
    of strings, a tuple of namedtuple parts (CORD-19 sections, Highwire spans); None else."""
    import typing

    if kind is str:
        return f"{label}-word"
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (list, tuple) and args:
        part = args[0]
        if part is str:
            return [f"{label}-one", f"{label}-two"]
        if hasattr(part, "_fields"):
            return tuple(fixture_document(part, f"{label}{i}") for i in (1, 2))
    return 0 if kind is int else None


def fixture_document(cls, label: str = "doc"):
    import typing

    hints = typing.get_type_hints(cls)
    return cls(**{field: fixture_value(hints[field], f"{label}-{field}") for field in cls._fields})


# Where the fields named differ from what default_text() reads, and why.
NOT_AS_DEFAULT_TEXT = {
    # ir_datasets' docs: "The text field contains the anchor texts concatenated and the anchors
    # field contains the anchor texts as list"; default_text() reads both.
    "MsMarcoAnchorTextDocument": ["doc-text-word"],
    "MsMarcoV2AnchorTextDocument": ["doc-text-word"],
}


def test_each_document_type_reads_each_word_of_its_default_text_once():
    """Title and text together hold the words default_text() holds, each once (it begins
    with the title for most types; args.me puts the conclusion last)."""
    from collections import Counter

    checked = 0
    for kind, cls in registered_document_types().items():
        if kind in HTML_DOCUMENTS or kind in WITHOUT_TEXT or not hasattr(cls, "default_text"):
            continue
        doc = fixture_document(cls)
        title, text = document_fields(doc)
        expected = NOT_AS_DEFAULT_TEXT.get(kind, doc.default_text().split())
        assert Counter(f"{title} {text}".split()) == Counter(expected), kind
        checked += 1
    assert checked >= 45


def test_a_web_page_gives_its_html_title_and_body_apart():
    types = registered_document_types()
    page = b"<html><head><title>Statins</title></head><body><p>Statins lower LDL.</p></body></html>"
    for kind in HTML_DOCUMENTS:
        fields = dict.fromkeys(types[kind]._fields, "") | {"doc_id": "g1", "body": page}
        doc = types[kind](**fields | {"http_headers": b"Content-Type: text/html"})
        assert document_fields(doc) == ("Statins", "Statins lower LDL.")
        assert doc.default_text() == "StatinsStatins lower LDL."  # one text, and no space


def test_a_cached_ir_datasets_copy_of_an_older_field_mapping_is_written_again(monkeypatch, dirs):
    import ir_datasets

    doc = doc_class("nfcorpus/test")(doc_id="MED-10", url="u", title=TITLE, abstract=ABSTRACT)
    monkeypatch.setattr(ir_datasets, "load", lambda name: FixtureDataset([doc]))
    _, cache_dir = dirs

    def corpus() -> list[dict]:
        folder = locate_dataset(
            "irds", {"type": "ir_datasets", "id": "nfcorpus/test"}, split="test", data_dir=None,
            cache_dir=cache_dir, offline=True,
        )  # fmt: skip
        return [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]

    # A copy written under an earlier field mapping (revision 0: the title twice).
    monkeypatch.setattr(ir_datasets_source, "FIELDS_REVISION", 0)
    doubled = {"_id": "MED-10", "title": TITLE, "text": f"{TITLE} {ABSTRACT}"}
    assert corpus()
    (cache_dir / "irds" / "corpus.jsonl").write_text(json.dumps(doubled) + "\n")
    assert corpus() == [doubled]  # the cached copy, as written
    monkeypatch.setattr(ir_datasets_source, "FIELDS_REVISION", FIELDS_REVISION)
    record = cache_dir / "irds" / ir_datasets_source.IR_DATASETS_RECORD
    assert corpus() == [{"_id": "MED-10", "title": TITLE, "text": ABSTRACT}]
    assert json.loads(record.read_text())["fields_revision"] == FIELDS_REVISION


# --- issue 32: secrets in URLs, a cache keyed by its source, limits -------------------------


def beir_zip(text: str) -> bytes:
    """A BEIR zip whose one document says ``text``: tells copies of two sources apart."""
    members = beir_members() | {
        "scifact/corpus.jsonl.gz": gzip.compress(jsonl([{"_id": "d1", "text": text}]), mtime=0)
    }
    return zip_bytes(members)


def corpus_text(folder: Path) -> str:
    return json.loads(gzip.decompress((folder / "corpus.jsonl.gz").read_bytes()))["text"]


def test_a_token_in_a_url_reaches_no_log_manifest_parquet_or_database(server, tmp_path, caplog):
    """Item 3: a dataset and an external run fetched from ``?token=SECRET`` URLs, through a
    retry, a resume and a failing mirror; nothing irflow writes holds the token."""
    import duckdb
    import pyarrow as pa

    from irflow.core import contracts
    from irflow.core.fingerprint import file_md5
    from irflow.core.manifest import Manifest
    from irflow.evaluation.aggregate import build_database
    from irflow.retrieval.external_run import import_run, locate_run, recorded_settings
    from irflow.retrieval.runs import write_run

    caplog.set_level("DEBUG")
    server.files["/scifact.zip?token=SECRET"] = ZIP
    server.drop_first_after["/scifact.zip?token=SECRET"] = 100  # a retry, then a resume
    server.always_500.add("/broken.zip?X-Amz-Signature=SECRET")
    source = {
        "type": "url",
        "url": server.url("/broken.zip?X-Amz-Signature=SECRET"),
        "mirrors": [server.url("/scifact.zip?token=SECRET")],
    }
    cache_dir = tmp_path / "downloads"
    locate_dataset("scifact", source, split="test", data_dir=None, cache_dir=cache_dir)

    run_text = b"q1 Q0 d1 1 2.5 sys\n"
    server.files["/run.trec?token=SECRET"] = run_text
    server.drop_first_after["/run.trec?token=SECRET"] = 5
    settings = {"location": "http://user:SECRET@" + server.base[7:] + "/run.trec?token=SECRET"}
    path = locate_run(settings["location"], cache_dir / "runs", md5=md5_of(run_text))
    recorded = recorded_settings(settings)
    # The run imported and its manifest written as scripts/external_run.py does.
    tables = {"corpus": [{"doc_id": "d1", "title": "", "text": "t"}]}
    tables["queries"] = [{"query_id": "q1", "text": "q"}]
    for name, rows in tables.items():
        schema = getattr(contracts, name.upper())
        contracts.write_table(pa.Table.from_pylist(rows, schema), tmp_path / f"{name}.parquet")
    queries = tmp_path / "queries.parquet"
    run, report = import_run(
        path,
        tmp_path / "corpus.parquet",
        queries,
        queries,
        top_k=10,
        remove_self_matches=False,
        max_unknown_fraction=0.0,
    )
    run_path = tmp_path / "results" / "runs" / "scifact" / "ext.parquet"
    run_path.parent.mkdir(parents=True)
    write_run(run, run_path, {"stage": "external_run"} | recorded, tmp_path / "ext.trec", "ext")
    manifest = Manifest(tmp_path / "results" / "manifests" / "ext.json", stage="external_run")
    manifest.add(settings=recorded, file=str(path), file_md5=file_md5(path), **report)
    manifest.write()
    database = tmp_path / "results" / "irflow.duckdb"
    build_database(database, {"runs": [str(run_path)], "manifests": [str(manifest.path)]})

    assert "127.0.0.1" in caplog.text and "retrying" in caplog.text
    assert "SECRET" not in caplog.text
    with duckdb.connect(str(database), read_only=True) as db:
        lineage = db.execute("SELECT lineage::VARCHAR FROM lineage").fetchall()
    assert "/run.trec" in str(lineage) and "SECRET" not in str(lineage)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != database]
    assert [p for p in written if b"SECRET" in p.read_bytes() or "SECRET" in p.name] == []


def test_the_experiment_record_holds_the_config_without_url_secrets(tmp_path):
    """Item 3: results/experiment.json records the validated config, URLs made public."""
    from irflow.workflow.experiment import write_record

    config = {
        "datasets": {
            "a": {"source": {"type": "url", "url": "https://u:SECRET@h.example/a.zip?token=SECRET"}}
        },
        "retrievers": {"ext": {"type": "run", "path": "https://h.example/{dataset}.trec#SECRET"}},
        "prompt": "see https://h.example/?q=kept inside a text",
    }
    record = tmp_path / "experiment.json"
    write_record({"config_files": []}, config, record)
    recorded = json.loads(record.read_text())["config"]
    assert "SECRET" not in record.read_text()
    assert recorded["datasets"]["a"]["source"]["url"] == "https://h.example/a.zip"
    assert recorded["retrievers"]["ext"]["path"] == "https://h.example/{dataset}.trec"
    assert recorded["prompt"] == config["prompt"]  # a text that holds a URL is no URL


def test_a_changed_url_or_md5_for_the_same_dataset_name_is_fetched_again(server, dirs):
    """Item 4: the cached copy is of the source configured, not of the dataset's name."""
    _, cache_dir = dirs
    first, second, third = beir_zip("first"), beir_zip("second"), beir_zip("third")
    server.files["/v1/scifact.zip"], server.files["/v2/scifact.zip"] = first, second

    def fetched(url: str, md5: str) -> str:
        source = {"type": "url", "url": server.url(url), "md5": md5}
        return corpus_text(locate_dataset("scifact", source, split="test", data_dir=None,
                                          cache_dir=cache_dir))  # fmt: skip

    assert fetched("/v1/scifact.zip", md5_of(first)) == "first"
    assert fetched("/v2/scifact.zip", md5_of(second)) == "second"  # another URL
    server.files["/v2/scifact.zip"] = third  # the file at the URL was replaced
    assert fetched("/v2/scifact.zip", md5_of(third)) == "third"  # another md5
    requests = len(server.requests)
    assert fetched("/v2/scifact.zip", md5_of(third)) == "third"  # the same source: cached
    assert len(server.requests) == requests


def test_a_changed_hugging_face_revision_is_fetched_again(monkeypatch, dirs):
    _, cache_dir = dirs
    revisions = []

    def fake_snapshot_download(repo_id, repo_type, revision, local_dir):
        revisions.append(revision)
        write_beir(Path(local_dir))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    for revision in ("v1", "v1", "v2"):
        source = {"type": "huggingface", "repo": "BeIR/scifact", "revision": revision}
        locate_dataset("scifact", source, split="test", data_dir=None, cache_dir=cache_dir)
    assert revisions == ["v1", "v2"]


def test_zips_whose_urls_end_alike_do_not_share_a_cache_file(server, dirs):
    """Item 4: ``uc?id=...`` (Google Drive) and ``.../data.zip?download=1`` name no file."""
    _, cache_dir = dirs
    served = {
        "a": ("/uc?id=A", beir_zip("a")),
        "b": ("/uc?id=B", beir_zip("b")),
        "c": ("/one/data.zip?download=1", beir_zip("c")),
        "d": ("/two/data.zip?download=1", beir_zip("d")),
    }
    for name, (url, data) in served.items():
        server.files[url] = data
        source = {
            "type": "url",
            "url": server.url(url),
        }  # no md5: nothing else would tell them apart
        found = locate_dataset(name, source, split="test", data_dir=None, cache_dir=cache_dir)
        assert corpus_text(found) == name
    assert len(list(cache_dir.glob("*.zip"))) + len(list(cache_dir.glob("*-uc"))) == 4


def test_a_resume_against_a_server_whose_file_changed_starts_from_zero(server, tmp_path):
    """Item 4: If-Range carries the first response's ETag; the changed file comes whole."""
    old, new = bytes(range(256)) * 40, bytes(reversed(range(256))) * 40
    server.files["/run.trec"] = old
    server.drop_first_after["/run.trec"] = 4000
    dest = tmp_path / "run.trec"
    with pytest.raises(DownloadError):
        fetch_url(server.url("/run.trec"), dest, retries=0)
    assert dest.with_name("run.trec.part").stat().st_size == 4000
    server.files["/run.trec"] = new

    fetch_url(server.url("/run.trec"), dest)

    assert dest.read_bytes() == new
    assert server.requests[-1] == ("/run.trec", "bytes=4000-")


def test_a_part_file_is_resumed_only_from_its_own_url_and_with_a_validator(server, tmp_path):
    """Item 4: a mirror never appends to another host's partial file; a file served without
    ETag or Last-Modified cannot be checked, so it is not resumed either."""
    server.files["/main/scifact.zip"] = server.files["/mirror/scifact.zip"] = ZIP
    server.drop_first_after["/main/scifact.zip"] = 100
    dest = tmp_path / "scifact.zip"
    with pytest.raises(DownloadError):
        fetch_url(server.url("/main/scifact.zip"), dest, retries=0)

    fetch_url(server.url("/mirror/scifact.zip"), dest, md5=ZIP_MD5)
    assert server.requests[-1] == ("/mirror/scifact.zip", None)

    server.etags = False
    server.drop_first_after["/main/scifact.zip"] = 100
    dest.unlink()
    with pytest.raises(DownloadError):
        fetch_url(server.url("/main/scifact.zip"), dest, retries=0)
    fetch_url(server.url("/main/scifact.zip"), dest, md5=ZIP_MD5)
    assert server.requests[-1] == ("/main/scifact.zip", None)


def test_run_urls_of_the_same_file_name_are_cached_apart(server, tmp_path):
    """Item 4, for external runs: another URL is another cached file."""
    from irflow.retrieval.external_run import locate_run

    server.files["/a/run.trec.gz"], server.files["/b/run.trec.gz"] = b"a", b"b"
    first = locate_run(server.url("/a/run.trec.gz"), tmp_path)
    second = locate_run(server.url("/b/run.trec.gz"), tmp_path)
    assert (first.read_bytes(), second.read_bytes()) == (b"a", b"b")
    assert second.name.endswith(".gz")  # the suffix the reader goes by


def test_a_cache_folder_irflow_did_not_write_is_never_deleted(server, dirs):
    """Item 5: only a folder with irflow's marker is replaced."""
    _, cache_dir = dirs
    server.files["/scifact.zip"] = ZIP
    mine = cache_dir / "scifact" / "notes.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("the user's own")
    source = {"type": "url", "url": server.url("/scifact.zip")}

    with pytest.raises(DownloadError, match="not written by irflow") as raised:
        locate_dataset("scifact", source, split="test", data_dir=None, cache_dir=cache_dir)
    assert str(cache_dir / "scifact") in str(raised.value)
    assert mine.read_text() == "the user's own"
    assert server.requests == []

    mine.unlink()
    mine.parent.rmdir()
    found = locate_dataset("scifact", source, split="test", data_dir=None, cache_dir=cache_dir)
    assert (found / download_cache.MARKER).is_file()


def test_download_dir_equal_to_data_dir_is_refused_naming_both_keys():
    config = minimal_config("scifact", data_dir="data/beir", download_dir="./data/beir/")
    with pytest.raises(ConfigError, match="'download_dir' and 'data_dir' name the same folder"):
        validate_config(config, SCHEMA)
    assert validate_config(config | {"download_dir": "results/downloads"}, SCHEMA)


def test_file_urls_are_refused_at_config_time_and_never_retried(tmp_path, isolated):
    """Item 8: httpx has no file:// transport; a file:// URL is a config error, and a request
    with one fails at once."""
    source = {"type": "url", "url": f"file://{tmp_path}/scifact.zip"}
    with pytest.raises(ConfigError, match="datasets.scifact.source"):
        validated(datasets={"scifact": {"source": source}})

    with pytest.raises(DownloadError, match="after 1 attempt"):
        fetch_url(f"file://{tmp_path}/scifact.zip", tmp_path / "scifact.zip")
    assert isolated == []  # no backoff: nothing was retried


@pytest.mark.parametrize(("limit", "value", "message"), [
    ("MAX_ZIP_ENTRIES", 2, "3 members, more than the 2"),
    ("MAX_ZIP_BYTES", 100, "more than the 100"),
])  # fmt: skip
def test_a_zip_past_the_limits_is_refused_before_anything_is_extracted(
    monkeypatch, tmp_path, limit, value, message
):
    """Item 8: a zip bomb (or a zip of no dataset) stops at its central directory."""
    archive = tmp_path / "bomb.zip"
    archive.write_bytes(zip_bytes({"a": b"x" * 60, "b": b"y" * 60, "c": b""}))
    monkeypatch.setattr(download, limit, value)
    with pytest.raises(DownloadError, match=message):
        safe_extract_zip(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_ir_datasets_file_of_another_md5_is_an_error(tmp_path):
    """Item 8: a file ir_datasets read that is not the one it publishes is refused."""
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"{}\n")
    actual = md5_of(b"{}\n")
    with pytest.raises(DownloadError, match=f"{path}: md5 {actual}, not the 0+ "):
        ir_datasets_source.ir_datasets_files_checked({str(path): "0" * 32})
    assert ir_datasets_source.ir_datasets_files_checked({str(path): actual})[0]["md5"] == actual


# all-MiniLM-L6-v2's repo: the weights in five formats besides the files a model needs.
MINILM_FILES = [
    ".gitattributes", "1_Pooling/config.json", "README.md", "config.json",
    "config_sentence_transformers.json", "data_config.json", "model.safetensors",
    "modules.json", "onnx/model.onnx", "onnx/model_O1.onnx", "openvino/openvino_model.bin",
    "openvino/openvino_model.xml", "pytorch_model.bin", "rust_model.ot",
    "sentence_bert_config.json", "special_tokens_map.json", "tf_model.h5", "tokenizer.json",
    "tokenizer_config.json", "train_script.py", "vocab.txt",
]  # fmt: skip


def test_a_model_snapshot_downloads_only_what_the_model_loads(monkeypatch):
    """Item 8: allow_patterns keeps one copy of the weights, the configs and the tokenizer."""
    from huggingface_hub.utils import filter_repo_objects

    from irflow.encoding import models

    calls = []
    monkeypatch.setattr(huggingface_hub, "list_repo_files", lambda repo, revision: MINILM_FILES)
    monkeypatch.setattr(
        huggingface_hub, "snapshot_download", lambda *args, **kwargs: calls.append(kwargs) or "/x"
    )
    models.resolve_model({"id": "sentence-transformers/all-MiniLM-L6-v2", "revision": None})
    kept = sorted(filter_repo_objects(MINILM_FILES, allow_patterns=calls[0]["allow_patterns"]))
    assert kept == [
        "1_Pooling/config.json", "config.json", "config_sentence_transformers.json",
        "data_config.json", "model.safetensors", "modules.json", "sentence_bert_config.json",
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    ]  # fmt: skip
    older = ["config.json", "pytorch_model.bin", "2_Dense/pytorch_model.bin", "tf_model.h5"]
    assert models.model_file_patterns(older)[-2:] == [
        "2_Dense/pytorch_model.bin",
        "pytorch_model.bin",
    ]


def test_offline_keeps_models_and_tokenizers_off_the_network(monkeypatch):
    """Item 8: ``offline: true`` reaches each job as IRFLOW_OFFLINE (scripts/_common.py);
    models and tokenizers then load with local_files_only."""
    from irflow.core.offline import go_offline
    from irflow.encoding import models

    for var in ("HF_HUB_OFFLINE", "IRFLOW_OFFLINE"):
        monkeypatch.setenv(var, "0")  # restored after the test, whatever go_offline sets
    go_offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # IRFLOW_OFFLINE alone must be enough
    calls = []

    def listing(*args, **kwargs):
        raise AssertionError("listed the repo offline")

    monkeypatch.setattr(huggingface_hub, "list_repo_files", listing)
    monkeypatch.setattr(
        huggingface_hub, "snapshot_download", lambda *args, **kwargs: calls.append(kwargs) or "/x"
    )
    fast = SimpleNamespace(is_fast=True)
    loaded = []
    loader = SimpleNamespace(from_pretrained=lambda *a, **kw: loaded.append(a) or fast)
    # A stand-in for transformers, whose import alone takes seconds.
    monkeypatch.setitem(sys.modules, "transformers", SimpleNamespace(AutoTokenizer=loader))
    models.resolve_model({"id": "org/model", "revision": None})
    # The tokenizer's files are found as the model's are, then read from that folder.
    assert models.load_tokenizer({"id": "org/model", "revision": None}) is fast
    assert [call.get("local_files_only") for call in calls] == [True, True]
    assert loaded == [("/x",)]
