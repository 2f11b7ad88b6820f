"""The README's quickstart, run as written: its commands are read from the README itself, so
a wrong config path, flag or target there fails here (CONTRIBUTING.md, "The README's
quickstart test")."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from conftest import CORES, REPO, SNAKEMAKE, run_command

README = REPO / "README.md"
# What a copy of the project needs to run the workflow: the installed package does the rest.
PROJECT = ("Snakefile", "rules", "scripts", "config", "report", "envs", "profiles")


def section(heading: str) -> str:
    """The README's text under ``## <heading>``, up to the next section."""
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"README.md has no '## {heading}' section"
    return found.group(1)


def shell_commands(text: str) -> list[list[str]]:
    """The commands of the fenced bash blocks in ``text``, split into words as bash splits
    them (continued lines joined, comments dropped)."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(words)
    return commands


def quickstart_commands() -> tuple[list[str], list[str]]:
    """The arguments of the README's two quickstart commands, online and offline, each of
    which runs the install's snakemake."""
    commands = shell_commands(section("Quickstart"))
    assert len(commands) == 2, (
        f"the quickstart should be two commands, online and offline: {commands}"
    )
    for program, *_ in commands:
        # The README's install makes .venv; its snakemake is the one running these tests.
        assert program == ".venv/bin/snakemake", commands
    online, offline = (arguments for _, *arguments in commands)
    return online, offline


def quickstart_arguments() -> list[str]:
    """The arguments of the README's quickstart command."""
    return quickstart_commands()[0]


def offline_quickstart_command(data_dir: Path) -> list[str]:
    """The README's offline quickstart as written, with ``data_dir`` for the README's
    placeholder folder and this worker's share of the cores."""
    arguments = quickstart_commands()[1]
    placeholder = "data_dir=/path/to/datasets"
    assert placeholder in arguments, f"the offline quickstart names no {placeholder}: {arguments}"
    arguments[arguments.index(placeholder)] = f"data_dir={data_dir}"
    arguments[arguments.index("--cores") + 1] = CORES
    return [*SNAKEMAKE, *arguments]


def test_the_offline_quickstart_is_the_quickstart_offline():
    """The offline command is the online one with offline=true and a data_dir: the same config,
    so the same results."""
    online, offline = quickstart_commands()
    assert offline[: len(online)] == online
    assert offline[len(online) :] == ["--config", "offline=true", "data_dir=/path/to/datasets"]


def test_ci_runs_the_readmes_test_command():
    """Install and test are two commands: CI builds the environment with the README's install
    command, then runs the README's test command, which must exist."""
    (install,) = shell_commands(section("Install"))
    (command,) = shell_commands(section("Test"))
    assert command == ["bash", ".ci/test"]
    assert (REPO / ".ci" / "test").is_file()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "bash .ci/test" in ci
    assert install in [shlex.split(line, comments=True) for line in ci]


def link_project(project: Path) -> None:
    """Make ``project`` a copy of the project made of links (its results/ its own)."""
    for name in PROJECT:
        if not (project / name).exists():
            (project / name).symlink_to(REPO / name)


def run_in_copy(project: Path, command: list[str], env: dict | None = None) -> str:
    """Run ``command`` in a copy of the project made of links, as a user would run it from the
    repository's root, without touching the repository's own results/ (offline, unless ``env``
    says otherwise)."""
    link_project(project)
    return run_command(command, env=env, cwd=project).output


def test_the_quickstart_command_plans_bm25_and_minilm_on_scifact(tmp_path):
    """As written, with --dry-run: the config file exists and validates, the flags exist and
    the graph it plans downloads SciFact, encodes it with the model and retrieves with both
    systems (a dry run needs neither the data nor the model)."""
    planned = run_in_copy(tmp_path, [*SNAKEMAKE, *quickstart_arguments(), "--dry-run"])
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", planned, re.M))
    for rule in ("download", "embed", "retrieve_bm25", "retrieve_dense", "aggregate", "database"):
        assert rule in jobs, f"the quickstart plans no {rule} job:\n{planned}"
    assert "dataset=scifact" in planned
    assert "model=all-MiniLM-L6-v2" in planned


# The cheap half of the quickstart, run for real: one target, BM25's scores. The encoding, the
# one slow part, is left out: tests/test_workflow.py checks MiniLM's numbers on the same data.
QUICKSTART_TARGET = "results/scores/scifact/bm25.parquet"


def quickstart_bm25_command(shared_datasets: Path) -> list[str]:
    """The quickstart command as written, with one target, BM25's scores, the README's offline
    override (data_dir) and this worker's share of the cores. tests/test_first_run.py runs it
    for real, then its first run in the same folder, which reuses these jobs."""
    arguments = quickstart_arguments()
    arguments[arguments.index("--cores") + 1] = CORES
    # The target first and --config last: --configfile and --config take every word after them.
    return [*SNAKEMAKE, QUICKSTART_TARGET, *arguments, "--config", f"data_dir={shared_datasets}"]
