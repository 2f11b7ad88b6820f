"""irflow.workflow.snakemake_internals: each piece of Snakemake beyond its documented API that
irflow relies on, checked on the installed Snakemake. A failure names the Snakemake version and
what changed: the fix goes into that one module (or the supported range gets its upper bound).

A tiny workflow of its own (no irflow rule) is planned once as a dry run and once for real, each
piece of the module recording what it saw in ``notes.jsonl``; the parser reads a Snakefile of
every directive irflow reads. No other file of src/, scripts/, rules/ or the Snakefile may touch
Snakemake's internals (``test_no_other_file_uses_snakemake_internals``).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from irflow.workflow import snakemake_internals as internals
from irflow.workflow.snakemake_internals import SUPPORTED, VERSION

# What Snakemake documents and irflow may use anywhere: the workflow's folder and its files
# (Snakefile, rules), a script's `snakemake` object (scripts/).
DOCUMENTED_WORKFLOW = {"source_path", "basedir", "current_basedir"}
DOCUMENTED_SCRIPT = {
    "input", "output", "params", "wildcards", "threads", "resources", "log", "config", "rule",
    "scriptdir",
}  # fmt: skip
INTERNALS = REPO / "src" / "irflow" / "workflow" / "snakemake_internals.py"


def changed(what: str) -> str:
    """The message of a failed check: the version, what changed, where to fix it."""
    return (
        f"Snakemake {VERSION}: {what}. irflow.workflow.snakemake_internals relies on it "
        f"(irflow supports Snakemake {SUPPORTED}): adapt that module to this version, or keep "
        f"the versions below it (pyproject.toml's pin, CONTRIBUTING.md)."
    )


TINY_SNAKEFILE = """
import functools, json
from pathlib import Path

from irflow.workflow.guard import guard_input_functions
from irflow.workflow.snakemake_internals import (
    FinishedRun, given_config_files, is_dry_run, is_main_process, main_snakefile, recorded_inputs,
    read_config_files, rules_of, workflow_config,
)

def note(**facts):
    with open("notes.jsonl", "a") as notes:
        notes.write(json.dumps(facts, default=str) + "\\n")

note(
    event="read", main=is_main_process(workflow), given=given_config_files(workflow),
    read=read_config_files(workflow), snakefile=main_snakefile(workflow),
)

configfile: "config.yaml"

rule all:
    input: "joined.txt", "failed_1.txt", "after_checkpoint.txt"

rule made:
    output: text="made.txt", manifest="made.json"
    params: fixed=3, computed=lambda wildcards: "computed"
    shell: "echo made > {output.text}; echo {{}} > {output.manifest}"

rule joined:
    input: unpack(lambda wildcards: {"unpacked": "made.txt"}), named=lambda wildcards: "made.txt"
    output: "joined.txt"
    shell: "cat {input.unpacked} {input.named} > {output}"

rule failed:
    input: "made.txt"
    output: "failed_{n}.txt"
    log: "failed_{n}.log"
    shell: "exit 1"

checkpoint listed:
    output: "listed.txt"
    shell: "echo listed > {output}"

rule after_checkpoint:
    input: lambda wildcards: checkpoints.listed.get().output[0]
    output: "after_checkpoint.txt"
    shell: "cp {input} {output}"

def recording(name, function):
    @functools.wraps(function)
    def call(wildcards, *args, **kwargs):
        try:
            result = function(wildcards, *args, **kwargs)
        except BaseException as error:
            note(event="input function", rule=name, raised=type(error).__name__)
            raise
        note(event="input function", rule=name, returned=result)
        return result
    return call

def stamp(added):
    def call(wildcards):
        outputs, named = added.outputs(wildcards)
        note(event="stamp", rule=added.name, dry_run=is_dry_run(workflow), outputs=outputs,
             named=named, config=workflow_config(workflow)["word"],
             recorded={path: recorded_inputs(workflow, path) for path in ("joined.txt", "no.txt")})
        return []
    return call

for each in rules_of(workflow):
    note(event="rule", rule=each.name, params={k: callable(v) or v for k, v in each.params.items()},
         output_names=sorted(each.output_names))
    if each.name == "made":
        each.add_input_function("stamp", stamp(each))
    each.replace_input_functions(lambda function, name=each.name: recording(name, function))
    guard_input_functions(each)

onerror:
    run = FinishedRun(workflow)
    note(
        event="finished",

        jobs=sorted(job.rule for job in run.jobs),
        failed=sorted(job.rule for job in run.failed),
        up_to_date=sorted(job.rule for job in run.jobs if run.up_to_date(job)),
        dependencies={job.rule: sorted(d.rule for d in run.dependencies(job)) for job in run.jobs},
        details={
            job.rule: {
                "input": dict(job.input.items()), "output": list(job.output),
                "params": dict(job.params.items()), "log": list(job.log),
                "wildcards": dict(job.wildcards.items()),
            }
            for job in run.jobs
        },
    )
"""


@pytest.fixture(scope="module")
def notes(tmp_path_factory) -> dict[str, list[dict]]:
    """The tiny workflow's notes, by event, of a dry run (``dry``), a real run with
    --keep-going (``run``), whose ``failed`` job fails, and a dry run after it (``again``)."""
    folder = tmp_path_factory.mktemp("snakemake_internals")
    (folder / "Snakefile").write_text(textwrap.dedent(TINY_SNAKEFILE))
    (folder / "config.yaml").write_text("word: configured\n")
    base = [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "config.yaml"]
    seen = {}
    phases = (("dry", ["--dry-run"]), ("run", ["--keep-going"]), ("again", ["--dry-run"]))
    for phase, extra in phases:
        done = subprocess.run(base + extra, cwd=folder, capture_output=True, text=True)
        assert done.returncode == (1 if phase == "run" else 0), changed(done.stderr[-3000:])
        lines = (folder / "notes.jsonl").read_text().splitlines()
        (folder / "notes.jsonl").unlink()
        for fact in map(json.loads, lines):
            seen.setdefault(f"{phase} {fact.pop('event')}", []).append(fact)
    seen["folder"] = folder
    return seen


def test_the_supported_range_is_pyprojects_pin_contributings_and_the_installed_version():
    # pyproject.toml's `all` extra, which installs Snakemake.
    pins = re.findall(r'"snakemake([^"-][^"]*)"', (REPO / "pyproject.toml").read_text())
    assert [SpecifierSet(pin) for pin in pins] == [SpecifierSet(SUPPORTED)], (pins, SUPPORTED)
    assert f"Snakemake `{SUPPORTED}`" in (REPO / "CONTRIBUTING.md").read_text()
    # The Snakefile refuses an older Snakemake, at the range's lower bound.
    lower = next(s.version for s in SpecifierSet(SUPPORTED) if s.operator == ">=")
    (minimum,) = re.findall(r'min_version\("([^"]+)"\)', (REPO / "Snakefile").read_text())
    assert Version(minimum) == Version(lower), (minimum, SUPPORTED)
    assert Version(VERSION) in SpecifierSet(SUPPORTED), changed("this version is not supported")


def test_the_planning_run_is_read(notes):
    for phase in ("dry", "run"):
        (read,) = notes[f"{phase} read"]
        assert read["main"] is True, changed("Workflow.is_main_process is not True in the run")
        given = [Path(path).name for path in read["given"]]
        assert given == ["config.yaml"], changed("Workflow.overwrite_configfiles")
        assert [Path(path).name for path in read["read"]] == ["config.yaml"], changed(
            "Workflow.configfiles no longer lists the config files read"
        )
        assert Path(read["snakefile"]) == notes["folder"] / "Snakefile", changed(
            "Workflow.main_snakefile"
        )
        stamps = notes[f"{phase} stamp"]
        assert {stamp["dry_run"] for stamp in stamps} == {phase == "dry"}, changed(
            "Workflow.dryrun"
        )
        assert {stamp["config"] for stamp in stamps} == {"configured"}, changed("Workflow.config")


def test_rules_give_their_name_params_and_outputs(notes):
    rules = {fact["rule"]: fact for fact in notes["dry rule"]}
    assert set(rules) == {"all", "made", "joined", "failed", "listed", "after_checkpoint"}, changed(
        "Workflow.rules no longer gives every rule"
    )
    assert rules["made"]["params"] == {"fixed": 3, "computed": True}, changed(
        "Rule.params no longer gives the params by name (values and functions)"
    )
    assert rules["made"]["output_names"] == ["manifest", "text"], changed("Rule.output's names")
    stamp = notes["dry stamp"][0]
    assert stamp["outputs"] == ["made.txt", "made.json"], changed("IOFile.apply_wildcards")
    assert stamp["named"] == {"text": "made.txt", "manifest": "made.json"}, changed(
        "Rule.output.items()"
    )


def test_the_input_files_recorded_for_an_output_are_read_while_planning(notes):
    """What Snakemake's input rerun trigger compares a job's inputs with: none before the job
    ran, its inputs after (read while the next run plans, as irflow.workflow.inputs reads it)."""
    before, after = notes["run stamp"][0]["recorded"], notes["again stamp"][0]["recorded"]
    assert before == {"joined.txt": None, "no.txt": None}, changed("Workflow.persistence.input")
    assert set(after["joined.txt"]) == {"made.txt"} and after["no.txt"] is None, changed(
        f"Workflow.persistence.input(IOFile) no longer gives the recorded inputs: {after}"
    )


def test_an_added_input_function_is_called_for_each_job(notes):
    assert {fact["rule"] for fact in notes["run stamp"]} == {"made"}, changed(
        "Rule.set_input(name=function) no longer adds an input function that Snakemake calls"
    )


def test_replaced_input_functions_are_called_and_keep_their_name_and_flags(notes):
    called = {}
    for fact in notes["run input function"]:
        called.setdefault(fact["rule"], []).append(fact.get("returned", fact.get("raised")))
    # joined: its unpack()-ed function and its named one; made: the stamp, which returns [].
    assert set(map(str, called.get("joined", []))) == {"made.txt", "{'unpacked': 'made.txt'}"}, (
        changed(
            "Rule.input's functions, replaced in place (IOFile, AnnotatedString), are not called"
        )
    )
    assert called.get("made") and all(result == [] for result in called["made"]), changed(
        "an input function added by Rule.set_input"
    )
    # Snakemake read the replaced functions' files by their names (unpack's flag kept).
    joined = (notes["folder"] / "joined.txt").read_text()
    assert joined == "made\nmade\n", changed("a replaced input function's name or unpack flag")


def test_snakemakes_signals_pass_through_irflows_guard(notes):
    raised = [
        fact["raised"]
        for fact in notes["run input function"]
        if fact["rule"] == "after_checkpoint" and "raised" in fact
    ]
    assert raised and set(raised) <= {cls.__name__ for cls in internals.SIGNALS}, changed(
        f"a checkpoint's input function raised {raised}, not one of "
        f"{[cls.__name__ for cls in internals.SIGNALS]} (snakemake.exceptions)"
    )
    assert (notes["folder"] / "after_checkpoint.txt").read_text() == "listed\n", changed(
        "the job after a checkpoint did not run once its signal passed through irflow's guard"
    )


def test_the_finished_run_gives_its_jobs_failures_and_dependencies(notes):
    (finished,) = notes["run finished"]
    everything = ["after_checkpoint", "all", "failed", "joined", "listed", "made"]
    assert finished["jobs"] == everything, changed("DAG.jobs")
    assert finished["failed"] == ["failed"], changed("Workflow.scheduler.failed")
    assert finished["up_to_date"] == ["after_checkpoint", "joined", "listed", "made"], changed(
        "DAG.noneedrun_finished"
    )
    assert finished["dependencies"]["failed"] == ["made"], changed("DAG.dependencies")
    assert finished["dependencies"]["all"] == ["after_checkpoint", "failed", "joined"], changed(
        "DAG.dependencies"
    )
    made, joined, failed = (finished["details"][rule] for rule in ("made", "joined", "failed"))
    assert made["output"] == ["made.txt", "made.json"], changed("Job.output")
    assert made["params"] == {"fixed": 3, "computed": "computed"}, changed("Job.params")
    assert joined["input"] == {"unpacked": "made.txt", "named": "made.txt"}, changed("Job.input")
    assert failed["log"] == ["failed_1.log"], changed("Job.log")
    assert failed["wildcards"] == {"n": "1"}, changed("Job.wildcards")


def test_a_group_job_still_holds_its_jobs():
    """A failed group job (cluster execution) counts each of its jobs as failed."""
    from snakemake.jobs import GroupJob, Job

    assert Job.is_group(object.__new__(Job)) is False, changed("Job.is_group()")
    assert GroupJob.is_group(object.__new__(GroupJob)) is True, changed("GroupJob.is_group()")
    assert isinstance(GroupJob.jobs, property), changed("GroupJob.jobs")


RULES = """
include: "other.smk"

rule embed:
    output: "x"
    conda: "../envs/models.yaml"
    resources:
        gpu=1,
        mem_mb=lambda wc, attempt: 10 * attempt,
    script: "../scripts/embed.py"

use rule embed as embed_shard with:
    resources:
        gpu=0,

use rule * from other_module as other_*
"""


def test_the_parser_gives_rules_directives_uses_and_includes(tmp_path):
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(RULES)
    parsed = internals.parse_snakefile(snakefile)
    assert parsed.includes == ["other.smk"], changed("snakemake.parser's include directive")
    embed, shard = parsed.rules
    assert (embed.name, embed.is_use) == ("embed", False), changed("the parser's rule names")
    assert embed.directives["conda"].args == ("../envs/models.yaml",), changed("conda:")
    assert embed.directives["script"].args == ("../scripts/embed.py",), changed("script:")
    assert embed.directives["resources"].keywords == {
        "gpu": "1",
        "mem_mb": "lambda wc, attempt: 10 * attempt",
    }, changed("the parser's resources directive")
    # `use rule ... with:`, by the rules it uses and its name; another module's rules left out.
    assert (shard.uses, shard.use_name) == (("embed",), "embed_shard"), changed("use rule")
    assert shard.directives["resources"].keywords == {"gpu": "0"}, changed("use rule's with:")


ANCIENT_SNAKEFILE = """
from irflow.workflow.snakemake_internals import ancient

rule copied:
    input: lambda wildcards: ancient("given.txt") if config["ancient"] else "given.txt"
    output: "copied.txt"
    shell: "cp {input} {output}"
"""


def test_a_file_an_input_function_marks_ancient_is_newer_than_the_output_and_runs_nothing(
    tmp_path,
):
    (tmp_path / "Snakefile").write_text(ANCIENT_SNAKEFILE)
    (tmp_path / "given.txt").write_text("given\n")
    (tmp_path / "copied.txt").write_text("given\n")
    os.utime(tmp_path / "copied.txt", (1, 1))  # older than its input
    base = [sys.executable, "-m", "snakemake", "--cores", "1", "--dry-run", "--config"]
    planned = {}
    for marked in (True, False):
        done = subprocess.run(
            [*base, f"ancient={marked}"], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, changed(done.stderr[-3000:])
        planned[marked] = "rule copied:" in done.stdout + done.stderr
    assert planned == {True: False, False: True}, changed(
        f"snakemake.io.ancient no longer keeps a newer input from running its job: {planned}"
    )


def test_no_other_file_uses_snakemake_internals():
    """Only snakemake_internals imports Snakemake or reads its workflow beyond the documented
    folder and files; scripts read the documented fields of their `snakemake` object."""
    found = []
    for path in sorted((REPO / "src").rglob("*.py")) + sorted((REPO / "scripts").glob("*.py")):
        if path == INTERNALS:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [f"{path}: imports {n}" for n in names if n.split(".")[0] == "snakemake"]
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if node.value.id == "workflow" and node.attr not in DOCUMENTED_WORKFLOW:
                    found.append(f"{path}:{node.lineno}: workflow.{node.attr}")
                if node.value.id == "snakemake" and node.attr not in DOCUMENTED_SCRIPT:
                    found.append(f"{path}:{node.lineno}: snakemake.{node.attr}")
    # The Snakefile and rules are Snakemake's language: their lines, comments aside.
    workflow_files = [REPO / "Snakefile", *sorted((REPO / "rules").rglob("*.smk"))]
    for path in workflow_files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            imports = re.search(r"\b(?:from|import) (snakemake(?!\.utils\b)[\w.]*)", code)
            found += [f"{path}:{number}: imports {imports[1]}"] if imports else []
            for attribute in re.findall(r"(?<![\w./])workflow\.(\w+)", code):
                if attribute not in DOCUMENTED_WORKFLOW:
                    found.append(f"{path}:{number}: workflow.{attribute}")
    assert not found, "\n".join(found)
