"""One results folder, one experiment: a second config is refused instead of silently replacing
the first one's database, and the refusal says how to keep both."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import duckdb
import pytest
import yaml
from conftest import REPO, SCHEMA, minimal_config, snakemake

from irflow.core.errors import COMMAND_VARIABLE, ConfigError, rebuild_command
from irflow.evaluation.aggregate import build_database
from irflow.workflow.config import expand_config, validate_config
from irflow.workflow.experiment import (
    check_experiment,
    experiment,
    shown_path,
    snakemake_command,
    write_record,
)

CONFIG = minimal_config()


def test_a_second_config_is_refused_naming_both(tmp_path):
    record = tmp_path / "results" / "experiment.json"
    first = experiment(CONFIG, [tmp_path / "first.yaml"])
    check_experiment(first, record)  # no record yet: any config may start
    write_record(first, CONFIG, record)
    assert json.loads(record.read_text())["config"] == CONFIG
    # The same file, edited: the same experiment, continued.
    check_experiment(experiment(CONFIG | {"top_k": 10}, [tmp_path / "first.yaml"]), record)
    with pytest.raises(ConfigError) as refused:
        check_experiment(experiment(CONFIG | {"top_k": 5}, [tmp_path / "second.yaml"]), record)
    message = str(refused.value)
    assert f"holds the results of {tmp_path / 'first.yaml'} ({record})" in message
    assert f"this run reads {tmp_path / 'second.yaml'}" in message
    assert f"pass --configfile {tmp_path / 'first.yaml'}" in message
    assert f"snakemake --directory <folder> --configfile {tmp_path / 'second.yaml'}" in message
    assert f"delete {record}" in message


def test_a_copy_of_the_config_at_another_path_is_the_same_experiment(tmp_path):
    """An experiment is its settings, not its file name: a byte-identical copy of the recorded
    config (the validated config the Snakefile fingerprints) continues it, and a copy whose
    settings differ is still refused. Before, the copy was refused as another experiment."""
    text = (REPO / "config" / "quickstart.yaml").read_text(encoding="utf-8")
    first, copy, changed = tmp_path / "quickstart.yaml", tmp_path / "copy.yaml", tmp_path / "c.yaml"
    first.write_text(text)
    copy.write_text(text)
    changed.write_text(text + "\ntop_k: 10\n")

    def validated(path: Path) -> dict:
        return validate_config(expand_config(yaml.safe_load(path.read_text())), SCHEMA)

    record = tmp_path / "results" / "experiment.json"
    write_record(experiment(validated(first), [first]), validated(first), record)
    check_experiment(experiment(validated(copy), [copy]), record)
    with pytest.raises(ConfigError, match="whose settings differ"):
        check_experiment(experiment(validated(changed), [changed]), record)


def test_second_experiments_under_runs_are_ignored_by_git():
    """The README runs a second experiment in runs/<name>/: its results are not the project's
    files (before, 253 MB of them showed as untracked)."""
    ignored = subprocess.run(
        ["git", "-C", str(REPO), "check-ignore", "-q", "runs/mydata/results/irflow.duckdb"],
        check=False,
    )
    assert ignored.returncode == 0


def test_the_database_names_its_experiment(tmp_path):
    recorded = experiment(CONFIG, [tmp_path / "first.yaml"])
    build_database(tmp_path / "irflow.duckdb", {}, recorded)
    with duckdb.connect(str(tmp_path / "irflow.duckdb"), read_only=True) as db:
        row = db.execute("SELECT config_files, fingerprint FROM experiment").fetchone()
    assert row == ([str(tmp_path / "first.yaml")], recorded["fingerprint"])


def test_a_report_of_another_config_is_refused_before_the_workflow_runs(tmp_path):
    """The report of results made with --configfile, asked for without it: refused, naming
    the config to pass (it printed a "Missing metadata" warning for every output of the
    default config's graph instead)."""
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(yaml.safe_dump(CONFIG))
    second.write_text(yaml.safe_dump(CONFIG | {"top_k": 10}))
    write_record(experiment(CONFIG, [first]), CONFIG, tmp_path / "results" / "experiment.json")
    args = ["--configfile", str(second), "--report", "report.html"]
    result = snakemake(tmp_path, *args, cores=None, check=False)
    assert result.returncode != 0
    output = result.output
    assert f"pass --configfile {first}" in output and "Missing metadata" not in output


def test_the_rebuild_command_is_the_run_s_own(tmp_path, monkeypatch):
    """Where the README runs it (the checkout, its config named relative to it) the command
    is as short as the README's; from another working directory it names the Snakefile and
    that directory, and the config files whole."""
    config = tmp_path / "config" / "quickstart.yaml"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    here = snakemake_command([config], str(tmp_path / "Snakefile"))
    assert here == "snakemake --cores all --configfile config/quickstart.yaml"
    monkeypatch.setenv(COMMAND_VARIABLE, here)
    assert rebuild_command(tmp_path / "results/runs/d/bm25.parquet") == (
        f"{here} --forcerun=results/runs/d/bm25.parquet"
    )
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert snakemake_command([config], str(tmp_path / "Snakefile")) == (
        f"snakemake --cores all --snakefile {tmp_path / 'Snakefile'} --directory {elsewhere} "
        f"--configfile {config}"
    )
    assert snakemake_command([], str(tmp_path / "Snakefile")).endswith(f"--directory {elsewhere}")


def test_the_report_command_names_the_run_s_config_and_folder(tmp_path, monkeypatch):
    """The end of a run prints the command that makes its report (irflow.workflow.run_end):
    the config files it ran, and from another working directory that directory, with the
    report's path whole so that it lands there."""
    config = tmp_path / "config" / "mine.yaml"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    report = shown_path(Path("results/report.html"), str(tmp_path / "Snakefile"))
    command = snakemake_command([config], str(tmp_path / "Snakefile"), ("--report", str(report)))
    assert command == "snakemake --report results/report.html --configfile config/mine.yaml"
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    report = shown_path(Path("results/report.html"), str(tmp_path / "Snakefile"))
    assert report == elsewhere / "results" / "report.html"
    assert snakemake_command([config], str(tmp_path / "Snakefile"), ("--report", str(report))) == (
        f"snakemake --report {report} --snakefile {tmp_path / 'Snakefile'} --directory "
        f"{elsewhere} --configfile {config}"
    )


def test_the_report_command_carries_the_run_s_pythonpath(tmp_path, monkeypatch):
    """A ``type: python`` retriever's module is imported when the config is checked, so the
    report command of a run made with PYTHONPATH fails without it (issue 51: the printed
    command omitted it). It carries the run's folders, made whole, and bash reads it as an
    assignment even where a folder's name has a space."""
    config = tmp_path / "config" / "mine.yaml"
    (tmp_path / "my classes").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["my classes", "/opt/other"]))
    command = snakemake_command([config], str(tmp_path / "Snakefile"), ("--report", "r.html"))
    folders = f"{tmp_path / 'my classes'}{os.pathsep}/opt/other"
    assert shlex.split(command) == [
        f"PYTHONPATH={folders}",
        *"snakemake --report r.html --configfile config/mine.yaml".split(),
    ]
    # Pasted into bash, the Snakemake it runs (here one that prints what it got) has it.
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    (bin_folder / "snakemake").write_text('#!/bin/sh\nprintf "%s|" "$PYTHONPATH" "$@"\n')
    (bin_folder / "snakemake").chmod(0o755)
    environment = os.environ | {"PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
    environment.pop("PYTHONPATH")
    pasted = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, env=environment, check=True
    )
    assert pasted.stdout == f"{folders}|--report|r.html|--configfile|config/mine.yaml|"
    monkeypatch.setenv("PYTHONPATH", "")
    assert not snakemake_command([config], str(tmp_path / "Snakefile")).startswith("PYTHON")
