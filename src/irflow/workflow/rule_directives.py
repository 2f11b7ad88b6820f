"""The directives each rule of the workflow declares, read without running the workflow.

Snakemake's own parser translates each Snakefile into the Python that Snakemake executes, where
every directive of a rule is a decorator of the rule's function::

    @workflow.rule(name='embed', ...)
    @workflow.conda("../envs/models.yaml")
    @workflow.resources(gpu=1, mem_mb=...)
    @workflow.script("../scripts/embed.py")

and ``use rule embed as embed_shard with: ...`` is ``@workflow.userule(rules=['embed'],
name_modifier='embed_shard')`` with the directives it changes
(irflow.workflow.snakemake_internals.parse_snakefile reads them). Those decorators give each
rule's declarations as written, without a configuration and without evaluating anything: what
the SLURM profile (irflow.workflow.slurm_profile) needs to know which rules ask for a GPU, and
what tests/test_envs.py needs to know which environment each script runs in.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path

from irflow.core.errors import InputError
from irflow.workflow.snakemake_internals import ParsedRule, ParsedSnakefile, parse_snakefile

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


def analysis_rule_files(workflow_folder: Path) -> list[Path]:
    """Every analysis's rules, ``rules/analyses/<name>.smk``, in name order: the Snakefile
    includes each, so that a new analysis changes no file of the workflow but its own."""
    return sorted((Path(workflow_folder) / "rules" / "analyses").glob("*.smk"))


def _declared(rule: ParsedRule) -> dict:
    """The directives of a rule that Rule records."""
    declared = {}
    directives = rule.directives
    if "resources" in directives:
        declared["resources"] = dict(directives["resources"].keywords)
    for name in ("conda", "script"):
        if name in directives:
            declared[name] = next(iter(directives[name].args), None)
    return declared


def _parsed(snakefile: Path) -> ParsedSnakefile:
    if not snakefile.is_file():
        raise InputError(
            snakefile,
            "no such Snakefile, whose rules the SLURM profile reads: install irflow from the "
            "checkout that holds the workflow (pip install -e .)",
        )
    return parse_snakefile(snakefile)


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
        parsed = _parsed(path)
        # A computed include is an analysis's rules, pending already.
        pending += [(path.parent / include).resolve() for include in parsed.includes]
        for rule in parsed.rules:
            if not rule.is_use:
                rules[rule.name] = Rule(rule.name, path, **_declared(rule))
                continue
            for base in rule.uses:
                name = (rule.use_name or base).replace("*", base)
                uses.append((base, name, _declared(rule)))
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
