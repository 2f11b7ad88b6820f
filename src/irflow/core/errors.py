"""Errors that tell the user which input is wrong and where."""

from __future__ import annotations

import os
import shlex
from pathlib import Path


class UserError(Exception):
    """A problem with the user's data, download or configuration, not a bug in irflow.

    Its message says everything needed to fix it, so a job reports it in one line, without a
    traceback.
    """


class InputError(UserError, ValueError):
    """Bad input data: names the file, and the line and field when they are known."""

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        line: int | None = None,
        field: str | None = None,
    ):
        self.path = str(path)
        self.line = line
        self.field = field
        where = self.path + (f", line {line}" if line is not None else "")
        where += f", field '{field}'" if field is not None else ""
        super().__init__(f"{where}: {message}")


class DownloadError(UserError, RuntimeError):
    """A dataset could not be fetched, verified or unpacked."""


class ConfigError(UserError, ValueError):
    """The workflow configuration is invalid; the message names the key."""


# The Snakemake command line of the running workflow, less its targets (set by the Snakefile):
# the command a DamagedFileError gives reruns the experiment the damaged file belongs to.
COMMAND_VARIABLE = "IRFLOW_SNAKEMAKE_COMMAND"


def rebuild_command(path: str | Path) -> str:
    """The command that remakes ``path`` and every result made from it: Snakemake's
    ``--forcerun`` reruns the job that writes the file, then every job downstream of it."""
    path = Path(path)
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())  # as the rule names it
    command = os.environ.get(COMMAND_VARIABLE) or "snakemake --cores all"
    # "=": --forcerun takes every word after it, and the file alone must be forced.
    return f"{command} --forcerun={shlex.quote(str(path))}"


class DamagedFileError(UserError, OSError):
    """A file that irflow wrote cannot be read back whole (truncated, overwritten, a flipped
    bit): names it and the command that rebuilds it with what was made from it."""

    def __init__(self, path: str | Path, problem: str):
        self.path, self.problem = str(path), problem
        super().__init__(
            f"{self.path} is damaged ({problem}). Rebuild it and every result made from it "
            f"with: {rebuild_command(path)}"
        )
