"""Errors that tell the user which input is wrong and where."""

from __future__ import annotations

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
