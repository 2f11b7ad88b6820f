"""ingest: a dataset folder in BEIR or PosIR layout -> corpus, queries and qrels Parquet, plus
statistics.

BEIR layout (``corpus.jsonl[.gz]``, ``queries.jsonl[.gz]``, ``qrels/<split>.tsv``) is read as a
stream (a corpus never sits in memory as JSON) and checked line by line; a problem is reported
with its file, line and field.

PosIR layout (``corpus.parquet``, ``queries.parquet``, ``qrels/<split>.parquet``, the tables
PosIR's eval.py reads) is read in bounded batches; a problem is reported with its file, row
(counted from 0, as pandas and polars number a table's rows) and column. Its columns:
- corpus ``_id``, ``text``. The title is left empty (a ``title`` column is not read): PosIR
  embeds ``text`` alone, and its spans count characters of ``text``.
- queries ``_id``, ``text``, ``pos_char_span`` and, when present, ``pos_char_length`` and
  ``pos_token_length``. ``pos_char_span`` is one pair [start, end]: character offsets, end
  exclusive as in a Python slice, of the evidence in the text of the query's relevant document,
  whose length in characters ``pos_char_length`` gives and in tokens ``pos_token_length``.
  PosIR buckets documents by ``pos_token_length``, counted on the English original, so that a
  translated set shares the English one's length buckets: it goes with the span onto the qrels
  row as ``doc_tokens`` (see irflow.core.contracts), and the position analysis buckets by it; and
  ``pos_char_length`` as ``doc_chars``, which positions divide by, as PosIR's do.
- qrels ``query-id``, ``corpus-id``, ``score``.

Spans of the PosIR layout, onto the qrels contract's span_start and span_end:
- a query's span goes to its one relevant judgement (score > 0): PosIR pairs each query with
  one positive document;
- a query with several relevant judgements, or none, has its span counted and left out: which
  document it points into would be a guess (the position analysis uses single-relevant queries
  only), and so is a span whose relevant document is kept though unknown to the corpus;
- a null span, or one whose ends are both negative (PosIR's analysis drops negative positions,
  its mark of evidence it did not locate), leaves the judgement without a span, counted;
- any other span must satisfy 0 <= start <= end and be one pair: a list of several spans is
  refused, as which one places the query would be a guess;
- a span that runs past the end of its document is clipped as PosIR's analysis clips it (its
  centre to at most the document's length, ``pos_char_length`` where given, else the text's):
  it becomes the widest span inside the document with that centre, [start + overrun, length]
  ([length, length] once the centre lies past the end), so the position analysis finds PosIR's
  relative position. Such spans are counted, with examples, in the log and the statistics
  (``spans.clipped``);
- a ``pos_char_length`` other than the text's (a translation's, whose span counts its
  original) is counted, with examples, in the log and the statistics
  (``spans.length_mismatches``).

Nothing is written unless the whole input is valid, so a bad file never replaces a good earlier
result.
"""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from irflow.core import contracts
from irflow.core.errors import InputError
from irflow.data.rows import (
    ROWS_PER_BATCH,
    Place,
    read_jsonl,
    read_parquet_rows,
    string_fields,
    text_lines,
)

log = logging.getLogger(__name__)
EXAMPLES = 10


class _UniqueIds:
    def __init__(self, place: Place):
        self.place = place
        self.first: dict[str, int] = {}

    def add(self, identifier: str, at: int) -> None:
        earlier = self.first.setdefault(identifier, at)
        if earlier != at:
            raise self.place.error(
                at,
                f"duplicate id {identifier!r} (first on {self.place.unit} {earlier})",
                "_id",
            )


def _grade(value) -> int | None:
    """An integer relevance grade from a number or its text ("2", "2.0"); None if not one."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


@dataclass
class QrelsReport:
    rows: int = 0
    unknown_documents: int = 0
    unknown_queries: int = 0
    dropped: int = 0
    relevance_levels: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)


class _Judgements:
    """The judgements of one qrels file: a repeated (query, document) pair is refused, and
    ``unknown`` says what a row naming a missing document or query does: ``keep`` (count and
    report it), ``drop`` or ``error``."""

    def __init__(self, place: Place, doc_ids, query_ids, unknown: str):
        self.place, self.doc_ids, self.query_ids, self.unknown = place, doc_ids, query_ids, unknown
        self.rows: list[dict] = []
        self.report = QrelsReport()
        self.first: dict[tuple[str, str], int] = {}

    def add(self, at: int, query_id: str, doc_id: str, relevance: int, span=(None, None)) -> None:
        earlier = self.first.setdefault((query_id, doc_id), at)
        if earlier != at:
            raise self.place.error(
                at,
                f"duplicate judgement of {doc_id!r} for query {query_id!r} "
                f"(first on {self.place.unit} {earlier})",
            )
        missing = [
            f"{kind} {value!r}"
            for kind, value, known in (
                ("document", doc_id, self.doc_ids),
                ("query", query_id, self.query_ids),
            )
            if value not in known
        ]
        report = self.report
        if missing:
            report.unknown_documents += doc_id not in self.doc_ids
            report.unknown_queries += query_id not in self.query_ids
            if self.unknown == "error":
                raise self.place.error(at, f"names unknown {' and '.join(missing)}")
            if len(report.examples) < EXAMPLES:
                report.examples.append(f"{self.place.unit} {at}: {' and '.join(missing)}")
            if self.unknown == "drop":
                report.dropped += 1
                return
        report.rows += 1
        report.relevance_levels[relevance] += 1
        self.rows.append(
            {
                "query_id": query_id,
                "doc_id": doc_id,
                "relevance": relevance,
                "span_start": span[0],
                "span_end": span[1],
            }
        )


def read_qrels(path: Path, doc_ids, query_ids, unknown: str) -> tuple[list[dict], QrelsReport]:
    """Parse a BEIR qrels TSV (header ``query-id corpus-id score``, optionally two more columns
    with the span); ``unknown`` as in ``_Judgements``."""
    judgements = _Judgements(Place(path, "line"), doc_ids, query_ids, unknown)
    for number, text in text_lines(path):
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
        relevance = _grade(score)
        if relevance is None:
            raise InputError(path, f"not an integer grade: {score!r}", line=number, field="score")
        judgements.add(number, query_id, doc_id, relevance, _span(cells, path, number))
    return judgements.rows, judgements.report


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


# --- PosIR layout ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _QuerySpan:
    row: int  # of the query in queries.parquet
    start: int
    end: int
    document_chars: int | None  # pos_char_length
    document_tokens: int | None  # pos_token_length


def _posir_span(record: dict, place: Place, row: int) -> tuple[int, int] | None:
    """The query's [start, end], or None when it has none (null, or both ends negative)."""
    value = record["pos_char_span"]
    if value is None:
        return None
    if isinstance(value, list) and value and all(isinstance(end, list) for end in value):
        raise place.error(
            row, f"a list of spans {value!r}; expected one pair [start, end]", "pos_char_span"
        )
    ends = [_grade(end) for end in value] if isinstance(value, list) else []
    if len(ends) != 2 or None in ends:
        raise place.error(
            row, f"expected integer offsets [start, end], got {value!r}", "pos_char_span"
        )
    start, end = ends
    if start < 0 and end < 0:
        return None
    if not 0 <= start <= end:
        raise place.error(row, f"invalid span {start}..{end}", "pos_char_span")
    return start, end


def _posir_corpus(path: Path) -> Iterator[tuple[int, dict]]:
    place = Place(path, "row")
    for row, record in read_parquet_rows(path, {"_id": True, "text": True}):
        values = string_fields(record, {"_id": True, "text": True}, place, row)
        yield row, values | {"title": ""}


def _posir_queries(
    path: Path, spans: dict[str, _QuerySpan], counts: Counter
) -> Iterator[tuple[int, dict]]:
    """The queries of queries.parquet; each query's span goes into ``spans``."""
    place = Place(path, "row")
    columns = {
        "_id": True,
        "text": True,
        "pos_char_span": True,
        "pos_char_length": False,
        "pos_token_length": False,
    }
    for row, record in read_parquet_rows(path, columns):
        values = string_fields(record, {"_id": True, "text": True}, place, row)
        span = _posir_span(record, place, row)
        if span is None:
            counts["missing" if record["pos_char_span"] is None else "not_located"] += 1
        else:
            spans[values["_id"]] = _QuerySpan(
                row,
                *span,
                _length(record, "pos_char_length", place, row),
                _length(record, "pos_token_length", place, row),
            )
        yield row, values


def _length(record: dict, column: str, place: Place, row: int) -> int | None:
    """A document length (pos_char_length, pos_token_length), when the table has the column and
    the row gives it."""
    value = record.get(column)
    if value is None:
        return None
    length = _grade(value)
    if length is None or length < 0:
        raise place.error(row, f"expected a count, got {value!r}", column)
    return length


def _read_posir_qrels(path: Path, doc_ids, query_ids, unknown: str) -> _Judgements:
    place = Place(path, "row")
    judgements = _Judgements(place, doc_ids, query_ids, unknown)
    columns = {"query-id": True, "corpus-id": True, "score": True}
    for row, record in read_parquet_rows(path, columns):
        ids = string_fields(record, {"query-id": True, "corpus-id": True}, place, row)
        relevance = _grade(record["score"])
        if relevance is None:
            raise place.error(row, f"not an integer grade: {record['score']!r}", "score")
        judgements.add(row, ids["query-id"], ids["corpus-id"], relevance)
    return judgements


def _attach_spans(
    qrels: list[dict],
    spans: dict[str, _QuerySpan],
    document_chars: dict[str, int],
    counts: Counter,
) -> tuple[list[str], list[str]]:
    """Put each query's span, and its document's pos_token_length and pos_char_length, on its
    one relevant judgement (see the module docstring); returns examples of spans clipped at the
    end of their document and of a pos_char_length other than the text's length."""
    relevant: dict[str, list[dict]] = {}
    for row in qrels:
        if row["relevance"] > 0:
            relevant.setdefault(row["query_id"], []).append(row)
    clipped, mismatches = [], []
    for query_id, span in spans.items():
        judged = relevant.get(query_id, [])
        if len(judged) != 1:
            counts["several_relevant" if judged else "no_relevant"] += 1
            continue
        (judgement,) = judged
        chars = document_chars.get(judgement["doc_id"])
        if chars is None:
            counts["unknown_document"] += 1
            continue
        length = chars if span.document_chars is None else span.document_chars  # total_length
        start, end = span.start, span.end
        if end > length:
            # PosIR clips the centre to the length; this span inside the length has that centre.
            start, end = min(start + end - length, length), length
            counts["clipped"] += 1
            if len(clipped) < EXAMPLES:
                clipped.append(
                    f"row {span.row}: query {query_id!r}: {span.start}..{span.end} in document "
                    f"{judgement['doc_id']!r} of {length} characters -> {start}..{end}"
                )
        if span.document_chars is not None and span.document_chars != chars:
            counts["length_mismatches"] += 1
            if len(mismatches) < EXAMPLES:
                mismatches.append(
                    f"query {query_id!r}: {span.document_chars} for document "
                    f"{judgement['doc_id']!r} of {chars}"
                )
        judgement["span_start"], judgement["span_end"] = start, end
        judgement["doc_tokens"] = span.document_tokens
        judgement["doc_chars"] = span.document_chars
        counts["attached"] += 1
    return clipped, mismatches


# --- both layouts ---------------------------------------------------------------------------


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
    layout: str = "beir",
) -> dict:
    """Convert the files of a dataset in ``layout`` (``beir`` or ``posir``, as
    irflow.data.layouts.dataset_layout names it) to ``corpus``, ``queries`` and ``qrels`` Parquet
    in ``out_dir``.

    Returns the dataset statistics (also written by the caller as JSON).
    """
    unit = {"beir": "line", "posir": "row"}[layout]
    document_chars: dict[str, int] = {}
    doc_ids = _UniqueIds(Place(corpus_path, unit))
    query_ids = _UniqueIds(Place(queries_path, unit))
    words = Counter()
    spans: dict[str, _QuerySpan] = {}
    span_counts = Counter()
    clipped: list[str] = []
    mismatches: list[str] = []
    if layout == "beir":
        corpus_records = read_jsonl(corpus_path, {"_id": True, "title": False, "text": True})
        query_records = read_jsonl(queries_path, {"_id": True, "text": True})
    else:
        corpus_records = _posir_corpus(corpus_path)
        query_records = _posir_queries(queries_path, spans, span_counts)

    def corpus_rows():
        for at, record in corpus_records:
            doc_ids.add(record["_id"], at)
            document_chars[record["_id"]] = len(record["text"])
            words["docs"] += len(record["title"].split()) + len(record["text"].split())
            yield {"doc_id": record["_id"], "title": record["title"], "text": record["text"]}

    def query_rows():
        for at, record in query_records:
            query_ids.add(record["_id"], at)
            if not record["text"].strip():
                raise query_ids.place.error(at, "empty query text", "text")
            words["queries"] += len(record["text"].split())
            yield {"query_id": record["_id"], "text": record["text"]}

    # All three tables are staged and only moved into place once every input is valid.
    staging = out_dir / ".staging"
    try:
        num_docs = contracts.write_rows(
            corpus_rows(), contracts.CORPUS, staging / "corpus.parquet", ROWS_PER_BATCH
        )
        num_queries = contracts.write_rows(
            query_rows(), contracts.QUERIES, staging / "queries.parquet", ROWS_PER_BATCH
        )
        if layout == "beir":
            qrels, report = read_qrels(qrels_path, document_chars, query_ids.first, unknown_qrels)
        else:
            judgements = _read_posir_qrels(
                qrels_path, document_chars, query_ids.first, unknown_qrels
            )
            qrels, report = judgements.rows, judgements.report
            clipped, mismatches = _attach_spans(qrels, spans, document_chars, span_counts)
        if not qrels:
            raise InputError(qrels_path, "no judgements")
        schema = contracts.QRELS if layout == "beir" else contracts.QRELS_POSIR
        contracts.write_table(pa.Table.from_pylist(qrels, schema), staging / "qrels.parquet")
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
    stats = {
        "layout": layout,
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
    if layout == "posir":
        stats["spans"] = _span_stats(span_counts, queries_path, clipped, mismatches)
    return stats


def _span_stats(
    counts: Counter, queries_path: Path, clipped: list[str], mismatches: list[str]
) -> dict:
    """How many queries' spans reached the qrels, how many were clipped, and why the others did
    not; warns of those it had to clip or leave out."""
    left_out = {
        key: counts[key]
        for key in ("missing", "not_located", "no_relevant", "several_relevant", "unknown_document")
    }
    if counts["several_relevant"] or counts["no_relevant"] or counts["unknown_document"]:
        log.warning(
            "%s: %d spans left out, their query having several relevant judgements, %d none, "
            "%d a relevant document unknown to the corpus",
            queries_path,
            counts["several_relevant"],
            counts["no_relevant"],
            counts["unknown_document"],
        )
    if clipped:
        log.warning(
            "%s: %d spans run past the end of their document's text and were clipped, as "
            "PosIR clips them (their centre to the end): %s",
            queries_path,
            counts["clipped"],
            "; ".join(clipped),
        )
    if mismatches:
        log.warning(
            "%s: pos_char_length differs from the document's text length in characters for %d "
            "queries; their spans count another string (a translation's original, say), and "
            "their positions divide by pos_char_length, as PosIR's analysis does: %s",
            queries_path,
            counts["length_mismatches"],
            "; ".join(mismatches),
        )
    return {
        "attached": counts["attached"],
        "clipped": counts["clipped"],
        "clipped_examples": clipped,
        "left_out": left_out,
        "length_mismatches": counts["length_mismatches"],
        "length_mismatch_examples": mismatches,
    }
