"""A new analysis is its own files only: its module of irflow.analyses (whose config check the
workflow then runs) and its rules/analyses/<name>.smk (which the Snakefile includes, its
outputs part of the default target); no line of the Snakefile or of irflow.workflow."""

from __future__ import annotations

import re
import shutil
import sys

import pytest
from conftest import (
    REPO,
    TINY_CORPUS,
    TINY_QRELS,
    TINY_QUERIES,
    snakemake,
    validated,
    write_beir,
)
from test_readme import PROJECT

import irflow.analyses
from irflow.core import config as core
from irflow.core.errors import ConfigError
from irflow.workflow import config as workflow_config
from irflow.workflow.rule_directives import analysis_rule_files, workflow_rules

# An analysis's module: it checks its own block of the config.
TOY_MODULE = """
from irflow.core.config import register_check


@register_check
def toy_problems(config):
    if config["top_k"] == 7:
        return ["config key 'top_k': the toy analysis cannot read 7 results"]
    return []
"""
# Its rules: one job over the scores, part of the default target and of the results database.
TOY_RULES = """
rule toy:
    input:
        scores=[f"results/scores/{d}/{s}.parquet" for d in plan.datasets for s in plan.systems],
    output:
        "results/toy.parquet",
    shell:
        "cp {input.scores[0]} {output}"


ANALYSIS_TARGETS.append(rules.toy.output)
plan.analysis_views["toy"] = ["results/toy.parquet"]
"""


def test_the_analyses_rules_are_included_from_their_folder():
    """Every file of rules/analyses is an analysis's rules, named as its module of
    irflow.analyses, and the workflow's rules include each file's."""
    folder = REPO / "rules" / "analyses"
    files = analysis_rule_files(REPO)
    assert [path.name for path in files] == sorted(p.name for p in folder.iterdir()) != []
    modules = {name.rsplit(".", 1)[-1] for name in workflow_config.analyses()}
    assert {path.stem for path in files} <= modules
    rules = workflow_rules()
    assert {rule.snakefile for rule in rules.values() if rule.snakefile.parent == folder} == set(
        files
    )
    assert rules["saliency"].snakefile == REPO / "rules" / "analyses" / "saliency.smk"
    assert rules["saliency"].path(rules["saliency"].script) == REPO / "scripts" / "saliency.py"


@pytest.fixture
def toy_module(tmp_path, monkeypatch):
    """``toy.py`` dropped into irflow.analyses, as a new analysis's module would be."""
    (tmp_path / "toy.py").write_text(TOY_MODULE, encoding="utf-8")
    monkeypatch.setattr(irflow.analyses, "__path__", [*irflow.analyses.__path__, str(tmp_path)])
    yield
    sys.modules.pop("irflow.analyses.toy", None)
    core.CHECKS.pop("irflow.analyses.toy.toy_problems", None)


def test_a_new_analysis_module_is_checked_with_the_config(toy_module):
    assert "irflow.analyses.toy" in workflow_config.analyses()
    with pytest.raises(ConfigError, match="the toy analysis cannot read 7 results"):
        validated(top_k=7)


def test_a_new_analysis_rules_file_joins_the_default_target(tmp_path):
    """A copy of the project (links, its Snakefile a copy) with one more rules file,
    rules/analyses/toy.smk: the default target runs its job."""
    project = tmp_path / "project"
    (project / "rules" / "analyses").mkdir(parents=True)
    shutil.copy(REPO / "Snakefile", project / "Snakefile")
    for name in PROJECT:
        if name not in ("Snakefile", "rules"):
            (project / name).symlink_to(REPO / name)
    for path in (REPO / "rules").rglob("*.smk"):
        (project / path.relative_to(REPO)).symlink_to(path)
    (project / "rules" / "analyses" / "toy.smk").write_text(TOY_RULES, encoding="utf-8")
    data = write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    config = {
        "datasets": {"tiny": {"source": {"type": "path", "path": str(data)}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    snakefile = project / "Snakefile"
    planned = snakemake(project, "--dry-run", config=config, snakefile=snakefile, cores="1").stdout
    toy = re.search(r"^rule toy:\n\s+input: (.+)$", planned, re.MULTILINE)
    assert toy is not None and toy.group(1) == "results/scores/tiny/bm25.parquet"
    database = re.search(r"^rule database:\n\s+input: (.+)$", planned, re.MULTILINE)
    assert "results/toy.parquet" in database.group(1).split(", ")
