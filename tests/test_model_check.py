"""Problems caught when Snakemake reads the config, before any job runs: under offline: true,
a model that is neither a folder nor in the Hugging Face cache is one line naming its key;
and every config error ends on irflow's message, not on Snakemake's list of frames."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO, TINY_CORPUS, TINY_QRELS, TINY_QUERIES, write_beir
from huggingface_hub import constants

from irflow.workflow.model_check import offline_model_problems

SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
MISSING = "sentence-transformers/not-in-this-cache"


def dry_run(folder: Path, config: dict, hf_home: Path) -> subprocess.CompletedProcess:
    """A Snakemake dry run of ``config`` on a tiny BEIR dataset in ``folder``, with the Hugging
    Face cache at ``hf_home``."""
    write_beir(folder / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = {"datasets": {"tiny": {"source": {"type": "path", "path": "tiny"}}}} | config
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return subprocess.run(
        [*SNAKEMAKE, "--directory", str(folder), "--configfile", str(folder / "config.yaml")]
        + ["--cores", "1", "-n"],
        capture_output=True,
        text=True,
        env=os.environ | {"HF_HOME": str(hf_home)},
        check=False,
    )


def cache_snapshot(hf_home: Path, repo_id: str) -> None:
    """``repo_id`` as huggingface_hub caches a download: its main ref names a snapshot folder."""
    repo = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def test_a_model_missing_offline_is_one_line_naming_the_key_before_any_job(tmp_path):
    config = {
        "offline": True,
        "models": {"minilm": {"id": MISSING}},
        "retrievers": {"minilm": {"type": "dense", "model": "minilm"}},
    }
    result = dry_run(tmp_path, config, tmp_path / "hf")
    assert result.returncode == 1
    assert "rule " not in result.stdout  # refused before planning a job
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        f"ConfigError: models.minilm.id: {MISSING!r} is not a folder and not in the Hugging "
        f"Face cache ({tmp_path / 'hf' / 'hub'}), and offline: true forbids downloading it; give "
        "a local folder or run once online"
    )
    assert "Traceback" not in result.stderr


def test_config_errors_end_on_the_message(tmp_path):
    result = dry_run(tmp_path, {"offline": True}, tmp_path / "hf")  # no retrievers
    assert result.returncode == 1
    lines = (result.stdout + result.stderr).strip().splitlines()  # Snakemake logs to both
    assert not [line for line in lines if line.lstrip().startswith("File ")]
    assert lines[-1].startswith("  config key 'retrievers' is missing")


def test_cached_models_folders_and_online_configs_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    cache_snapshot(tmp_path / "hf", "org/cached")
    (tmp_path / "folder").mkdir()
    config = {
        "offline": True,
        "models": {
            "cached": {"id": "org/cached"},
            "local": {"id": str(tmp_path / "folder")},
            "copied": {"id": MISSING, "local_copy": {"path": str(tmp_path / "folder")}},
        },
        "rerankers": {"ce": {"type": "cross-encoder", "id": "org/cached"}},
        "positionalize": {"dataset": "tiny", "tokenizer": "local"},  # a key of models
    }
    assert offline_model_problems(config) == []
    online = config | {"offline": False, "models": {"gone": {"id": MISSING}}}
    assert offline_model_problems(online) == []


def test_every_key_that_names_a_model_is_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    config = {
        "offline": True,
        "models": {"splade": {"id": "naver/missing", "revision": "v1"}},
        "rerankers": {"ce": {"type": "cross-encoder", "id": "cross-encoder/missing"}},
        "expand": {"t5": {"dataset": "tiny", "model": {"id": "castorini/missing"}}},
        "positionalize": {"dataset": "tiny", "tokenizer": "org/tokenizer-missing"},
    }
    keys = [line.split(":")[0] for line in offline_model_problems(config)]
    assert keys == [
        "models.splade.id",
        "rerankers.ce.id",
        "expand.t5.model.id",
        "positionalize.tokenizer",
    ]


def test_a_missing_local_copy_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    copy = {"path": str(tmp_path / "gone")}
    config = {"offline": True, "models": {"m": {"id": MISSING, "local_copy": copy}}}
    assert offline_model_problems(config) == [
        f"models.m.id: {MISSING!r} is not a folder and not in the Hugging Face cache "
        f"({tmp_path / 'hub'}), nor in its local_copy ({tmp_path / 'gone'}), and offline: true "
        "forbids downloading it; give a local folder or run once online"
    ]
