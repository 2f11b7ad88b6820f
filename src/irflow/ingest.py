"""ingest: a BEIR-layout folder -> corpus, queries and qrels Parquet, plus statistics.

Input is read as a stream (a corpus never sits in memory as JSON), checked line by line, and
every problem is reported with its file, line and field. Nothing is written unless the whole
input is valid, so a bad file never replaces a good earlier result.
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from irflow import contracts
from irflow.errors import InputError

log = logging.getLogger(__name__)
ROWS_PER_BATCH = 50_000


def _lines(path: Path) -> Iterator[tuple[int, str]]:
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


def _string_field(record: dict, key: str, path: Path, line: int, required: bool) -> str:
    value = record.get(key)
    if value is None:
        if required:
            raise InputError(path, "missing", line=line, field=key)
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(
            path, f"expected a string, got {type(value).__name__}", line=line, field=key
        )
    return str(value)


def read_jsonl(path: Path, fields: dict[str, bool]) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield (line number, {field: string}) for each non-blank line.

    ``fields`` maps each field to whether it is required; ``_id`` must be non-empty.
    """
    for number, text in _lines(path):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise InputError(path, f"malformed JSON: {error.msg}", line=number) from None
        if not isinstance(record, dict):
            raise InputError(path, "expected a JSON object", line=number)
        values = {key: _string_field(record, key, path, number, req) for key, req in fields.items()}
        if not values["_id"].strip():
            raise InputError(path, "empty id", line=number, field="_id")
        yield number, values


class _UniqueIds:
    def __init__(self, path: Path):
        self.path = path
        self.first_line: dict[str, int] = {}

    def add(self, identifier: str, line: int) -> None:
        earlier = self.first_line.setdefault(identifier, line)
        if earlier != line:
            raise InputError(
                self.path,
                f"duplicate id {identifier!r} (first on line {earlier})",
                line=line,
                field="_id",
            )


def _write_batches(rows: Iterator[dict], schema: pa.Schema, path: Path) -> int:
    """Stream rows into a Parquet file in bounded batches; the file appears atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    count = 0
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            batch: list[dict] = []
            for row in rows:
                batch.append(row)
                if len(batch) == ROWS_PER_BATCH:
                    writer.write_table(pa.Table.from_pylist(batch, schema))
                    count += len(batch)
                    batch = []
            writer.write_table(pa.Table.from_pylist(batch, schema))
            count += len(batch)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)
    return count


@dataclass
class QrelsReport:
    rows: int = 0
    unknown_documents: int = 0
    unknown_queries: int = 0
    dropped: int = 0
    relevance_levels: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)


def read_qrels(
    path: Path, doc_ids: set[str], query_ids: set[str], unknown: str
) -> tuple[list[dict], QrelsReport]:
    """Parse a BEIR qrels TSV (header ``query-id corpus-id score``).

    ``unknown`` says what a row naming a missing document or query does: ``keep`` (count and
    report it), ``drop`` or ``error``.
    """
    report = QrelsReport()
    rows: list[dict] = []
    seen: dict[tuple[str, str], int] = {}
    for number, text in _lines(path):
        cells = text.rstrip("\r\n").split("\t")
        if not text.strip():
            continue
        if number == 1 and cells[0].strip().lower() in ("query-id", "query_id", "qid"):
            continue
        if len(cells) not in (3, 5):
            raise InputError(
                path, f"expected 3 tab-separated columns, found {len(cells)}", line=number
            )
        query_id, doc_id, score = (cell.strip() for cell in cells[:3])
        for name, value in (("query-id", query_id), ("corpus-id", doc_id)):
            if not value:
                raise InputError(path, "empty", line=number, field=name)
        try:
            relevance = int(float(score)) if float(score).is_integer() else None
        except ValueError:
            relevance = None
        if relevance is None:
            raise InputError(path, f"not an integer grade: {score!r}", line=number, field="score")
        span = _span(cells, path, number)
        key = (query_id, doc_id)
        if key in seen:
            raise InputError(
                path,
                f"duplicate judgement of {doc_id!r} for query {query_id!r} "
                f"(first on line {seen[key]})",
                line=number,
            )
        seen[key] = number
        missing = [
            f"{kind} {value!r}"
            for kind, value, known in (
                ("document", doc_id, doc_ids),
                ("query", query_id, query_ids),
            )
            if value not in known
        ]
        if missing:
            report.unknown_documents += doc_id not in doc_ids
            report.unknown_queries += query_id not in query_ids
            if unknown == "error":
                raise InputError(path, f"names unknown {' and '.join(missing)}", line=number)
            if len(report.examples) < 10:
                report.examples.append(f"line {number}: {' and '.join(missing)}")
            if unknown == "drop":
                report.dropped += 1
                continue
        report.rows += 1
        report.relevance_levels[relevance] += 1
        rows.append(
            {
                "query_id": query_id,
                "doc_id": doc_id,
                "relevance": relevance,
                "span_start": span[0],
                "span_end": span[1],
            }
        )
    return rows, report


def _span(cells: list[str], path: Path, line: int) -> tuple[int | None, int | None]:
    """Optional 4th/5th columns: character offsets of the relevant span in the document."""
    if len(cells) == 3:
        return None, None
    try:
        start, end = int(cells[3]), int(cells[4])
    except ValueError:
        raise InputError(path, "span offsets must be integers", line=line, field="span") from None
    if not 0 <= start <= end:
        raise InputError(path, f"invalid span {start}..{end}", line=line, field="span")
    return start, end


def _unknown_qrels_outcome(report: QrelsReport, policy: str) -> str:
    """What scoring does with the unknown qrels rows, for the warning."""
    if policy == "drop":
        return "dropped"
    outcomes = []
    if report.unknown_documents:
        outcomes.append(
            "an unknown document stays a judgement no run can retrieve: its query is still "
            "scored, but if the document is relevant the query's recall cannot reach 1"
        )
    if report.unknown_queries:
        outcomes.append("an unknown query is never retrieved for, so it scores 0 for every system")
    return "kept; " + "; ".join(outcomes)


def ingest(
    corpus_path: Path,
    queries_path: Path,
    qrels_path: Path,
    out_dir: Path,
    unknown_qrels: str = "keep",
) -> dict:
    """Convert BEIR files to ``corpus``, ``queries`` and ``qrels`` Parquet in ``out_dir``.

    Returns the dataset statistics (also written by the caller as JSON).
    """

    doc_ids = _UniqueIds(corpus_path)
    words = Counter()

    def corpus_rows():
        for line, record in read_jsonl(corpus_path, {"_id": True, "title": False, "text": True}):
            doc_ids.add(record["_id"], line)
            words["docs"] += len(record["title"].split()) + len(record["text"].split())
            yield {"doc_id": record["_id"], "title": record["title"], "text": record["text"]}

    query_ids = _UniqueIds(queries_path)

    def query_rows():
        for line, record in read_jsonl(queries_path, {"_id": True, "text": True}):
            query_ids.add(record["_id"], line)
            if not record["text"].strip():
                raise InputError(queries_path, "empty query text", line=line, field="text")
            words["queries"] += len(record["text"].split())
            yield {"query_id": record["_id"], "text": record["text"]}

    # All three tables are staged and only moved into place once every input is valid.
    staging = out_dir / ".staging"
    try:
        num_docs = _write_batches(corpus_rows(), contracts.CORPUS, staging / "corpus.parquet")
        num_queries = _write_batches(query_rows(), contracts.QUERIES, staging / "queries.parquet")
        qrels, report = read_qrels(
            qrels_path, set(doc_ids.first_line), set(query_ids.first_line), unknown_qrels
        )
        if not qrels:
            raise InputError(qrels_path, "no judgements")
        contracts.write_table(
            pa.Table.from_pylist(qrels, contracts.QRELS), staging / "qrels.parquet"
        )
        for name in ("corpus", "queries", "qrels"):
            (staging / f"{name}.parquet").replace(out_dir / f"{name}.parquet")
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    if report.unknown_documents or report.unknown_queries:
        log.warning(
            "%s: %d qrels rows name unknown documents, %d unknown queries (%s): %s",
            qrels_path,
            report.unknown_documents,
            report.unknown_queries,
            _unknown_qrels_outcome(report, unknown_qrels),
            "; ".join(report.examples),
        )
    judged_queries = {row["query_id"] for row in qrels}
    return {
        "documents": num_docs,
        "queries": num_queries,
        "qrels_rows": report.rows,
        "judged_queries": len(judged_queries),
        "relevance_levels": {str(k): v for k, v in sorted(report.relevance_levels.items())},
        "unknown_qrels": {
            "policy": unknown_qrels,
            "unknown_documents": report.unknown_documents,
            "unknown_queries": report.unknown_queries,
            "dropped_rows": report.dropped,
            "examples": report.examples,
        },
        "mean_document_words": words["docs"] / max(num_docs, 1),
        "mean_query_words": words["queries"] / max(num_queries, 1),
    }
