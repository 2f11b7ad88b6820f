"""cache: chat completions by cache key, in a folder of Parquet files shared by processes (see
irflow.derived.llm.client for the design)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from irflow.core import contracts

log = logging.getLogger(__name__)


# Opening a cache folder with more files than this compacts them all into one.
COMPACT_AT = 32


class AnswerCache:
    """Chat completions by cache key, in a folder of Parquet files; thread-safe.

    Nothing is read at opening: ``load`` reads the rows of the keys a job may use, of its
    ``model`` (None: any), so a folder shared by many models and stages costs a job the memory
    of its own answers only. Each answer is written at once as a part file of its own;
    ``merge`` turns this process's parts into one file, and opening a folder of more than
    ``COMPACT_AT`` files compacts them (every model's rows).
    """

    def __init__(self, folder: str | Path, model: str | None = None):
        from filelock import FileLock  # here: every dry run imports this module (config checks)

        self.folder = Path(folder)
        self.model = model
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        # Between processes: no file is merged away while another process loads or merges.
        self.shared = FileLock(self.folder / ".lock")
        self.records: dict[str, dict] = {}
        self.parts: list[Path] = []  # written by this process since the last merge
        self.written: list[dict] = []  # their rows
        self.looked_up: set[str] = set()  # keys read from the folder, found or not
        with self.shared:
            files = sorted(self.folder.glob("*.parquet"))
            if len(files) > COMPACT_AT:
                self._compact(files)

    @staticmethod
    def _read(path: Path, filters=None) -> pa.Table | None:
        try:
            return contracts.read_table(path, filters=filters)
        except (pa.ArrowInvalid, OSError) as error:
            log.warning("skipping unreadable cache file %s: %s", path, error)
            return None

    def load(self, keys: Iterable[str]) -> None:
        """Read the rows of ``keys`` (of this model) from the folder; each key once."""
        with self.lock:
            wanted = sorted(set(keys) - self.looked_up)
            self.looked_up.update(wanted)
        if not wanted:
            return
        # Parquet skips a row group whose statistics rule the model out, unread.
        filters = [("key", "in", wanted)]
        if self.model is not None:
            filters.append(("model", "=", self.model))
        with self.shared:
            for path in sorted(self.folder.glob("*.parquet")):
                table = self._read(path, filters)
                with self.lock:
                    for row in table.to_pylist() if table is not None else []:
                        self.records.setdefault(row["key"], row)

    def _compact(self, files: list[Path]) -> None:
        """Fold the readable ``files`` into one, every model's rows (read here, not kept)."""
        tables = {path: self._read(path) for path in files}
        readable = [path for path, table in tables.items() if table is not None]
        self._replace(readable, pa.concat_tables([tables[path] for path in readable]))

    def __len__(self) -> int:
        return len(self.records)

    def get(self, key: str) -> dict | None:
        with self.lock:
            return self.records.get(key)

    def put(self, record: dict) -> None:
        """Keep ``record`` and write it to disk at once, as a part file of its own."""
        path = self.folder / f"part-{uuid.uuid4().hex}.parquet"
        self._write([record], path)
        with self.lock:
            self.records[record["key"]] = record
            self.parts.append(path)
            self.written.append(record)

    def _write(self, rows: list[dict] | pa.Table, path: Path) -> None:
        # Each file's name is new (a uuid), so threads never share a temporary name.
        if not isinstance(rows, pa.Table):
            rows = pa.Table.from_pylist(rows, contracts.LLM_CACHE)
        contracts.write_table(rows, path, contracts.LLM_CACHE)

    def _replace(self, files: list[Path], rows: list[dict] | pa.Table) -> None:
        """Write ``rows`` as one file, then delete ``files``: a crash in between leaves
        duplicates, never a loss."""
        self._write(rows, self.folder / f"cache-{uuid.uuid4().hex}.parquet")
        for path in files:
            path.unlink(missing_ok=True)

    def merge(self) -> None:
        """Replace the parts this process wrote by one file holding their rows (from memory:
        another process's compaction may have taken the part files already)."""
        with self.lock:
            parts, rows = self.parts, self.written
            self.parts, self.written = [], []
        if len(parts) < 2:
            return
        with self.shared:
            self._replace(parts, rows)
