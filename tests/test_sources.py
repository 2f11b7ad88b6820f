"""Dataset source types (irflow.data.sources): each source names its ``type``, never guessed
from its keys; a source type of the user's, installed as an ``irflow.sources`` entry point, is
checked with the config and fetched by the download rule; local folders are checked before any
job runs; the download job's params are those irflow wrote before types, for the same data."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import copied_source
import pytest
from conftest import REPO, SCHEMA, TINY_CORPUS, TINY_QRELS, TINY_QUERIES, snakemake, write_beir
from pydantic import ValidationError

from irflow.core.errors import ConfigError, DownloadError
from irflow.data import sources
from irflow.data.catalog import catalog_entry
from irflow.data.layouts import dataset_files
from irflow.workflow.config import expand_config, validate_config
from irflow.workflow.run_inputs import Plan


def configured(datasets: dict, **config) -> dict:
    config = {"datasets": datasets, "retrievers": {"bm25": {"type": "bm25"}}} | config
    return validate_config(expand_config(config), SCHEMA)


def refusal(datasets: dict, **config) -> str:
    with pytest.raises(ConfigError) as refused:
        configured(datasets, **config)
    return str(refused.value)


# --- the type is written, never guessed --------------------------------------------------------


@pytest.mark.parametrize(
    ("untyped", "says"),
    [
        ({"beir": "scifact"}, "write {type: beir, name: scifact} (was {beir: scifact})"),
        ({"path": "data/mine"}, "write {type: path, path: data/mine} (was {path: data/mine})"),
        (
            {"huggingface": "BeIR/scifact"},
            "write {type: huggingface, repo: BeIR/scifact} (was {huggingface: BeIR/scifact})",
        ),
        (
            {"ir_datasets": "beir/scifact"},
            "write {type: ir_datasets, id: beir/scifact} (was {ir_datasets: beir/scifact})",
        ),
        (
            {"url": "https://example.org/mine.zip", "md5": None},
            "write {type: url, url: https://example.org/mine.zip, md5: null} "
            "(was {url: https://example.org/mine.zip, md5: null})",
        ),
        # Every type the registry holds, in name order.
        ({"ftp": "x"}, "name one of the types: " + ", ".join(sorted(sources.SOURCES.built_in()))),
    ],
)
def test_a_source_without_a_type_is_refused_with_the_block_to_write(untyped, says):
    """On main each of these was taken for the type its keys suggested (the last refused with
    a list of keys)."""
    assert refusal({"mine": {"source": untyped}}).splitlines()[1:] == [
        f"  config key 'datasets.mine.source' has no `type`; {says}"
    ]


def test_a_split_in_a_source_says_split_is_top_level(tmp_path):
    write_beir(tmp_path / "mine", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, "dev")
    message = refusal(
        {"mine": {"source": {"type": "path", "path": str(tmp_path / "mine"), "split": "dev"}}}
    )
    assert message.splitlines()[1:] == [
        "  config key 'datasets.mine.source.split': a source has no split; the split scored is "
        "the top-level `split` (for this dataset alone: `datasets.mine.split`)"
    ]
    # Where it says: the dataset's own split, read from its folder's qrels/dev.tsv.
    config = configured(
        {"mine": {"source": {"type": "path", "path": str(tmp_path / "mine")}, "split": "dev"}}
    )
    assert config["datasets"]["mine"]["split"] == "dev"


# --- local folders are checked with the config (issue 42, item 6) -----------------------------


def test_a_path_source_is_checked_before_any_job_runs(tmp_path):
    """On main all three were accepted, and the download job failed (or, for data_dir, fetched
    the source instead)."""
    folder = write_beir(tmp_path / "mine", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, "test")
    path = {"type": "path", "path": str(folder)}
    assert configured({"mine": {"source": path}})["datasets"]["mine"]["source"] == path

    missing = {"type": "path", "path": str(tmp_path / "absent")}
    assert refusal({"mine": {"source": missing}}).splitlines()[1:] == [
        f"  config key 'datasets.mine.source.path': {tmp_path / 'absent'} does not exist"
    ]
    # The folder holds test's qrels; the split scored is dev.
    assert refusal({"mine": {"source": path}}, split="dev").splitlines()[1:] == [
        f"  config key 'datasets.mine.source.path': {folder} is not a dataset folder for split "
        "'dev': BEIR layout lacks qrels/dev.tsv"
    ]


def test_a_folder_in_data_dir_without_the_scored_qrels_is_refused_with_the_config(tmp_path):
    write_beir(tmp_path / "data" / "scifact", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, "train")
    message = refusal(
        {"scifact": {"source": {"type": "beir", "name": "scifact"}}},
        data_dir=str(tmp_path / "data"),
    )
    assert message.splitlines()[1:] == [
        f"  config key 'data_dir': {tmp_path / 'data' / 'scifact'} is not a dataset folder for "
        "split 'test': BEIR layout lacks qrels/test.tsv"
    ]


def test_a_dry_run_of_a_folder_without_qrels_stops_on_a_one_line_error(tmp_path):
    """The workflow's own config check (the Snakefile's), before any job is planned."""
    write_beir(tmp_path / "mine", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, "train")
    config = {
        "datasets": {"mine": {"source": {"type": "path", "path": str(tmp_path / "mine")}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    result = snakemake(tmp_path, "--dry-run", "rules", config=config, check=False)
    assert result.returncode != 0
    expected = (
        f"config key 'datasets.mine.source.path': {tmp_path / 'mine'} is not a dataset folder "
        "for split 'test': BEIR layout lacks qrels/test.tsv"
    )
    output = (result.stdout + result.stderr).splitlines()
    assert f"  {expected}" in output
    assert not any("download" in line for line in output)  # no job planned


# --- a BEIR folder's error speaks of BEIR (issue 42, item 8) ---------------------------------


def test_a_beir_folder_error_names_only_beirs_files(tmp_path):
    """On main: '... BEIR layout lacks qrels/test.tsv; PosIR layout lacks corpus.parquet,
    queries.parquet, qrels/test.parquet'."""
    folder = write_beir(tmp_path / "mine", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, "train")
    with pytest.raises(DownloadError) as raised:
        dataset_files(folder, "test")
    assert str(raised.value) == (
        f"{folder} is not a dataset folder: BEIR layout lacks qrels/test.tsv"
    )


def test_a_beir_dataset_not_available_offline_is_told_of_beirs_files(tmp_path):
    """On main: '... place the BEIR folder at <folder>/mine/ and set data_dir: <folder>
    (corpus.jsonl[.gz], queries.jsonl[.gz], qrels/test.tsv) or a PosIR folder there
    (corpus.parquet, queries.parquet, qrels/test.parquet) or the zip ...'."""
    source = {"type": "url", "url": "https://example.org/mine.zip"}
    with pytest.raises(DownloadError) as raised:
        sources.locate_dataset(
            "mine", source, split="test", data_dir=None, cache_dir=tmp_path, offline=True
        )
    assert str(raised.value).startswith(
        "dataset 'mine' is not available offline: place the BEIR folder at <folder>/mine/ and "
        "set data_dir: <folder> (corpus.jsonl[.gz], queries.jsonl[.gz], qrels/test.tsv) or the "
        "zip "
    )


# --- the download job's params: as before types, for the same data ---------------------------


def test_the_download_params_are_the_untyped_source_as_irflow_wrote_it(tmp_path):
    """The download job's params (its settings stamp, and Snakemake's params trigger) are what
    irflow wrote before source types for the same data, so that no result is made again: a
    catalog name gives the zip URL and MD5 sum (with the schema's mirrors default) main's
    catalog resolution gave; the other types drop their type and keep their old key names."""
    folder = write_beir(tmp_path / "mine", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, "test")
    config = configured(
        {
            "fact": {"source": {"type": "beir", "name": "scifact"}},
            "tex": {"source": {"type": "beir", "name": "cqadupstack-tex"}},
            "hf": {"source": {"type": "huggingface", "repo": "BeIR/scifact", "revision": "r1"}},
            "irds": {"source": {"type": "ir_datasets", "id": "beir/scifact/test"}},
            "local": {"source": {"type": "path", "path": str(folder)}},
            "zip": {"source": {"type": "url", "url": "https://example.org/z.zip", "md5": None}},
        }
    )
    params = {name: sources.download_params(config, name) for name in config["datasets"]}
    # Snakemake records a dict param by its repr, the settings stamp by its JSON.
    assert [repr(p) for p in params.values()] == [repr(dict(p)) for p in params.values()]
    scifact, tex = (
        catalog_entry("beir", name)["source"] for name in ("scifact", "cqadupstack-tex")
    )
    assert params == {
        "fact": {"md5": scifact["md5"], "mirrors": [], "url": scifact["url"]},
        "tex": {"folder": "cqadupstack/tex", "md5": tex["md5"], "mirrors": [], "url": tex["url"]},
        "hf": {"huggingface": "BeIR/scifact", "revision": "r1"},
        "irds": {"ir_datasets": "beir/scifact/test"},
        "local": {"path": str(folder)},
        "zip": {"md5": None, "mirrors": [], "url": "https://example.org/z.zip"},
    }


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"type": "huggingface", "repo": "BeIR/scifact", "revison": "r1"}, "revison"),
        ({"type": "url", "url": "https://example.org/z.zip", "md5": "not-an-md5"}, "md5"),
        ({"type": "ir_datasets", "id": "beir/scifact", "split": "test"}, "split"),
        ({"type": "path", "path": "data/mine", "folder": "mine"}, "folder"),
    ],
)
def test_a_built_in_type_types_its_block_and_refuses_a_key_its_schema_lacks(block, field):
    """A built-in source type reads the block it is given through its generated model
    (irflow.core.settings_types): a block that did not pass the config's validation (a
    caller of irflow.data.sources.locate_dataset) with a misspelt or malformed key is refused,
    naming the key. Read as a dict, the key was passed over: a misspelt revision fetched the
    repo's newest."""
    with pytest.raises(ValidationError, match=field):
        sources.source_type(block["type"]).cache_key(block)


def test_a_url_sources_mirrors_and_folder_are_read_typed():
    """The url type's typed block gives the cache key of the dict it was given: its folder
    only where one is given, its md5 null where none is."""
    url = sources.source_type("url")
    zip_url = "https://example.org/z.zip"
    assert url.cache_key({"type": "url", "url": zip_url}) == {"url": zip_url, "md5": None}
    block = {"type": "url", "url": zip_url, "mirrors": ["https://mirror.org/z.zip"]}
    assert url.cache_key(block | {"folder": "cqadupstack/tex"}) == {
        "url": zip_url,
        "md5": None,
        "folder": "cqadupstack/tex",
    }


# --- the registry -----------------------------------------------------------------------------


def test_every_built_in_type_is_one_module_and_one_schema_fragment():
    """A built-in source type is its module and its fragment among the source's choices: the
    registry finds the module, and nothing else lists the types."""
    choices = SCHEMA["$defs"]["dataset"]["properties"]["source"]["oneOf"]
    fragments = [choice["$ref"].removeprefix("#/$defs/") for choice in choices]
    built_in = sources.SOURCES.built_in()
    assert sorted(fragments) == sorted(source.schema_def for source in built_in.values())
    for name, source in built_in.items():
        assert SCHEMA["$defs"][source.schema_def]["properties"]["type"] == {"const": name}


# --- a source type of the user's --------------------------------------------------------------


@pytest.fixture
def plugin(tmp_path, monkeypatch) -> Path:
    """A package outside irflow installed with an ``irflow.sources`` entry point ``copied``
    (tests/copied_source.py): its dist-info, as pip leaves it, on the path."""
    site = copied_source.install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    sources.SOURCES.installed.cache_clear()
    yield site
    sources.SOURCES.installed.cache_clear()


def test_a_source_type_of_the_users_is_checked_with_the_config(plugin, tmp_path):
    folder = write_beir(tmp_path / "mine", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, "test")
    source = {"type": "copied", "from": str(folder)}
    assert configured({"mine": {"source": source}})["datasets"]["mine"]["source"] == source
    # Its schema fragment and its own checks apply, each naming the key.
    assert "config key 'datasets.mine.source" in refusal({"mine": {"source": {"type": "copied"}}})
    assert refusal({"mine": {"source": {"type": "copied", "from": "nowhere"}}}).splitlines()[
        1:
    ] == ["  config key 'datasets.mine.source.from': no folder nowhere"]
    # Without the package, the type is unknown: the choices name every installed type.
    sources.SOURCES.installed.cache_clear()
    sys.path.remove(str(plugin))
    [line] = refusal({"mine": {"source": source}}).splitlines()[1:]
    said = "  config key 'datasets.mine.source.type': 'copied' is not allowed; allowed values: "
    assert line.startswith(said)
    assert sorted(line.removeprefix(said).split(", ")) == sorted(
        map(repr, sources.SOURCES.built_in())
    )


class OwnFolder(copied_source.CopiedFolder):
    """The user's type, reading its folder where it is (as ``path`` does) rather than a copy."""

    def local_path(self, spec):
        return spec["from"]


def test_the_folder_a_source_type_reads_where_it_is_gives_the_download_jobs_inputs(
    tmp_path, monkeypatch
):
    """Its files are the download job's inputs, so that an edit reruns the dataset; only type
    ``path`` had its files there, told by its name in irflow.workflow.inputs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sources.SOURCES, "installed", lambda: {"copied": OwnFolder()})
    folder = write_beir(tmp_path / "mine", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, "test")
    config = configured({"mine": {"source": {"type": "copied", "from": str(folder)}}})
    inputs = Plan(config, REPO).local_files(SimpleNamespace(dataset="mine"))
    assert inputs == [str(path) for path in dataset_files(folder, "test")]


@pytest.mark.e2e
def test_a_source_type_of_the_users_is_fetched_by_the_download_rule(user_plugins_run):
    """The real download rule, in a Snakemake process that finds the type by its entry point,
    puts the user's copy in the download cache and records it as any other dataset; the run
    goes on to the database (tests/test_custom_family.py)."""
    record = json.loads((user_plugins_run / "results/datasets/tiny/source.json").read_text())
    assert record["corpus"] == "results/downloads/tiny/corpus.jsonl"
    assert record["qrels"] == "results/downloads/tiny/qrels/test.tsv"
    copy = (user_plugins_run / record["corpus"]).read_bytes()
    assert copy == (user_plugins_run / "tiny-source" / "corpus.jsonl").read_bytes()


def test_an_entry_point_may_not_take_a_built_in_types_name(plugin, tmp_path):
    info = plugin / "copied_source-0.1.dist-info" / "entry_points.txt"
    info.write_text("[irflow.sources]\nurl = copied_source:CopiedFolder\n")
    sources.SOURCES.installed.cache_clear()
    with pytest.raises(ConfigError, match="entry point 'url' .* takes the name of a built-in"):
        sources.SOURCES.installed()
