"""Every use irflow makes of Snakemake beyond its documented API, in this one module.

Snakemake documents the Snakefile language (rules and their directives, ``config``,
``rules.<name>.output``, ``workflow.source_path``, ``workflow.basedir``), a script's
``snakemake`` object, its command line and ``snakemake.utils``. irflow needs more, and takes it
from here only, so that a Snakemake release that changes one of these is met in one file:

- **the run being planned**: whether this process is the main one (``workflow.is_main_process``)
  and a dry run (``workflow.dryrun``), the config files given (``workflow.overwrite_configfiles``)
  and read (``workflow.configfiles``), the main Snakefile (``workflow.main_snakefile``), the
  rules (``workflow.rules``) and the config (``workflow.config``);
- **rules** (``Rule``): their name, params and outputs, an input function added to each
  (``Rule.set_input``: irflow.workflow.stamps), and their input functions replaced, an
  ``unpack``-ed one's flags kept (``Rule.input``, ``snakemake.io.IOFile``, ``AnnotatedString``:
  irflow.workflow.guard);
- **a file marked ancient by an input function** (``snakemake.io.ancient``, the Snakefile's
  ``ancient``, imported: irflow.workflow.inputs marks a dataset's files so), and **the input
  files recorded for an output** (``Workflow.persistence.input``: irflow.workflow.inputs
  keeps a download job's inputs as Snakemake recorded them);
- **the exceptions Snakemake raises through input functions on purpose**
  (``snakemake.exceptions``: irflow.workflow.guard lets them through);
- **the parser** (``snakemake.parser.parse``), which translates a Snakefile into the Python
  whose decorators irflow.workflow.rule_directives reads;
- **the finished run** (the Snakefile's ``onsuccess`` and ``onerror``): the DAG's jobs, their
  dependencies, which ran or needed not, and the scheduler's failed jobs (irflow.workflow.run_end).

``tests/test_snakemake_internals.py`` checks each on the installed Snakemake, failing with a
message that names the Snakemake version and what changed. ``SUPPORTED`` is the range irflow is
tested on; pyproject.toml's pin and CONTRIBUTING.md say the same (the test checks).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

# Snakemake's modules import each other in a circle that the order of its API module's imports
# resolves: on 9.0, importing snakemake.parser first fails (it imports snakemake.workflow, which
# imports it back).
import snakemake.api
from snakemake.exceptions import IncompleteCheckpointException, InputOpenException
from snakemake.io import AnnotatedString, IOFile, is_callable
from snakemake.io import ancient as snakemake_ancient
from snakemake.parser import parse
from snakemake.sourcecache import LocalSourceFile

# The Snakemake versions irflow supports: pyproject.toml's `all` extra pins the same range.
SUPPORTED = ">=9,<10"
VERSION = snakemake.__version__
# Snakemake's own signals, raised through input functions on purpose: never to be caught.
SIGNALS = (IncompleteCheckpointException, InputOpenException)


class SnakemakeChangedError(RuntimeError):
    """Snakemake no longer offers a piece of its internals that irflow relies on."""

    def __init__(self, what: str, error: Exception):
        super().__init__(
            f"Snakemake {VERSION} changed {what}, which irflow relies on "
            f"(irflow.workflow.snakemake_internals; irflow supports Snakemake {SUPPORTED}): "
            f"{type(error).__name__}: {error}. Install a supported version: "
            f"pip install 'snakemake{SUPPORTED}'."
        )


def relies_on(what: str):
    """A function of this module that touches ``what`` of Snakemake: an attribute or a signature
    gone ends the run with ``SnakemakeChangedError`` naming it, not a bare AttributeError."""

    def decorate(function):
        @functools.wraps(function)
        def call(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            except (AttributeError, TypeError) as error:
                raise SnakemakeChangedError(what, error) from error

        return call

    return decorate


# The run being planned.


@relies_on("Workflow.is_main_process")
def is_main_process(workflow) -> bool:
    """Whether this process plans the run (not a job's process, which reads the Snakefile too)."""
    return bool(workflow.is_main_process)


@relies_on("Workflow.dryrun")
def is_dry_run(workflow) -> bool:
    """Whether the run is a dry run (known once planning starts, not while the Snakefile is
    read)."""
    return bool(workflow.dryrun)


@relies_on("Workflow.overwrite_configfiles")
def given_config_files(workflow) -> list[str]:
    """The config files of the command line (``--configfile``), in its order."""
    return list(workflow.overwrite_configfiles or [])


@relies_on("Workflow.configfiles")
def read_config_files(workflow) -> list[str]:
    """Every config file the run read, in the order Snakemake merged them."""
    return list(workflow.configfiles)


@relies_on("Workflow.main_snakefile")
def main_snakefile(workflow) -> str:
    return str(workflow.main_snakefile)


@relies_on("Workflow.config")
def workflow_config(workflow) -> dict:
    return workflow.config


@relies_on("Workflow.rules")
def rules_of(workflow) -> list[WorkflowRule]:
    """Every rule of the workflow, as ``WorkflowRule``."""
    return [WorkflowRule(rule) for rule in workflow.rules]


@relies_on("Workflow.persistence.input(IOFile)")
def recorded_inputs(workflow, output: str) -> list[str] | None:
    """The input files Snakemake recorded (in .snakemake/metadata) for the job that last made
    ``output``: what its ``input`` rerun trigger compares the job's inputs with. None without a
    record, or before Snakemake opened its records."""
    persistence = workflow.persistence
    return None if persistence is None else persistence.input(IOFile(output))


@relies_on("snakemake.io.ancient")
def ancient(path: str):
    """``path`` as the Snakefile's ``ancient(path)`` marks it: its modification time never
    makes the job run (a changed input set, a changed checksum irflow finds, still do)."""
    return snakemake_ancient(path)


class WorkflowRule:
    """One rule of the workflow being read: what irflow reads of it and changes in it."""

    def __init__(self, rule):
        self._rule = rule

    @property
    @relies_on("Rule.name")
    def name(self) -> str:
        return self._rule.name

    @property
    @relies_on("Rule.params (a Namedlist: items())")
    def params(self) -> dict:
        """The rule's params by name: each a value or a function of the job's wildcards."""
        return dict(self._rule.params.items())

    @property
    @relies_on("Rule.output (a Namedlist: items())")
    def output_names(self) -> set[str]:
        return {name for name, _ in self._rule.output.items()}

    @relies_on("Rule.output's IOFile.apply_wildcards")
    def outputs(self, wildcards) -> tuple[list[Path], dict[str, Path]]:
        """The job's output paths for ``wildcards``: all of them, and the named ones by name."""

        def path(output) -> Path:
            return Path(output.apply_wildcards(wildcards))

        outputs = self._rule.output
        named = {name: path(each) for name, each in outputs.items()}
        return [path(each) for each in outputs], named

    @relies_on("Rule.set_input(**named)")
    def add_input_function(self, name: str, function: Callable) -> None:
        """Add ``function`` to the rule's inputs, under ``name``."""
        self._rule.set_input(**{name: function})

    @relies_on("Rule.input, snakemake.io.IOFile, AnnotatedString and their flags")
    def replace_input_functions(self, replace: Callable[[Callable], Callable]) -> None:
        """Every input function of the rule replaced by ``replace(function)``, its flags
        (``unpack``) and name kept: Snakemake reads a named input from the attribute of its
        name, the others by position."""
        rule = self._rule
        names = {id(value): name for name, value in rule.input.items()}
        for position, item in enumerate(rule.input):
            if not is_callable(item):
                continue
            if callable(item):
                replacement = replace(item)
            else:  # a flagged function (unpack(...)): Snakemake keeps it, and its flags, in
                # a string
                replacement = AnnotatedString(replace(item._file.callable))
                replacement.flags = dict(item.flags)
                replacement = IOFile(replacement, rule=rule)
            rule.input[position] = replacement
            if id(item) in names:
                setattr(rule.input, names[id(item)], replacement)


# The parser.


@dataclass(frozen=True)
class Directive:
    """A directive's arguments as written: a positional string as its text, anything else as
    its Python source; each keyword's value as its source."""

    args: tuple[str, ...] = ()
    keywords: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedRule:
    """A rule as Snakemake's parser translates it: a function whose decorators are its
    directives, ``workflow.<directive>(...)`` (``conda``, ``resources``, ``script``, ...)."""

    name: str
    directives: dict[str, Directive] = field(default_factory=dict)
    # `use rule A as B with:`: the rules it uses (A), its name pattern (B, or None: A's own).
    uses: tuple[str, ...] = ()
    use_name: str | None = None

    @property
    def is_use(self) -> bool:
        return bool(self.uses)


@dataclass(frozen=True)
class ParsedSnakefile:
    """One Snakefile as the parser translates it: its rules, and the files its ``include:``
    directives name as a string (relative to it)."""

    rules: list[ParsedRule]
    includes: list[str]


def _directive(node) -> ast.Call | None:
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


def _source(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


def _as_written(call: ast.Call) -> Directive:
    keywords = {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg is not None}
    return Directive(tuple(map(_source, call.args)), keywords)


def _parsed_rule(function: ast.FunctionDef) -> ParsedRule | None:
    """The rule of a function of the translated Snakefile; None for any other function (and for
    a ``use rule`` of another module's rules)."""
    calls = {d.func.attr: d for d in map(_directive, function.decorator_list) if d is not None}
    rule, use = calls.pop("rule", None), calls.pop("userule", None)
    directives = {name: _as_written(call) for name, call in calls.items()}
    if rule is not None:
        return ParsedRule(_keyword(rule, "name"), directives)
    if use is None or _keyword(use, "from_module") is not None:
        return None
    name = _keyword(use, "name_modifier")
    return ParsedRule(name or "", directives, tuple(_keyword(use, "rules")), name)


@relies_on("snakemake.parser.parse and the Python it makes of a Snakefile")
def parse_snakefile(snakefile: Path) -> ParsedSnakefile:
    """``snakefile`` as Snakemake's own parser reads it, without a config and without evaluating
    anything."""
    # All that the parser asks of a workflow: its source cache, to open the Snakefile.
    opening = SimpleNamespace(open=lambda source: open(snakefile, encoding="utf-8"))
    code, _ = parse(LocalSourceFile(str(snakefile)), SimpleNamespace(sourcecache=opening), {})
    tree = ast.parse(code, filename=str(snakefile))
    includes = [
        call.args[0].value
        for call in map(_directive, ast.walk(tree))
        if call is not None
        and call.func.attr == "include"
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    ]
    functions = (node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef))
    rules = [rule for rule in map(_parsed_rule, functions) if rule is not None]
    return ParsedSnakefile(rules, includes)


# The finished run.


class FinishedJob:
    """One job of a finished run's DAG: its rule's name and the job's wildcards, input, output,
    params and log (Namedlists, as a script's ``snakemake`` object has them)."""

    def __init__(self, job):
        self._job = job
        self.rule = job.rule.name
        self.wildcards = job.wildcards
        self.input, self.output, self.params, self.log = job.input, job.output, job.params, job.log

    def __eq__(self, other) -> bool:
        return isinstance(other, FinishedJob) and self._job == other._job

    def __hash__(self) -> int:
        return hash(self._job)


class FinishedRun:
    """What a finished run's DAG and scheduler say: its jobs, which failed, which of the others
    are up to date (ran in this run, or needed not), and what each depends on."""

    @relies_on("Workflow.dag, Workflow.scheduler.failed and group jobs (is_group(), jobs)")
    def __init__(self, workflow):
        self._dag = workflow.dag
        self.jobs = [FinishedJob(job) for job in self._dag.jobs]
        # A group job (cluster execution) fails as a whole: each of its jobs counts as failed.
        self.failed = {
            FinishedJob(member)
            for job in workflow.scheduler.failed
            for member in (job.jobs if job.is_group() else [job])
        }

    @relies_on("DAG.noneedrun_finished")
    def up_to_date(self, job: FinishedJob) -> bool:
        """Whether ``job`` ran in this run or needed not."""
        return bool(self._dag.noneedrun_finished(job._job))

    @relies_on("DAG.dependencies")
    def dependencies(self, job: FinishedJob) -> Iterable[FinishedJob]:
        """The jobs ``job`` reads the outputs of."""
        return [FinishedJob(each) for each in self._dag.dependencies[job._job]]
