"""The end of a run: its results in the terminal, and the results of a run that failed.

The Snakefile's ``onsuccess`` and ``onerror`` handlers call ``after_success`` and
``after_failure`` with Snakemake's workflow. Of it they read the jobs of the run's DAG (rule,
input, output, log, params), whether each ran or was up to date, and the jobs that failed.
Snakemake calls neither handler on a dry run, nor when there was nothing to do.

- **After a run that made the results tables** (or found them up to date): the main table of
  the first report metric, as results.md opens, where the tables and the database are, and the
  command that makes the report of this run's config: its config files and, where it ran in
  another folder, --snakefile and --directory (irflow.workflow.experiment).
- **After a failure** (with --keep-going, once every job that could run has): the aggregate
  and database jobs have not run, since they read every dataset's scores. The scores that are
  up to date (made by this run, or by an earlier one and still current) are aggregated by the
  aggregate job's own code, inputs and params into ``PARTIAL``: results.md, tables/, the
  summary and the published comparison, and a database over the files that are up to date.
  Each table names the (dataset, system) pairs it lacks and why: the failed job they wait on,
  the error its log ends with, and the log. ``PARTIAL`` is no rule's output, so it never
  stands in for the complete tables: the next run makes those, and then removes ``PARTIAL``.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from irflow.workflow.experiment import shown_path, snakemake_command, write_record
from irflow.workflow.snakemake_internals import (
    FinishedJob,
    FinishedRun,
    given_config_files,
    main_snakefile,
    workflow_config,
)

PARTIAL = Path("results/partial")
REPORT = Path("results/report.html")
DATABASE = Path("results/irflow.duckdb")
# What a user opens first in PARTIAL (the database only where the run's targets hold it).
PARTIAL_FILES = ("results.md", "tables", "irflow.duckdb")
# irflow's log lines (scripts/_common.py): "<date> <time> <logger> <level> <message>".
ERROR_LINE = re.compile(r"^\d{4}-\d\d-\d\d \S+ \S+ (ERROR|CRITICAL) (.*)$")
MESSAGE_CHARACTERS = 300


def log_error(path: Path) -> str | None:
    """The error a failed job's log ends with: its last ERROR line's message, or the last line
    of the traceback after a CRITICAL line or alone; None where the log names no error (a
    killed job's log ends on its progress) or does not exist."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [(i, ERROR_LINE.match(line)) for i, line in enumerate(lines)]
    errors = [(i, found) for i, found in errors if found]
    traceback = "Traceback (most recent call last):" in lines
    if errors and errors[-1][1].group(1) == "ERROR" and errors[-1][0] == len(lines) - 1:
        message = errors[-1][1].group(2)
    elif errors or traceback:
        message = lines[-1]
    else:
        return None
    return message[:MESSAGE_CHARACTERS]


def failure_reason(job: FinishedJob, snakefile: str) -> str:
    """Why a job's results are missing, as a table's note says it: the rule that failed, the
    error its log ends with, and the log."""
    logs = [shown_path(Path(log), snakefile) for log in job.log]
    message = next(filter(None, map(log_error, job.log)), None)
    reason = f"{job.rule} failed" + (f": {message}" if message else "")
    return reason + (f" (log: {', '.join(map(str, logs))})" if logs else "")


def failed_upstream(run: FinishedRun, job: FinishedJob) -> list[FinishedJob]:
    """The failed jobs among ``job`` and the jobs it depends on, directly or not (not past a
    failed one), by rule and wildcards."""
    found, seen, todo = [], {job}, [job]
    while todo:
        current = todo.pop()
        if current in run.failed:
            found.append(current)
            continue
        for dependency in run.dependencies(current):
            if dependency not in seen:
                seen.add(dependency)
                todo.append(dependency)
    return sorted(found, key=lambda each: (each.rule, str(each.wildcards)))


NOT_RUN = (
    "not made: the run stopped before its jobs ran (after a failure, only --keep-going runs "
    "the jobs that do not depend on it)"
)


class RunState:
    """What a finished run's DAG says about its files: which are up to date (their job ran in
    this run, or needed not), and why the others are not."""

    def __init__(self, workflow):
        self.run = FinishedRun(workflow)
        self.snakefile = main_snakefile(workflow)
        self.maker = {str(path): job for job in self.run.jobs for path in job.output}

    def job(self, rule: str) -> FinishedJob | None:
        """The DAG's job of ``rule`` (the aggregate's or the database's), or None."""
        return next((job for job in self.run.jobs if job.rule == rule), None)

    def up_to_date(self, path) -> bool:
        """Whether ``path`` exists and is current: its job ran in this run or needed not."""
        job = self.maker.get(str(path))
        return Path(path).exists() and (job is None or self.run.up_to_date(job))

    def why_missing(self, path) -> str:
        """Why ``path`` is not up to date: the failed jobs it waits on, or that none ran."""
        job = self.maker.get(str(path))
        failed = failed_upstream(self.run, job) if job is not None else []
        reasons = [failure_reason(each, self.snakefile) for each in failed]
        return "; ".join(reasons) or NOT_RUN


def main_table(summary, aggregate, missing: dict | None = None) -> list[str]:
    """The lines of the first report metric's main table, as results.md shows it (its name,
    with the id beside it), with its notes; ``aggregate``: the aggregate job."""
    from irflow.evaluation.tables import TableLayout, metric_heading, result_tables, table_markdown

    params = aggregate.params
    metric = params.report_metrics[0]
    table = result_tables(summary, metric, TableLayout(**params.layout), missing)[0]
    title, _ = metric_heading(metric, params.depth)
    return table_markdown(table, f"{title}{' (partial)' if missing else ''}:")


def say(lines: list[str]) -> None:
    """Print after Snakemake's own lines, on its stream (stderr)."""
    print("\n".join(["", *lines]), file=sys.stderr, flush=True)


def remove_partial(snakefile: str) -> None:
    """Remove the partial results of an earlier run, now stale."""
    if PARTIAL.exists():
        shutil.rmtree(PARTIAL)
        shown = shown_path(PARTIAL, snakefile)
        say([f"irflow: removed {shown}/, the partial results of an earlier run."])


def after_success(workflow) -> None:
    """After a run whose DAG holds the results tables: print the main table, where the results
    are and the command that makes the report; remove stale partial results."""
    from irflow.core.contracts import read_frame

    state = RunState(workflow)
    aggregate = state.job("aggregate")
    if aggregate is None:  # a run of other targets: results.md was not made, nor checked
        return
    remove_partial(state.snakefile)
    summary = read_frame(aggregate.output.summary)
    where = [aggregate.output.markdown, aggregate.output.tables]
    where += [DATABASE] if state.up_to_date(DATABASE) else []
    where = [str(shown_path(Path(path), state.snakefile)) for path in where]
    report = shown_path(REPORT, state.snakefile)
    command = snakemake_command(
        given_config_files(workflow), state.snakefile, ("--report", str(report))
    )
    lines = [f"irflow: the results are in {', '.join(where[:-1])} and {where[-1]}.", ""]
    lines += main_table(summary, aggregate)
    lines += [f"The report, {report}, is made by:", f"    {command}"]
    say(lines)


def after_failure(workflow) -> None:
    """After a failed run whose DAG holds the results tables: the tables and database of the
    (dataset, system) pairs whose scores are up to date, in ``PARTIAL``, each noting what is
    missing and why; their main table printed. Nothing (and no stale ``PARTIAL``) where no
    score is missing (the failure was elsewhere) or none is up to date."""
    state = RunState(workflow)
    aggregate = state.job("aggregate")
    if aggregate is None:
        return
    scores = dict(zip(map(tuple, aggregate.params.pairs), aggregate.input.scores))
    finished = {pair: Path(path) for pair, path in scores.items() if state.up_to_date(path)}
    missing = {
        pair: state.why_missing(path) for pair, path in scores.items() if pair not in finished
    }
    if not (missing and finished):
        remove_partial(state.snakefile)
        if missing:
            say(["irflow: no dataset was scored, so there are no partial results."])
        return
    shutil.rmtree(PARTIAL, ignore_errors=True)  # an earlier failed run's, replaced
    try:
        summary = write_partial(workflow, state, aggregate, finished, missing)
    except Exception as error:  # the run's own error stays the one Snakemake reports
        shutil.rmtree(PARTIAL, ignore_errors=True)
        say([f"irflow: the partial results could not be made: {error!r}"])
        return
    shown = shown_path(PARTIAL, state.snakefile)
    made = [name for name in PARTIAL_FILES if (PARTIAL / name).exists()]
    rerun = snakemake_command(given_config_files(workflow), state.snakefile)
    lines = [
        f"irflow: partial results of the {len(finished)} of {len(scores)} (dataset, system) "
        f"pairs that finished, in {shown}/ ({', '.join(made)}):",
        "",
        *main_table(summary, aggregate, missing),
        "Fix what failed and run again; the complete tables replace these:",
        f"    {rerun}",
    ]
    say(lines)


def write_partial(workflow, state: RunState, aggregate, finished: dict, missing: dict):
    """``PARTIAL``'s tables and database; returns the summary of the finished pairs."""
    import pandas as pd

    from irflow.core import contracts
    from irflow.evaluation.aggregate import build_database
    from irflow.evaluation.results import ResultFiles, write_results
    from irflow.evaluation.tables import TableLayout

    params = aggregate.params
    files = ResultFiles.in_folder(PARTIAL)
    PARTIAL.mkdir(parents=True)
    summary = write_results(
        [(dataset, system, path) for (dataset, system), path in finished.items()],
        Path(aggregate.input.published),
        files,
        params.report_metrics,
        TableLayout(**params.layout),
        params.identities,
        missing=missing,
        depth=params.depth,
    )
    rows = [(dataset, system, why) for (dataset, system), why in sorted(missing.items())]
    frame = pd.DataFrame(rows, columns=contracts.MISSING.names)
    contracts.write_frame(frame, PARTIAL / "missing.parquet", contracts.MISSING)
    database = state.job("database")
    if database is not None:
        views = {
            name: [path for path in database.input[name] if state.up_to_date(path)]
            for name in database.input.keys()
        }
        views |= {"summary": [files.summary], "published": [files.published]}
        views["missing"] = [PARTIAL / "missing.parquet"]
        record = PARTIAL / "experiment.json"
        write_record(database.params.experiment, workflow_config(workflow), record)
        build_database(PARTIAL / "irflow.duckdb", views, database.params.experiment, record=record)
    return summary
