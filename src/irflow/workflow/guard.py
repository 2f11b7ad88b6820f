"""Input functions that cannot fail quietly.

Snakemake drops an exception raised in a job's input function when the job's outputs exist:
its DAG builder (``DAG.update_``) takes the existing file as given, and the job and everything
after it leave the graph. A full ``results/`` while a dataset's file status was recorded, or a
damaged settings stamp, ended a run with "Nothing to be done" and exit 0, the old numbers kept
(issue 49). So the Snakefile passes every rule to ``guard_input_functions``: any exception of
one of its input functions ends the run (as ``SystemExit``, which the DAG builder does not
catch) with a message naming the rule, the job's wildcards, the function and the problem.
"""

from __future__ import annotations

import functools
import traceback

from irflow.core.errors import UserError
from irflow.workflow.snakemake_internals import SIGNALS, WorkflowRule

ADVICE = (
    "The run stops here rather than leave this job and everything after it out of the run. "
    "Fix what the message names and run the same command again."
)


def failure_message(rule_name: str, function, wildcards, error: Exception) -> str:
    """What a failed input function's run ends with: the job, the function and the problem (for
    an error that is not the user's, the line of irflow that raised it)."""
    values = ", ".join(f"{name}={value}" for name, value in dict(wildcards).items())
    job = f"rule {rule_name}" + (f" ({values})" if values else "")
    problem = f"{type(error).__name__}: {error}"
    if not isinstance(error, UserError):
        frame = traceback.extract_tb(error.__traceback__)[-1]
        problem += f" (at {frame.filename}, line {frame.lineno})"
    name = getattr(function, "__qualname__", repr(function))
    return f"irflow: planning {job} failed in its input function {name}: {problem}. {ADVICE}"


def guarded(rule_name: str, function, before=lambda: None, stamp=None):
    """``function``, an input function of rule ``rule_name``, ending the run when it raises;
    ``before()`` is called first, then the rule's settings ``stamp`` (irflow.workflow.stamps),
    so that an input function sees the outputs as the stamp leaves them (a dataset's files are
    marked ancient unless its source.json is to be made again: irflow.workflow.inputs). Its
    signature is kept (``functools.wraps``): Snakemake passes the arguments it names."""

    @functools.wraps(function)
    def call(wildcards, *args, **kwargs):
        before()
        if stamp is not None:
            ending_the_run(rule_name, stamp, wildcards)
        return ending_the_run(rule_name, function, wildcards, *args, **kwargs)

    return call


def ending_the_run(rule_name: str, function, wildcards, *args, **kwargs):
    """``function(wildcards, ...)``, its exception ending the run with a message naming it."""
    try:
        return function(wildcards, *args, **kwargs)
    except SIGNALS:  # Snakemake's own, raised through input functions on purpose
        raise
    except Exception as error:
        raise SystemExit(failure_message(rule_name, function, wildcards, error)) from error


def guard_input_functions(rule: WorkflowRule, before=lambda: None, stamp=None) -> None:
    """Every input function of ``rule`` guarded (``guarded``, calling ``before`` and the rule's
    settings ``stamp`` first), its flags (``unpack``) and name kept."""
    rule.replace_input_functions(lambda function: guarded(rule.name, function, before, stamp))
