"""Every Snakemake command that the documentation and the shipped configs' headers give works
when pasted: it is the README's form (the install's `.venv/bin/snakemake`; bare `snakemake` is
not on PATH after the README's install), Snakemake's own parser takes its arguments, and, run
as written with `-n` in a copy of the project whose results/ holds the quickstart's experiment,
it plans its graph (an experiment beside the quickstart's needs its own `--directory`)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from conftest import CORES, REPO, SCHEMA, SNAKEMAKE, environment, run_command
from test_readme import link_project

from irflow.workflow.config import expand_config, validate_config
from irflow.workflow.experiment import experiment, write_record

PROGRAM = ".venv/bin/snakemake"
# The documentation's stand-ins for a folder of BEIR copies, and where these tests find them.
DATASET_FOLDERS = ("/path/to/datasets", "$PWD/../shared/datasets", "../shared/datasets")
# Words that stand for something of the user's own: such a command is parsed, not run.
PLACEHOLDER = re.compile(r"[<>]|my-config\.yaml")


def _is_snakemake(word: str) -> bool:
    return Path(word).name == "snakemake"


def _command(text: str) -> list[str] | None:
    """The words of ``text`` from its environment assignments on, if it runs snakemake."""
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return None
    for position, word in enumerate(words):
        if _is_snakemake(word):
            start = position
            while start and re.fullmatch(r"\w+=\S*", words[start - 1]):
                start -= 1
            return words[start:]
    return None


def documented_commands() -> list[tuple[str, list[str]]]:
    """(where, words) of each snakemake command in docs/*.md (fenced bash blocks and inline
    code spans) and in the comments of config/*.yaml and config/reproduce/*.yaml, continued
    lines joined."""
    found = []
    for page in sorted((REPO / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        blocks = re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)
        for block in blocks:
            for line in block.replace("\\\n", " ").splitlines():
                if (words := _command(line)) is not None:
                    found.append((page.name, words))
        prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
        for span in re.findall(r"`([^`]+)`", prose):
            if (words := _command(span.replace("\n", " "))) is not None:
                found.append((page.name, words))
    configs = sorted((REPO / "config").glob("*.yaml")) + sorted(
        (REPO / "config" / "reproduce").glob("*.yaml")
    )
    for config in configs:
        comments = "\n".join(
            line.lstrip("#").strip()
            for line in config.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")
        )
        for line in comments.replace("\\\n", " ").splitlines():
            if (words := _command(line)) is not None:
                found.append((str(config.relative_to(REPO)), words))
    return found


COMMANDS = documented_commands()


def _program(words: list[str]) -> str:
    return next(word for word in words if _is_snakemake(word))


def test_the_documentation_gives_the_commands_of_every_reproduction():
    """The extraction sees the commands (else the checks below check nothing): one in each
    reproduction config's header, and the measured runs of docs/validation.md."""
    where = {place for place, _ in COMMANDS}
    reproductions = {
        f"config/reproduce/{path.name}" for path in (REPO / "config" / "reproduce").glob("*.yaml")
    }
    assert reproductions <= where and "validation.md" in where, sorted(where)
    assert len(COMMANDS) >= 25, COMMANDS


@pytest.mark.parametrize("where, words", COMMANDS, ids=[" ".join(w) for _, w in COMMANDS])
def test_a_documented_command_is_the_readmes_form_and_parses(where, words):
    """The install's snakemake, and arguments that Snakemake's own parser takes. Before, 19
    commands said bare `snakemake` (docs/validation.md's measured runs, the reproduction
    configs' headers, --unlock, --forcerun ...)."""
    from snakemake.cli import get_argument_parser

    assert _program(words) == PROGRAM, f"{where}: {shlex.join(words)}"
    arguments = words[words.index(PROGRAM) + 1 :]
    try:
        get_argument_parser().parse_args(arguments)
    except SystemExit as refused:
        pytest.fail(f"{where}: snakemake refuses {shlex.join(arguments)} ({refused})")


def runnable(words: list[str], datasets: Path) -> tuple[dict, list[str]] | None:
    """(environment, arguments) of a documented command as a dry run on this machine: the
    documentation's folder of BEIR copies is ``datasets``, the cores this worker's share; None
    for a command with a placeholder of the user's own."""
    if any(PLACEHOLDER.search(word) for word in words):
        return None
    program = words.index(PROGRAM)
    variables = dict(word.split("=", 1) for word in words[:program])
    arguments = []
    for word in words[program + 1 :]:
        folder = word.removeprefix("data_dir=")
        arguments.append(f"data_dir={datasets}" if folder in DATASET_FOLDERS else word)
    if "--cores" in arguments:
        arguments[arguments.index("--cores") + 1] = CORES
    if "--report" in arguments:  # a report of a run that has not run: its graph is planned
        at = arguments.index("--report")
        del arguments[at : at + 2]
    return variables, [*arguments, "-n"]


@pytest.fixture(scope="module")
def beside_the_quickstart(tmp_path_factory) -> Path:
    """A copy of the project (links) whose results/ holds the quickstart's experiment."""
    project = tmp_path_factory.mktemp("documented")
    link_project(project)
    quickstart = project / "config" / "quickstart.yaml"
    config = validate_config(expand_config(yaml.safe_load(quickstart.read_text())), SCHEMA)
    write_record(experiment(config, [quickstart]), config, project / "results" / "experiment.json")
    return project


@pytest.mark.e2e
def test_every_documented_command_plans_beside_the_quickstarts_results(
    beside_the_quickstart, shared_datasets
):
    """Each documented command that names nothing of the user's own, with `-n`, as written
    (its environment assignments included, HF_HUB_OFFLINE set so that nothing is fetched): the
    config validates, the flags exist and the graph is planned, in the folder the command
    names. Before, docs/validation.md's and the reproduction configs' commands ran in
    results/, which holds the quickstart's experiment: refused as another experiment."""
    planned, failures = set(), []
    for where, words in COMMANDS:
        run = runnable(words, shared_datasets)
        if run is None or (key := shlex.join(run[1])) in planned:
            continue
        planned.add(key)
        variables, arguments = run
        env = environment(
            **{
                name: value.replace("$PWD", str(beside_the_quickstart))
                for name, value in variables.items()
            }
        )
        result = run_command(
            [*SNAKEMAKE, *arguments], env=env, cwd=beside_the_quickstart, check=False
        )
        if result.returncode:
            failures.append(f"{where}: {shlex.join(words)}\n{result.stderr[-1500:]}")
    assert len(planned) >= 10, planned
    assert not failures, "\n\n".join(failures)
