"""verify: irflow's files read back whole, end to end.

irflow's own readers check every Parquet page's checksum as they read (irflow.core.contracts),
but a file read by nothing is never checked: DuckDB's views do not verify checksums (a flipped
byte in a scores file moved the ``per_query`` mean from 0.9185 to 0.9041), and an up-to-date run
reads nothing. So the database job verifies every file its views read before it builds them,
and ``snakemake --cores 1 verify`` every Parquet and JSON file under results/ (docs/interrupted.md
says when). A damaged file is named with the command that rebuilds it and what was made from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from irflow.core import contracts
from irflow.core.errors import DamagedFileError, UserError

# Rows read at a time: memory stays at a batch, whatever the file's size.
BATCH_ROWS = 65_536
# What is verified under a results folder: every file of these kinds (Parquet: each page's
# checksum; JSON: that it decodes), but not the temporary files of jobs (irflow.core.atomic).
VERIFIED = ("*.parquet", "*.json")


def verify_file(path: str | Path) -> None:
    """Read ``path`` whole, a Parquet file's every page against its checksum, a JSON file as
    JSON; a DamagedFileError names it when it does not read back."""
    path = Path(path)
    if path.suffix == ".json":
        try:
            json.loads(path.read_bytes())
        except ValueError as error:  # truncated, not UTF-8, not JSON
            raise DamagedFileError(path, f"not JSON: {error}") from error
        return
    for _ in contracts.stream_batches(path, BATCH_ROWS):
        pass


def damaged_files(paths: Iterable[str | Path]) -> list[DamagedFileError]:
    """The error of each of ``paths`` that does not read back whole, in their order."""
    problems = []
    for path in paths:
        try:
            verify_file(path)
        except DamagedFileError as error:
            problems.append(error)
    return problems


def results_files(results: Path) -> list[Path]:
    """Every Parquet and JSON file under ``results``, sorted, less the temporary files of jobs
    (named ``.<name>...tmp``) and what lies in their folders."""
    found = {path for pattern in VERIFIED for path in results.rglob(pattern) if path.is_file()}
    return sorted(
        path
        for path in found
        if not any(part.startswith(".") for part in path.relative_to(results).parts)
    )


class DamagedFilesError(UserError):
    """Files that do not read back whole, each named with the command that rebuilds it."""

    def __init__(self, problems: list[DamagedFileError]):
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))


def verify_files(paths: Iterable[str | Path]) -> int:
    """Verify every one of ``paths`` (``verify_file``); a DamagedFilesError names each that
    does not read back whole. Returns how many were verified."""
    paths = list(paths)
    if problems := damaged_files(paths):
        raise DamagedFilesError(problems)
    return len(paths)
