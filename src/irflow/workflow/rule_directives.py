"""The directives each rule of the workflow declares, read without running the workflow.

Snakemake's own parser (``snakemake.parser.parse``) translates each Snakefile into the Python
that Snakemake executes, where every directive of a rule is a decorator of the rule's function::

    @workflow.rule(name='embed', ...)
    @workflow.conda("../envs/models.yaml")
    @workflow.resources(gpu=1, mem_mb=...)
    @workflow.script("../scripts/embed.py")

and ``use rule embed as embed_shard with: ...`` is ``@workflow.userule(rules=['embed'],
name_modifier='embed_shard')`` with the directives it changes. Reading those decorators from the
syntax tree gives each rule's declarations as written, without a configuration and without
evaluating anything: what the SLURM profile (irflow.workflow.slurm_profile) needs to know which
rules ask for a GPU, and what tests/test_envs.py needs to know which environment each script
runs in.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

from snakemake.parser import parse
from snakemake.sourcecache import LocalSourceFile

from irflow.core.errors import InputError

# The checkout's Snakefile: irflow is installed from its checkout (`pip install -e .`).
SNAKEFILE = Path(__file__).resolve().parents[3] / "Snakefile"


@dataclass(frozen=True)
class Rule:
    """One rule's directives: each value is its source text, as Snakemake's parser leaves it."""

    name: str
    snakefile: Path
    resources: dict[str, str] = field(default_factory=dict)
    # The `conda:` environment: a path when written as a string, else the expression's source.
    conda: str | None = None
    script: str | None = None

    def declares(self, resource: str) -> bool:
        """Whether the rule asks for some of `resource` (a literal 0 asks for none)."""
        value = self.resources.get(resource)
        return value is not None and value.strip() != "0"

    def path(self, relative: str) -> Path:
        """A path of a directive (conda, script), which Snakemake reads from the rule's file."""
        return (self.snakefile.parent / relative).resolve()


def _open(source):
    return open(source.get_path_or_uri(secret_free=True), encoding="utf-8")


def analysis_rule_files(workflow_folder: Path) -> list[Path]:
    """Every analysis's rules, ``rules/analyses/<name>.smk``, in name order: the Snakefile
    includes each, so that a new analysis changes no file of the workflow but its own."""
    return sorted((Path(workflow_folder) / "rules" / "analyses").glob("*.smk"))


# All that snakemake.parser asks of a workflow: its source cache, to open a Snakefile.
_WORKFLOW = SimpleNamespace(sourcecache=SimpleNamespace(open=_open))


def _compiled(snakefile: Path) -> ast.Module:
    """The Python that Snakemake makes of one Snakefile, as a syntax tree."""
    if not snakefile.is_file():
        raise InputError(
            snakefile,
            "no such Snakefile, whose rules the SLURM profile reads: install irflow from the "
            "checkout that holds the workflow (pip install -e .)",
        )
    code, _ = parse(LocalSourceFile(str(snakefile)), _WORKFLOW, {})
    return ast.parse(code, filename=str(snakefile))


def _directive(node: ast.expr) -> ast.Call | None:
    """`workflow.<directive>(...)`, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "workflow"
    ):
        return node
    return None


def _keyword(call: ast.Call, name: str):
    return next((ast.literal_eval(k.value) for k in call.keywords if k.arg == name), None)


def _first_argument(call: ast.Call) -> str | None:
    """A directive's value: a string as written, else the expression's source."""
    if not call.args:
        return None
    value = call.args[0]
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    return ast.unparse(value)


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _declared(decorators: list[ast.Call]) -> dict:
    """The directives among a rule function's decorators that Rule records."""
    declared = {}
    for call in decorators:
        if call.func.attr == "resources":
            declared["resources"] = {k.arg: ast.unparse(k.value) for k in call.keywords}
        elif call.func.attr in ("conda", "script"):
            declared[call.func.attr] = _first_argument(call)
    return declared


@functools.cache
def workflow_rules(snakefile: Path = SNAKEFILE) -> dict[str, Rule]:
    """Every rule of the workflow whose main Snakefile is `snakefile`, following its includes
    (relative to the including file, as Snakemake resolves them), by name. Read once per
    process: the caller must not change the dict."""
    rules: dict[str, Rule] = {}
    # `use rule A as B with:` is A with the directives that its with-block gives anew.
    uses: list[tuple[str, str, dict]] = []
    pending = [Path(snakefile).resolve(), *analysis_rule_files(Path(snakefile).resolve().parent)]
    seen: set[Path] = set()
    while pending:
        path = pending.pop(0)
        if path in seen:
            continue
        seen.add(path)
        tree = _compiled(path)
        for node in ast.walk(tree):
            include = _directive(node) if isinstance(node, ast.expr) else None
            # A computed include is an analysis's rules, pending already.
            if include and include.func.attr == "include" and _is_text(include.args[0]):
                pending.append((path.parent / include.args[0].value).resolve())
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            decorators = [d for d in map(_directive, function.decorator_list) if d is not None]
            kinds = {d.func.attr: d for d in decorators}
            if "rule" in kinds:
                name = _keyword(kinds["rule"], "name")
                rules[name] = Rule(name, path, **_declared(decorators))
            elif "userule" in kinds and _keyword(kinds["userule"], "from_module") is None:
                modifier = _keyword(kinds["userule"], "name_modifier")
                for base in _keyword(kinds["userule"], "rules"):
                    name = (modifier or base).replace("*", base)
                    uses.append((base, name, _declared(decorators)))
    while uses:
        ready = [use for use in uses if use[0] in rules]
        if not ready:
            raise InputError(snakefile, f"`use rule {uses[0][0]}`: no such rule in the workflow")
        for base, name, declared in ready:
            rules[name] = replace(rules[base], name=name, **declared)
            uses.remove((base, name, declared))
    return rules


def rules_declaring(resource: str, snakefile: Path = SNAKEFILE) -> list[str]:
    """The names of the rules whose `resources:` ask for `resource`, sorted."""
    return sorted(n for n, rule in workflow_rules(snakefile).items() if rule.declares(resource))
