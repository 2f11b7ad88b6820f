"""rows: a dataset file's records, line by line (JSON lines, plain or gzipped) or row by row
(Parquet, in bounded batches), each problem an error naming the file, the line or row, and the
field (irflow.data.ingest reads BEIR and PosIR folders with them)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from irflow.core import contracts
from irflow.core.errors import DamagedFileError, InputError

ROWS_PER_BATCH = 50_000


class RowError(InputError):
    """Bad value in a Parquet table: names the file, the row (counted from 0) and the column."""

    def __init__(self, path: str | Path, message: str, *, row: int, field: str | None = None):
        super().__init__(f"{path}, row {row}", message, field=field)
        self.path, self.row = str(path), row


@dataclass(frozen=True)
class Place:
    """Where records come from: the lines of a text file or the rows of a Parquet table."""

    path: Path
    unit: str  # "line" or "row"

    def error(self, at: int, message: str, field: str | None = None) -> InputError:
        if self.unit == "row":
            return RowError(self.path, message, row=at, field=field)
        return InputError(self.path, message, line=at, field=field)


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield (line number, text) of a UTF-8 file, plain or gzipped, without a leading BOM."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                # Editors on Windows often start a file with a byte-order mark; utf-8-sig drops it.
                encoding = "utf-8-sig" if number == 1 else "utf-8"
                try:
                    yield number, raw.decode(encoding)
                except UnicodeDecodeError as error:
                    raise InputError(
                        path, f"not valid UTF-8 (byte {error.start} of the line)", line=number
                    ) from None
    except (OSError, EOFError) as error:  # e.g. a truncated gzip stream
        raise InputError(path, f"cannot be read: {error}") from None


def string_field(record: dict, key: str, place: Place, at: int, required: bool) -> str:
    value = record.get(key)
    if value is None:
        if required:
            raise place.error(at, "missing", key)
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise place.error(at, f"expected a string, got {type(value).__name__}", key)
    return str(value)


def string_fields(record: dict, fields: dict[str, bool], place: Place, at: int) -> dict:
    """{field: string} of ``record``; ``fields`` maps each to whether it is required, and the
    id fields (``_id``, ``query-id``, ``corpus-id``) among them must be non-empty."""
    values = {key: string_field(record, key, place, at, req) for key, req in fields.items()}
    for key in ("_id", "query-id", "corpus-id"):
        if key in values and not values[key].strip():
            raise place.error(at, "empty id", key)
    return values


def json_problem(error: json.JSONDecodeError) -> str:
    """The json module's message with the column it leaves to its ``str`` ("Invalid control
    character at" ends where the position would follow): the line is the file's own."""
    joint = " " if error.msg.endswith(" at") else " at "
    return f"{error.msg}{joint}column {error.pos + 1}"


def read_jsonl(path: Path, fields: dict[str, bool]) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield (line number, {field: string}) for each non-blank line.

    ``fields`` maps each field to whether it is required; ``_id`` must be non-empty.
    """
    place = Place(path, "line")
    for number, text in text_lines(path):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(path, f"malformed JSON: {json_problem(error)}", line=number) from None
        except RecursionError:  # the json module recurses once per nested array or object
            raise InputError(path, "malformed JSON: nested too deeply", line=number) from None
        if not isinstance(record, dict):
            raise InputError(path, "expected a JSON object", line=number)
        yield number, string_fields(record, fields, place, number)


def read_parquet_rows(path: Path, columns: dict[str, bool]) -> Iterator[tuple[int, dict]]:
    """Yield (row, {column: value}) of a Parquet table in bounded batches.

    ``columns`` maps each column to read to whether the table must have it; an absent optional
    column is absent from the dicts.
    """
    try:
        table = contracts.ParquetFile(path)
        present = set(table.schema_arrow.names)
        for name, required in columns.items():
            if required and name not in present:
                has = ", ".join(sorted(present))
                raise InputError(path, f"missing column (the table has: {has})", field=name)
        wanted = [name for name in columns if name in present]
        row = 0
        for batch in table.iter_batches(batch_size=ROWS_PER_BATCH, columns=wanted):
            for record in batch.to_pylist():
                yield row, record
                row += 1
    except DamagedFileError as error:  # the user's own file: to fix, not to rebuild
        raise InputError(path, f"cannot be read as Parquet: {error.problem}") from None
    except (OSError, pa.ArrowException) as error:
        raise InputError(path, f"cannot be read as Parquet: {error}") from None
