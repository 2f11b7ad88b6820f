"""One results/ folder, one experiment: which config files its results come from.

Every output has a fixed path under results/, so a run of a second config in the same working
directory would replace the first one's tables and database piecemeal, without a word. The
database rule records the config files its run read, and the validated config's fingerprint,
in ``RECORD`` (and the database's ``experiment`` table); a later run that reads other config
files with other settings is refused before any job starts, with the ways to keep both. An
experiment is its settings, not its file names: editing the recorded file and running again is
the same experiment, continued, and so is a run of the same settings from another path (a copy
of the config file, byte for byte or not).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from irflow.core.errors import ConfigError
from irflow.core.fingerprint import value_md5
from irflow.core.redaction import public_urls_of

RECORD = Path("results/experiment.json")


def experiment(config: dict, config_files) -> dict:
    """What identifies a run's experiment: its config files (absolute, in the order Snakemake
    merged them) and the fingerprint of the validated config they gave."""
    return {
        "config_files": [str(Path(path).resolve()) for path in config_files],
        "fingerprint": value_md5(config),
    }


def check_experiment(current: dict, record: Path = RECORD) -> None:
    """Refuse a run whose config files are not those ``record`` names and whose validated
    config is not the recorded one either, if ``record`` exists."""
    if not record.is_file():
        return
    try:
        recorded_experiment = json.loads(record.read_bytes())
        recorded = recorded_experiment["config_files"]
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigError(
            f"{record} is damaged ({type(error).__name__}: {error}); it records which config "
            f"files the results in {record.parent}/ come from. If they are this run's, delete "
            f"it (rm {record}) and run the same command again: the run writes it anew."
        ) from error
    if current["config_files"] == recorded:
        return  # the same files, edited or not: the experiment continued
    if current["fingerprint"] == recorded_experiment.get("fingerprint"):
        return  # the same settings, read from another path
    theirs, ours = " + ".join(recorded), " + ".join(current["config_files"]) or "no config file"
    raise ConfigError(
        f"{record.parent}/ holds the results of {theirs} ({record}); this run reads {ours}, "
        f"whose settings differ. "
        f"A results folder holds one experiment, so that its tables and database never mix "
        f"two. To continue that experiment (or make its --report), pass --configfile "
        f"{theirs.replace(' + ', ' ')}. To keep both, run this config in its own working "
        f"directory (snakemake --directory <folder> --configfile {ours}; relative paths in the "
        f"config are then relative to <folder>) or move {record.parent}/ aside first; to let it "
        f"take {record.parent}/ over, reusing what the two share, delete {record}."
    )


def write_record(current: dict, config: dict, record: Path = RECORD) -> None:
    """``RECORD``: the experiment and the validated config itself, its URLs without userinfo
    or query string (irflow.core.redaction)."""
    record.parent.mkdir(parents=True, exist_ok=True)
    recorded = current | {"config": public_urls_of(config)}
    text = json.dumps(recorded, indent=2, sort_keys=True, default=str)
    record.write_text(text + "\n", encoding="utf-8")


def runs_elsewhere(snakefile: str) -> bool:
    """Whether this run's working directory is not the Snakefile's folder (--directory)."""
    return Path(snakefile).resolve().parent != Path.cwd().resolve()


def shown_path(path: Path, snakefile: str) -> Path:
    """A path in the working directory as a message names it: as is where the run works in the
    Snakefile's folder (the README's commands), absolute otherwise (run from elsewhere)."""
    return Path(path).absolute() if runs_elsewhere(snakefile) else Path(path)


def snakemake_command(
    config_files: list, snakefile: str, options: tuple[str, ...] = ("--cores", "all")
) -> str:
    """The command line that runs this experiment again with ``options`` (by default
    ``--cores all``), less its targets: the Snakemake the user ran (``.venv/bin/snakemake`` for
    the README's) and the config files the run named; with the Snakefile and the working
    directory where the Snakefile is not in it, and the run's PYTHONPATH (``python_path``). A
    damaged file's error (irflow.core.errors.rebuild_command) adds the file."""
    program = sys.argv[0] if Path(sys.argv[0]).name == "snakemake" else "snakemake"
    words = [program, *options]
    here = Path.cwd()
    paths = [Path(path).absolute() for path in config_files]
    if runs_elsewhere(snakefile):
        words += ["--snakefile", str(Path(snakefile).resolve()), "--directory", str(here)]
    else:  # run where it was started: its own files, as the README names them
        paths = [path.relative_to(here) if path.is_relative_to(here) else path for path in paths]
    if paths:
        words += ["--configfile", *(str(path) for path in paths)]
    return python_path() + shlex.join(words)


def python_path() -> str:
    """``PYTHONPATH=<folders> `` as this run had it, or "" where it had none: a ``type: python``
    retriever's, reranker's or source's module is imported from there when the config is
    checked, by the run and by --report alike, so a command without it fails. Each folder is
    made whole (a relative one against the working directory, where the run's jobs read it),
    so that the command works pasted anywhere."""
    value = os.environ.get("PYTHONPATH", "")
    folders = [str(Path(folder).absolute()) for folder in value.split(os.pathsep) if folder]
    # One word, unquoted up to the "=": a quoted name would not be an assignment to bash.
    return f"PYTHONPATH={shlex.quote(os.pathsep.join(folders))} " if folders else ""
