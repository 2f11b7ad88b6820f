"""cache: chat completions by cache key, in a folder of Parquet files shared by processes (see
irflow.derived.llm.client for the design)."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

from irflow.core import contracts

log = logging.getLogger(__name__)


# Opening a cache folder with more files than this compacts them all into one.
COMPACT_AT = 32


class AnswerCache:
    """Chat completions by cache key, in a folder of Parquet files; thread-safe.

    Only the rows of ``model`` are loaded (None: every row): a folder shared by many models
    costs a job the memory of its own model's answers. Each answer is written at once as a
    part file of its own; ``merge`` turns this process's parts into one file, and opening a
    folder of more than ``COMPACT_AT`` files compacts them (every model's rows).
    """

    def __init__(self, folder: str | Path, model: str | None = None):
        self.folder = Path(folder)
        self.model = model
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        # Between processes: no file is merged away while another process loads or merges.
        self.shared = FileLock(self.folder / ".lock")
        self.records: dict[str, dict] = {}
        self.parts: list[Path] = []  # written by this process since the last merge
        self.written: list[dict] = []  # their rows
        with self.shared:
            files = self._load()
            if len(files) > COMPACT_AT:
                self._compact(files)

    def _load(self) -> list[Path]:
        """Read this model's rows of every readable file; the files read."""
        # Parquet skips a row group whose statistics rule the model out, unread.
        rows = None if self.model is None else [("model", "=", self.model)]
        loaded = []
        for path in sorted(self.folder.glob("*.parquet")):
            try:
                table = pq.read_table(path, filters=rows)
            except (pa.ArrowInvalid, OSError) as error:
                log.warning("skipping unreadable cache file %s: %s", path, error)
                continue
            for row in table.to_pylist():
                self.records[row["key"]] = row
            loaded.append(path)
        return loaded

    def _compact(self, files: list[Path]) -> None:
        """Fold ``files`` into one, every model's rows (read here, not kept)."""
        tables = [pq.read_table(path) for path in files]
        self._replace(files, pa.concat_tables(tables).to_pylist())

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

    def _write(self, rows: list[dict], path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        pq.write_table(pa.Table.from_pylist(rows, contracts.LLM_CACHE), tmp)
        os.replace(tmp, path)

    def _replace(self, files: list[Path], rows: list[dict]) -> None:
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
