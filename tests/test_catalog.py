"""The dataset catalog: every BEIR dataset by name, resolved to its official zip and MD5 sum."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import (
    REPO,
    SCHEMA,
    TINY_CORPUS,
    TINY_QRELS,
    TINY_QUERIES,
    place_local_datasets,
    snakemake,
    write_beir,
)
from loopback_http import serving
from test_download import beir_members, md5_of, zip_bytes

from irflow.core.errors import ConfigError, DownloadError
from irflow.data.catalog import catalog_entry, dataset_names
from irflow.data.download_cache import cached_file_name
from irflow.data.layouts import dataset_files
from irflow.data.sources import concrete_source, locate_dataset
from irflow.workflow.config import expand_config, load_config, validate_config

# The rows of BEIR's README dataset table (beir-cellar/beir), CQADupStack one row.
BEIR_TABLE = (
    "msmarco trec-covid nfcorpus bioasq nq hotpotqa fiqa signal1m trec-news robust04 arguana "
    "webis-touche2020 cqadupstack quora dbpedia-entity scidocs fever climate-fever scifact"
).split()
LICENSED = ("bioasq", "signal1m", "trec-news", "robust04")
CQADUPSTACK = (
    "android english gaming gis mathematica physics programmers stats tex unix webmasters wordpress"
).split()


def configured(datasets: dict, **config) -> dict:
    return validate_config(
        expand_config({"datasets": datasets, "retrievers": {"bm25": {"type": "bm25"}}} | config),
        SCHEMA,
    )


def licensed_data_dir(tmp_path: Path) -> Path:
    for name in LICENSED:
        write_beir(tmp_path / "data" / name, TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    return tmp_path / "data"


def test_every_beir_dataset_has_a_name_and_a_source_or_how_to_obtain_it():
    names = dataset_names("beir")
    assert len(names) == len(BEIR_TABLE) - 1 + 12  # CQADupStack as its 12 subforums
    assert {name.split("-")[0] if name.startswith("cqadupstack") else name for name in names} == (
        set(BEIR_TABLE)
    )
    for name in names:
        entry = catalog_entry("beir", name)
        if name in LICENSED:
            assert entry["source"] is None and "data_dir" in entry["obtain"]
            continue
        source = entry["source"]
        zip_name = "cqadupstack" if name.startswith("cqadupstack") else name
        assert source["url"] == (
            f"https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{zip_name}.zip"
        )
        assert len(source["md5"]) == 32 and int(source["md5"], 16) >= 0
    assert catalog_entry("beir", "msmarco")["split"] == "dev"
    assert configured({"beir": ["msmarco"]})["datasets"]["msmarco"]["split"] == "dev"
    assert catalog_entry("beir", "cqadupstack-tex")["source"]["folder"] == "cqadupstack/tex"


def test_every_ir_datasets_mirror_is_an_id_ir_datasets_knows():
    """The ids are ir_datasets' own: its registry (offline, no data) lists each."""
    import ir_datasets

    for name in dataset_names("beir"):
        mirror = catalog_entry("beir", name)["mirrors"].get("ir_datasets")
        if mirror is not None:
            assert mirror in ir_datasets.registry, (name, mirror)


def test_the_whole_benchmark_by_name_is_30_validated_dataset_blocks(tmp_path):
    data_dir = licensed_data_dir(tmp_path)
    config = configured({"beir": "all"}, data_dir=str(data_dir))
    datasets = config["datasets"]
    assert sorted(datasets) == sorted(dataset_names("beir"))
    assert datasets["scifact"]["source"] == {"type": "beir", "name": "scifact"}
    assert concrete_source(config, "scifact") == catalog_entry("beir", "scifact")["source"] | {
        "type": "url",
        "mirrors": [],
    }
    assert concrete_source(config, "robust04") == {
        "type": "path",
        "path": str(data_dir / "robust04"),
    }
    assert {n for n, d in datasets.items() if d.get("group") == "cqadupstack"} == {
        f"cqadupstack-{forum}" for forum in CQADUPSTACK
    }
    assert {n for n, d in datasets.items() if d["remove_self_matches"]} == {
        "arguana",
        "quora",
        "fiqa",
        "fever",
        "msmarco",
    }


def test_a_list_names_a_group_once_and_a_dataset_block_overrides_the_catalog():
    config = configured(
        {
            "beir": ["cqadupstack", "arguana"],
            "arguana": {"source": {"type": "beir", "name": "arguana"}},
        }
        | {"mine": {"source": {"type": "beir", "name": "quora"}, "remove_self_matches": False}}
    )
    assert len(config["datasets"]) == 12 + 2
    assert config["datasets"]["mine"]["remove_self_matches"] is False
    assert config["datasets"]["arguana"]["remove_self_matches"] is True


@pytest.mark.parametrize(
    ("datasets", "message"),
    [
        (
            {"s": {"source": {"type": "beir", "name": "scifcat"}}},
            "config key 'datasets.s.source.name': beir has no dataset 'scifcat'; did you mean "
            "'scifact'?",
        ),
        (
            {"c": {"source": {"type": "beir", "name": "cqadupstack"}}},
            "config key 'datasets.c.source.name': beir's cqadupstack is 12 datasets, one per "
            "subforum (cqadupstack-android, ...)",
        ),
        (
            {"r": {"source": {"type": "beir", "name": "robust04"}}},
            "config key 'datasets.r.source.name': Robust04 is not distributed with beir; "
            "Robust04 needs TREC Disks 4 and 5",
        ),
        ({"beir": "everything"}, "config key 'datasets.beir': 'everything' is neither 'all'"),
    ],
)
def test_a_wrong_name_is_refused_naming_the_key(datasets, message):
    with pytest.raises(ConfigError) as error:
        configured(datasets)
    assert message in str(error.value)


def test_the_shipped_configs_write_no_beir_url_or_md5():
    """Each BEIR dataset's URL and MD5 sum are written once: in the catalog."""
    official = [catalog_entry("beir", name)["source"] for name in ("scifact", "nfcorpus")]
    strays = []
    for path in sorted(REPO.glob("config/**/*.yaml")) + sorted(REPO.glob("tests/*.py")):
        text = path.read_text(encoding="utf-8")
        strays += [
            f"{path.relative_to(REPO)}: {value}"
            for source in official
            for value in (source["url"], source["md5"])
            if value in text
        ]
    assert strays == []


def test_a_catalog_dataset_downloads_from_the_catalogs_path_and_is_checked_by_its_md5(
    tmp_path, monkeypatch
):
    """A loopback mirror serves a small zip at the catalog's own path: the download asks for
    that path, checks the catalog's MD5 sum (which the small zip fails), and with the small
    zip's MD5 sum unpacks the subforum's folder of the zip."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    for variable in ("HF_HUB_OFFLINE", "IRFLOW_OFFLINE"):  # no offline mode from elsewhere
        monkeypatch.delenv(variable, raising=False)
    archive = zip_bytes(beir_members("cqadupstack/gis/") | beir_members("cqadupstack/tex/"))
    with serving() as server:
        server.files["/thakur/BEIR/datasets/cqadupstack.zip"] = archive
        mirror = server.url("/thakur/BEIR/datasets")
        config = configured({"beir": ["cqadupstack"]}, catalog_mirrors={"beir": mirror})
        source = concrete_source(config, "cqadupstack-tex")
        assert source["url"] == f"{mirror}/cqadupstack.zip"

        def locate(source: dict, cache: str) -> Path:
            return locate_dataset(
                "cqadupstack-tex",
                source,
                split="test",
                data_dir=None,
                cache_dir=tmp_path / cache,
                retries=0,
            )

        with pytest.raises(DownloadError) as error:
            locate(source, "official")
        official_md5 = catalog_entry("beir", "cqadupstack-tex")["source"]["md5"]
        assert f"expected md5 {official_md5}" in str(error.value)
        folder = locate(source | {"md5": md5_of(archive)}, "small")
    assert server.requests[0][0] == "/thakur/BEIR/datasets/cqadupstack.zip"
    assert [path.relative_to(folder).as_posix() for path in dataset_files(folder, "test")] == [
        "corpus.jsonl.gz",
        "queries.jsonl",
        "qrels/test.tsv",
    ]


def test_a_dry_run_plans_every_beir_dataset(tmp_path):
    """The whole benchmark by name plans one download and one ingest per dataset."""
    data_dir = licensed_data_dir(tmp_path)
    config = {
        "datasets": {"beir": "all"},
        "data_dir": str(data_dir),
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    planned = ["--dry-run", "--quiet", "rules"]
    result = snakemake(tmp_path, *planned, config=config, cores="1", env=os.environ)  # online
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.MULTILINE))
    assert counts["download"] == counts["ingest"] == str(len(dataset_names("beir"))), result.stdout


def test_the_datasets_page_is_generated_from_the_catalog():
    path = REPO / "docs" / "hooks" / "dataset_catalog.py"
    spec = importlib.util.spec_from_file_location("dataset_catalog", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (REPO / "docs" / "datasets.md").read_text(encoding="utf-8") == module.render(), (
        "docs/datasets.md differs from the catalog: run "
        "`.venv/bin/python docs/hooks/dataset_catalog.py`"
    )


def test_every_shipped_config_validates(tmp_path, monkeypatch):
    """config/*.yaml and config/reproduce/*.yaml, with their models' folders set and the local
    folders their path sources name in place (the config check reads them)."""
    for variable in ("IRFLOW_MINILM", "IRFLOW_STATIC_MODEL"):
        monkeypatch.setenv(variable, str(tmp_path))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    paths = sorted(REPO.glob("config/*.yaml")) + sorted(REPO.glob("config/reproduce/*.yaml"))
    checked = [p.name for p in paths if p.name != "config.schema.yaml"]
    for path in paths:
        if path.name != "config.schema.yaml":
            place_local_datasets(yaml.safe_load(path.read_text()))
            load_config(path, REPO / "config" / "config.schema.yaml")
    assert {"bm25.yaml", "mteb.yaml", "bm25-ce.yaml", "beir-table2.yaml"} <= set(checked)


@pytest.mark.e2e
def test_a_dataset_scores_its_own_split_beside_one_on_the_top_level_split(tmp_path):
    """MS MARCO is scored on dev, as BEIR does, in the same run as a dataset scored on test:
    each dataset's qrels are those of its own split."""
    for name in ("marco", "fact"):
        write_beir(tmp_path / "data" / name, TINY_CORPUS, TINY_QUERIES, TINY_QRELS[:1], "dev")
        write_beir(tmp_path / "data" / name, TINY_CORPUS, TINY_QUERIES, TINY_QRELS[1:], "test")
    config = {
        "data_dir": str(tmp_path / "data"),
        "datasets": {
            "marco": {
                "source": {"type": "path", "path": str(tmp_path / "data" / "marco")},
                "split": "dev",
            },
            "fact": {"source": {"type": "path", "path": str(tmp_path / "data" / "fact")}},
        },
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    targets = [f"results/datasets/{name}/qrels.parquet" for name in ("marco", "fact")]
    snakemake(tmp_path, *targets, config=config, cores="1")
    marco, fact = (pd.read_parquet(tmp_path / target) for target in targets)
    assert marco["query_id"].tolist() == ["q1"]
    assert sorted(fact["query_id"]) == ["q2", "q2"]


def test_all_without_the_licensed_datasets_is_refused_naming_public(tmp_path):
    """Today's refusal named one licensed dataset and no way out; now `all` names the four
    and `public`, which stands for the datasets anyone can download."""
    with pytest.raises(ConfigError) as error:
        configured({"beir": "all"}, data_dir=str(tmp_path))
    message = str(error.value)
    assert message.startswith(
        "config key 'datasets.beir': 'all' includes BioASQ (bioasq), Signal-1M (RT) (signal1m), "
        "TREC-NEWS (trec-news), Robust04 (robust04), which beir does not distribute"
    )
    assert "write `datasets: {beir: public}` for the 26 datasets anyone can download" in message
    public = configured({"beir": "public"})["datasets"]
    assert sorted(public) == sorted(set(dataset_names("beir")) - set(LICENSED))
    assert len(public) == 26 and public["scifact"]["source"] == {"type": "beir", "name": "scifact"}


def test_offline_a_missing_dataset_is_refused_by_the_dry_run_before_any_job(tmp_path):
    """Offline, a dataset neither in data_dir nor in the download cache is one line naming it
    and where to place it, from the dry run and from a real run, before any job: today the
    dry run planned both downloads and the real run started the path dataset's jobs."""
    write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = {
        "offline": True,
        "datasets": {
            "tiny": {"source": {"type": "path", "path": "tiny"}},
            "nfcorpus": {"source": {"type": "beir", "name": "nfcorpus"}},
        },
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    source = catalog_entry("beir", "nfcorpus")["source"]
    md5, zip_name = source["md5"], cached_file_name(source["url"], fallback="nfcorpus.zip")
    expected = (
        "ConfigError: dataset 'nfcorpus' is not available offline: place the BEIR folder at "
        "<folder>/nfcorpus/ and set data_dir: <folder> (corpus.jsonl[.gz], queries.jsonl[.gz], "
        f"qrels/test.tsv) or the zip {zip_name} (md5 {md5}) at results/downloads/{zip_name}"
    )
    for options in (["--dry-run"], []):
        result = snakemake(tmp_path, *options, config=config, cores="1", check=False)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "rule " not in result.stdout + result.stderr  # no job planned nor run
        assert result.stderr.strip().splitlines()[-1] == expected
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "results").exists()
    # With the dataset in data_dir, the same config plans its jobs.
    write_beir(tmp_path / "data" / "nfcorpus", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    placed = config | {"data_dir": str(tmp_path / "data")}
    result = snakemake(tmp_path, "--dry-run", config=placed, cores="1")
    assert "rule download" in result.stdout
