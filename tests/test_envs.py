"""envs/*.yaml, the conda environments of the rule groups: each installs what its rules' scripts
import, and only those whose jobs run a model install torch.

What a script needs is read from the code, not run: every import of the script itself, and the
imports at module level (those that run when it is imported) of each irflow module or
scripts/ helper it reaches that way. An import inside a function of the package runs only on
the path that calls it (a model's backend, a dataset's source), so it is not counted. Each
top-level module is mapped to its distribution by this environment's metadata
(importlib.metadata.packages_distributions), and an env covers it when the distribution is in
its conda or pip list, in pyproject's core or the extras that its `-e ..[extras]` names, or
is a requirement of one of those.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from irflow.workflow.rule_directives import workflow_rules

# The standard library reads pyproject.toml from Python 3.11 on.
tomllib = pytest.importorskip("tomllib")

ENVS = REPO / "envs"
# Conda names of the distributions pip knows by another name; and conda-only packages.
CONDA_NAMES = {"pytorch": "torch"}
NOT_DISTRIBUTIONS = {"python", "pip", "cpuonly"}
# Rules whose `conda:` is a function of the wildcards: each env it can return, and the modules
# that the job then imports beyond its script's (a screened variant scores with a reranker).
CHOSEN_ENVS = {
    "POSITIONALIZE.env": {
        "positionalize.yaml": [],
        "positionalize-screen.yaml": ["irflow.retrieval.rerank"],
    },
    # A dense retriever's searcher encodes another split's queries with its model.
    "plan.negatives_env": {
        "data.yaml": [],
        "models.yaml": ["irflow.workflow.families.dense", "irflow.encoding.models"],
    },
}


def module_file(name: str) -> Path | None:
    """The file of an irflow module or a scripts/ helper, else None (not ours)."""
    if name.split(".")[0] != "irflow":
        helper = REPO / "scripts" / f"{name}.py"
        return helper if helper.is_file() else None
    path = REPO / "src" / Path(*name.split("."))
    return next((p for p in (path / "__init__.py", path.with_suffix(".py")) if p.is_file()), None)


@cache
def imported_names(path: Path, everywhere: bool) -> frozenset[str]:
    """The modules `path` imports (for `from m import n`, m and m.n: n may be a module), all of
    them or only those that run when it is imported."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes = []
    for statement in tree.body:
        if everywhere or not isinstance(statement, ast.FunctionDef | ast.ClassDef | ast.If):
            nodes.extend(ast.walk(statement))
        elif isinstance(statement, ast.If) and "TYPE_CHECKING" not in ast.unparse(statement.test):
            nodes.extend(ast.walk(statement))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}, line {node.lineno}: a relative import"
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(names)


@cache
def third_party_modules(script: Path, also: tuple[str, ...] = ()) -> frozenset[str]:
    """The top-level modules outside irflow and the standard library that `script` needs."""
    found = set()
    pending = [(script, True)] + [(module_file(name), False) for name in also]
    seen = {script}
    while pending:
        path, everywhere = pending.pop()
        for name in imported_names(path, everywhere):
            parts = name.split(".")
            ours = [module_file(".".join(parts[: i + 1])) for i in range(len(parts))]
            if parts[0] == "irflow" or any(ours):
                for file in filter(None, ours):
                    if file not in seen:
                        seen.add(file)
                        pending.append((file, False))
            elif parts[0] not in sys.stdlib_module_names and parts[0] != "__future__":
                found.add(parts[0])
    return frozenset(found)


@cache
def distributions_of_modules() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def needed_distributions(script: Path, also: tuple[str, ...] = ()) -> set[str]:
    needed = set()
    for module in third_party_modules(script, also):
        distributions = distributions_of_modules().get(module)
        assert distributions, f"{script.name}: no installed distribution provides `{module}`"
        needed.update(canonicalize_name(d) for d in distributions)
    return needed


def pyproject_requirements(extras: list[str]) -> set[str]:
    """irflow's core requirements and those of `extras` (which may name irflow's own)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names, pending = set(), [*project["dependencies"]]
    pending += [r for extra in extras for r in project["optional-dependencies"][extra]]
    while pending:
        requirement = Requirement(pending.pop())
        if canonicalize_name(requirement.name) == "irflow":
            pending += [r for e in requirement.extras for r in project["optional-dependencies"][e]]
        else:
            names.add(canonicalize_name(requirement.name))
    return names


@cache
def requirements_of(name: str) -> frozenset[str]:
    """A distribution's own requirements, without its extras, in this environment."""
    try:
        requires = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        return frozenset()  # not installed here: none of its requirements is counted
    return frozenset(
        canonicalize_name(r.name)
        for r in map(Requirement, requires)
        if r.marker is None or r.marker.evaluate({"extra": ""})
    )


def installed_by(env: Path) -> set[str]:
    """The distributions an env's file installs, with their requirements."""
    dependencies = yaml.safe_load(env.read_text())["dependencies"]
    names = set()
    for entry in dependencies:
        if isinstance(entry, dict):
            for line in entry["pip"]:
                editable = re.fullmatch(r"-e \.\.(?:\[(.*)\])?", line.strip())
                if editable:
                    extras = [e.strip() for e in (editable.group(1) or "").split(",") if e]
                    names |= pyproject_requirements(extras)
                else:
                    names.add(canonicalize_name(Requirement(line).name))
            continue
        name = re.match(r"[\w.-]+", entry).group()
        if name not in NOT_DISTRIBUTIONS:
            names.add(canonicalize_name(CONDA_NAMES.get(name, name)))
    pending = list(names)
    while pending:
        for requirement in requirements_of(pending.pop()) - names:
            names.add(requirement)
            pending.append(requirement)
    return names


@cache
def env_needs() -> dict[str, dict[str, set[str]]]:
    """env file name -> rule -> the distributions its script needs there."""
    needs: dict[str, dict[str, set[str]]] = defaultdict(dict)
    for rule in workflow_rules().values():
        if not (rule.conda and rule.script):
            continue
        if rule.conda.endswith(".yaml"):
            chosen = {rule.path(rule.conda).name: []}
        else:
            assert rule.conda in CHOSEN_ENVS, f"rule {rule.name}: add `{rule.conda}` to CHOSEN_ENVS"
            chosen = CHOSEN_ENVS[rule.conda]
        for env, also in chosen.items():
            needs[env][rule.name] = needed_distributions(rule.path(rule.script), tuple(also))
    return needs


def test_every_env_file_is_used_by_a_rule():
    assert set(env_needs()) == {path.name for path in ENVS.glob("*.yaml")}


@pytest.mark.parametrize("env", sorted(path.name for path in ENVS.glob("*.yaml")))
def test_each_env_installs_what_its_scripts_import(env):
    installed = installed_by(ENVS / env)
    missing = {
        rule: sorted(needed - installed)
        for rule, needed in env_needs()[env].items()
        if needed - installed
    }
    assert not missing, f"envs/{env} lacks what these rules' scripts import: {missing}"


def model_envs() -> set[str]:
    """The envs whose jobs run a model: those of the rules that ask for a GPU, and the one that
    CHOSEN_ENVS gives a reranker (positionalize's screen scores on the CPU)."""
    rules = workflow_rules().values()
    envs = {rule.path(rule.conda).name for rule in rules if rule.declares("gpu")}
    return envs | {env for chosen in CHOSEN_ENVS.values() for env, also in chosen.items() if also}


@pytest.mark.parametrize("env", sorted(path.name for path in ENVS.glob("*.yaml")))
def test_only_the_envs_that_run_a_model_install_torch(env):
    assert model_envs() == {"models.yaml", "positionalize-screen.yaml"}
    assert ("torch" in installed_by(ENVS / env)) == (env in model_envs())
