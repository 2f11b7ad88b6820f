"""parts: the resumable encoding of a table, one finished part at a time.

A table is encoded in chunks; each chunk is written as its own Parquet part as soon as it is
done, so memory stays bounded and a killed job resumes from the last finished chunk. A part is
named by the rows it holds (``part-<start>-<end>.parquet``), not by its chunk number, so a job
resumed with another ``chunk_size`` encodes exactly the rows no part holds yet. The parts sit in
``<output>.parts/`` with the cache key that produced them; a different key discards them rather
than mixing results.

One job at a time holds the folder (``owned_parts``): a job can outlive its Snakemake (kill -9
of Snakemake alone), and the rerun after ``--unlock`` then starts a second job on the same
output. It waits for the first, instead of gathering only the parts it wrote after the first
removed the rest. The result is kept beside the output (``<output>.last/``, a hard link) with
its key: an upstream job that reruns without changing the table (an edit of the qrels reruns
ingest and filter, which write the same corpus again) then costs no encoding.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from irflow.core import atomic, contracts, locks
from irflow.core.atomic import atomic_path
from irflow.core.progress import LoggedProgress, counting_batches

log = logging.getLogger(__name__)


@contextmanager
def owned_parts(
    out_path: Path, key: str, first: int = 0, *, keep_result: bool = True
) -> Iterator[Path]:
    """The parts folder of ``out_path``, held by this job alone (``irflow.core.locks``: a live
    holder makes it wait) and holding only parts made with ``key``; removed once the block
    succeeds. Only its holder discards or removes parts, so no job loses parts that another is
    gathering.

    With ``keep_result``, the file the block wrote at ``out_path`` (rows ``first`` on) is kept
    as the last result, a hard link beside it; a later job with the same key (same input bytes,
    same settings) starts from it as one finished part instead of encoding again."""
    parts = out_path.with_name(out_path.name + ".parts")
    last = out_path.with_name(out_path.name + ".last")
    with locks.holding(parts):
        prepare_parts(parts, key)
        if keep_result:
            _resume_from_last(last, parts, key, first)
        yield parts
        if keep_result:
            _keep_as_last(out_path, last, key)
        shutil.rmtree(parts)


def _resume_from_last(last: Path, parts: Path, key: str, first: int) -> None:
    result, key_file = last / "result.parquet", last / "key.json"
    if not (result.exists() and key_file.exists() and json.loads(key_file.read_text()) == key):
        return
    rows = contracts.read_metadata(result).num_rows
    part = parts / f"part-{first:012d}-{first + rows:012d}.parquet"
    if not part.exists():
        os.link(result, part)
    log.info("%s holds the %d rows of the same input, made with the same settings", last, rows)


def _keep_as_last(out_path: Path, last: Path, key: str) -> None:
    """A hard link, not a copy: it takes no space while ``out_path`` exists. Snakemake deletes
    an output before its job reruns; the link keeps its rows for that job."""
    try:
        with atomic_path(last) as tmp:
            tmp.mkdir()
            os.link(out_path, tmp / "result.parquet")
            (tmp / "key.json").write_text(json.dumps(key))
    except OSError as error:  # a file system without hard links: nothing kept
        log.info("the result is not kept for a rerun (%s)", error)


def prepare_parts(parts: Path, key: str) -> None:
    key_file = parts / "key.json"
    if parts.exists() and (not key_file.exists() or json.loads(key_file.read_text()) != key):
        log.info("discarding partial embeddings in %s: made with other settings", parts)
        shutil.rmtree(parts)
    parts.mkdir(parents=True, exist_ok=True)
    # Atomically: a key torn by a kill would make every later resume fail to read it.
    atomic.write_text(key_file, json.dumps(key))


def batches_between(
    source: contracts.ParquetFile,
    first: int,
    end: int,
    chunk_size: int,
    columns: list[str] | None = None,
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(first row, batch) over rows [first, end) of ``source``, reading only the row groups
    that hold them (and only ``columns``, when given)."""
    groups, group_start, start = [], 0, None
    for group in range(source.metadata.num_row_groups):
        group_end = group_start + source.metadata.row_group(group).num_rows
        if group_end > first and group_start < end:
            groups.append(group)
            start = group_start if start is None else start
        group_start = group_end
    for batch in source.iter_batches(chunk_size, row_groups=groups, columns=columns):
        lo, hi = max(start, first), min(start + batch.num_rows, end)
        if lo < hi:
            yield lo, batch.slice(lo - start, hi - lo)
        start += batch.num_rows


def encode_missing(
    source: contracts.ParquetFile,
    first: int,
    end: int,
    parts: Path,
    chunk_size: int,
    desc: str,
    *,
    encode_part: Callable[[pa.RecordBatch, int, int, Path], None],
    model=None,
) -> int:
    """Call ``encode_part(rows, start, end, path)`` for each run of rows in [first, end) that
    no finished part in ``parts`` holds, a chunk at a time; returns the rows encoded. Its
    progress (rows, rate, time left) is logged as it goes (irflow.core.progress): by each batch
    ``model`` (a torch module, when given) runs forward, else by each chunk."""
    finished = [(part_start, part_end) for part_start, part_end, _ in finished_parts(parts)]
    done = sum(
        max(0, min(done_end, end) - max(done_start, first)) for done_start, done_end in finished
    )
    encoded_rows = 0
    with (
        LoggedProgress(desc=desc, total=end - first, initial=done, unit="rows") as progress,
        counting_batches(model, progress),
    ):
        for start, batch in batches_between(source, first, end, chunk_size):
            for missing_start, missing_end in _missing_ranges(
                start, start + batch.num_rows, finished
            ):
                rows = batch.slice(missing_start - start, missing_end - missing_start)
                part = parts / f"part-{missing_start:012d}-{missing_end:012d}.parquet"
                counted = progress.n
                encode_part(rows, missing_start, missing_end, part)
                encoded_rows += rows.num_rows
                # The rows the model's batches did not count: reused vectors, or all of them.
                if uncounted := rows.num_rows - (progress.n - counted):
                    progress.update(uncounted)
    return encoded_rows


def finished_parts(parts: Path) -> list[tuple[int, int, Path]]:
    """(first row, end row, path) of each finished part, in row order."""
    found = []
    for path in parts.glob("part-*.parquet"):
        start, end = path.stem.split("-")[1:]
        found.append((int(start), int(end), path))
    return sorted(found)


def _missing_ranges(start: int, end: int, finished: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The row ranges within [start, end) that no finished (start, end) range holds."""
    missing, cursor = [], start
    for done_start, done_end in finished:
        if done_end <= cursor or done_start >= end:
            continue
        if done_start > cursor:
            missing.append((cursor, done_start))
        cursor = max(cursor, done_end)
    if cursor < end:
        missing.append((cursor, end))
    return missing
