"""The workflow's files by stage (CONTRIBUTING.md, "Layout"): rules/<stage>.smk holds the rules
whose scripts are scripts/<stage>.py or scripts/<stage>_<step>.py, so that a rule is found from
its script and its script from its rule file. Read with Snakemake's parser, through
irflow.workflow.rule_directives."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

from irflow.workflow.rule_directives import workflow_rules

# Rules that run another stage's script: vectors' shards are joined by embed's gather, one
# script for both layouts of encoded documents.
BORROWED = {"encode_vectors_gather": "embed_gather"}


def stage_of(script: str) -> str:
    return Path(script).stem


def test_each_rule_is_in_the_file_of_its_scripts_stage():
    misplaced = []
    for name, rule in workflow_rules(REPO / "Snakefile").items():
        if rule.script is None:
            continue
        stage, script = rule.snakefile.stem, stage_of(rule.script)
        if BORROWED.get(name) == script:
            continue
        if script != stage and not script.startswith(f"{stage}_"):
            misplaced.append(f"rule {name} ({rule.snakefile.name}) runs scripts/{script}.py")
    assert not misplaced, "\n".join(misplaced)


def test_every_script_runs_in_a_rule_and_every_rule_file_is_read():
    rules = workflow_rules(REPO / "Snakefile").values()
    used = {rule.path(rule.script) for rule in rules if rule.script}
    # A rule's script reads its `snakemake` object (scripts/position_table.py is a command).
    scripts = {
        path.resolve()
        for path in (REPO / "scripts").glob("[!_]*.py")
        if any(
            isinstance(node, ast.Name) and node.id == "snakemake"
            for node in ast.walk(ast.parse(path.read_text()))
        )
    }
    assert scripts == used, (sorted(scripts - used), sorted(used - scripts))
    read = {rule.snakefile for rule in rules}
    with_rules = {
        path.resolve()
        for path in (REPO / "rules").rglob("*.smk")
        if any(line.startswith(("rule ", "use rule ")) for line in path.read_text().splitlines())
    }
    assert with_rules <= read, sorted(with_rules - read)
