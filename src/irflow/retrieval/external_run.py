"""external_run: a run made outside irflow (Pyserini, Anserini, Vespa, Elastic, an in-house
system) as a system: a TREC run file or a Parquet run, from a path or a URL, checked and
written to the ``run`` contract, so it is scored, tested and reported with the rest.

A TREC run line is ``query_id Q0 doc_id rank score tag``, fields split on ASCII whitespace
as trec_eval splits them. The file is checked strictly, and each problem is one error naming
the file, the line and the field:
- a line without exactly six fields (a missing column);
- a score or a rank that is not a decimal number (``1``, ``1.0``, ``-0.5``, ``2.1e-3``; not
  ``nan``, ``inf``, ``1,5``, a word, or a score that overflows to infinity);
- a (query, doc) pair listed twice (the error names both lines): pytrec_eval would keep one of
  them and irflow's own measures would count both. The check covers the rows that can still
  be scored: a pair whose first listing was already cut below its query's top_k is not
  remembered (that is what bounds memory), and its other listing is then read as the only one;
- a line longer than ``MAX_LINE_BYTES`` (1 MiB), refused as soon as it is read;
- bytes that are not UTF-8.
Accepted, and counted in the log and manifest: a leading UTF-8 byte-order mark, CRLF line
ends, blank lines.

The Q0 and tag fields are not read, nor is the rank beyond its check. trec_eval's
get_trec_results.c: "The other fields are ignored ... In particular, note that the rank field
is ignored here; internally ranks are assigned by sorting by the sim field". It breaks ties by
doc id descending, and so does the run written here (``runs.trec_order``).

A Parquet run needs the columns ``query_id`` and ``doc_id`` (strings, or integers, which are
cast to strings and reported as cast) and ``score`` (a number type), without nulls; other
columns (``rank``) are not read; a problem names the row (from 0).

Queries of the dataset without judgements in the split (in its whole queries table, not among
the queries scored) are dropped and counted apart: trec_eval evaluates only the queries its
qrels judge, and a run over every query of BEIR's ``queries.jsonl`` lists them all. Ids the
dataset lacks (a query in no queries table of it, a document not in its filtered corpus) are
counted, reported with examples, and their rows dropped: a run over an unfiltered corpus names
the documents the filter removed, which no system here can retrieve. Past
``max_unknown_fraction`` of the rows read the run is refused: it is then a run of another
dataset or corpus version. Self-matches are removed where the dataset asks for it, and each
query is cut to ``top_k`` in trec_eval's order, as irflow's own retrievers are.

The file is streamed, gunzipped as it is read: a block of lines (or a batch of Parquet rows)
at a time, checked, its rows of known, judged queries kept, and each query's top_k kept as it
goes (``_TopK``), so memory follows top_k x the judged queries, not the file (read whole, a
2 M-line run took 11 times its 73 MiB: benchmarks/README.md, "External run memory"). The
unknown ids are held, to count them.
"""

from __future__ import annotations

import codecs
import gzip
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from irflow.core import contracts
from irflow.core.errors import DamagedFileError, DownloadError, InputError
from irflow.core.fingerprint import file_md5
from irflow.core.redaction import public_url
from irflow.data.download_cache import cached_file_name
from irflow.retrieval.runs import short_queries, trec_order

log = logging.getLogger(__name__)

TREC_FIELDS = ("query_id", "Q0", "doc_id", "rank", "score", "tag")
# The file is read BLOCK_BYTES (a TREC file) or PARQUET_BATCH_ROWS (a Parquet run) at a time,
# and the rows kept are cut to top_k a query once CUT_ROWS or more wait (see _TopK).
BLOCK_BYTES = 4 * 2**20
PARQUET_BATCH_ROWS = 250_000
CUT_ROWS = 250_000
# A TREC line is two ids and three short fields; a longer line is refused as soon as it is
# read, so that one endless line (a gzip bomb's) is never held.
MAX_LINE_BYTES = 2**20
TOO_LONG = f"a line longer than {MAX_LINE_BYTES} bytes; a run line is ids and numbers"
# trec_eval's order of a query's documents (see the module docstring).
TREC_ORDER = [("query_id", "ascending"), ("score", "descending"), ("doc_id", "descending")]
# How much of a bad line an error shows.
SHOWN_CHARACTERS = 200
# A decimal number as trec_eval's runs hold it; Arrow's cast alone would take "nan" and "inf".
_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
EXAMPLES = 10


def run_location(pattern: str, dataset: str) -> str:
    """The run file of ``dataset``: ``pattern`` with ``{dataset}`` replaced."""
    return pattern.replace("{dataset}", dataset)


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def locate_run(
    location: str, cache_dir: Path, md5: str | None = None, offline: bool = False
) -> Path:
    """A local run file: ``location`` itself, or the URL's file downloaded into ``cache_dir``
    (resumed, retried and verified against ``md5`` by irflow.data.download)."""
    if not is_url(location):
        path = Path(location).expanduser()
        if not path.is_file():
            raise InputError(path, "run file not found")
        if md5 is not None and (actual := file_md5(path)) != md5:
            raise InputError(path, f"checksum mismatch: expected md5 {md5}, got {actual}")
        return path
    # Named by a digest of the whole URL: another URL is another file, never resumed into it.
    dest = cache_dir / cached_file_name(location, fallback="run.trec")
    if offline and not dest.is_file():
        raise DownloadError(
            f"run {public_url(location)} is not available offline: place the file at {dest}"
        )
    from irflow.data.fetch import fetch_url  # here: httpx (0.1 s), and dry runs import this

    return fetch_url(location, dest, md5=md5)


def recorded_settings(settings: dict) -> dict:
    """The external_run settings as the log, manifest and run's lineage record them: a URL
    without its userinfo and query string, which can hold a token (irflow.core.redaction)."""
    location = settings["location"]
    return settings | {"location": public_url(location) if is_url(location) else location}


def _line_blocks(path: Path, accepted: dict) -> Iterator[tuple[str, int]]:
    """The file's text (gunzipped for ``.gz``) in blocks of whole lines, each with the number
    of its first line, without a leading BOM (``accepted["bom"]`` says whether it had one).
    A block at a time, so that neither a large file nor what a small ``.gz`` unpacks to is
    ever held whole; a line longer than ``MAX_LINE_BYTES`` is refused as soon as it is."""
    opener = gzip.open if path.suffix == ".gz" else open
    first_line = 1
    try:
        with opener(path, "rb") as handle:
            carry = handle.read(len(codecs.BOM_UTF8))
            accepted["bom"] = carry == codecs.BOM_UTF8
            carry = b"" if accepted["bom"] else carry
            while True:
                block = handle.read(BLOCK_BYTES)
                data = carry + block
                end = data.rfind(b"\n") + 1 if block else len(data)
                whole, carry = data[:end], data[end:]
                lines = whole.count(b"\n")
                if len(carry) > MAX_LINE_BYTES:
                    raise InputError(path, TOO_LONG, line=first_line + lines)
                if whole:
                    yield _decoded(path, whole, first_line), first_line
                if not block:
                    return
                first_line += lines
    except (OSError, EOFError) as error:
        raise InputError(path, f"cannot be read: {error}") from None


def _decoded(path: Path, data: bytes, first_line: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = first_line + data.count(b"\n", 0, error.start)
        raise InputError(path, "not valid UTF-8", line=line) from None


def _first(mask: pa.Array) -> int | None:
    """The index of the first true value of ``mask``, or None."""
    hits = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    return int(hits[0]) if len(hits) else None


def read_trec(path: Path, accepted: dict) -> Iterator[pa.Table]:
    """query_id, doc_id, score and the line each came from, as the file lists them, a block
    of lines at a time; ``accepted`` counts what was accepted on the way (BOM, CRLF line ends,
    blank lines)."""
    accepted |= {"bom": False, "crlf_lines": 0, "blank_lines": 0}
    for text, first_line in _line_blocks(path, accepted):
        yield _trec_rows(path, text, first_line, accepted)


def _trec_rows(path: Path, text: str, first_line: int, accepted: dict) -> pa.Table:
    lines = pc.split_pattern(pa.array([text], pa.large_string()), "\n").flatten()
    if len(lines) and lines[-1].as_py() == "":  # the newline that ends the last line
        lines = lines.slice(0, len(lines) - 1)
    if (at := _first(pc.greater(pc.binary_length(lines), MAX_LINE_BYTES))) is not None:
        raise InputError(path, TOO_LONG, line=first_line + at)
    accepted["crlf_lines"] += int(pc.sum(pc.ends_with(lines, "\r")).as_py() or 0)
    trimmed = pc.ascii_trim_whitespace(lines)
    blank = pc.equal(trimmed, "")
    accepted["blank_lines"] += int(pc.sum(blank).as_py() or 0)
    fields = pc.ascii_split_whitespace(trimmed)
    counts = pc.list_value_length(fields)
    wrong = pc.and_(pc.not_equal(counts, len(TREC_FIELDS)), pc.invert(blank))
    if (at := _first(wrong)) is not None:
        raise InputError(
            path,
            f"expected {len(TREC_FIELDS)} whitespace-separated fields "
            f"({' '.join(TREC_FIELDS)}), found {counts[at].as_py()}: "
            f"{lines[at].as_py()[:SHOWN_CHARACTERS]!r}",
            line=first_line + at,
        )
    kept = np.flatnonzero(~blank.to_numpy(zero_copy_only=False))
    fields = fields.take(pa.array(kept))
    column = {name: pc.list_element(fields, i) for i, name in enumerate(TREC_FIELDS)}
    line_numbers = pa.array(kept + first_line)
    for name in ("rank", "score"):
        bad = pc.invert(pc.match_substring_regex(column[name], _NUMBER))
        if (at := _first(bad)) is not None:
            raise InputError(
                path,
                f"not a number: {column[name][at].as_py()[:SHOWN_CHARACTERS]!r}",
                line=line_numbers[at].as_py(),
                field=name,
            )
    scores = pc.cast(column["score"], pa.float64())
    if (at := _first(pc.invert(pc.is_finite(scores)))) is not None:
        raise InputError(
            path,
            f"{column['score'][at].as_py()[:SHOWN_CHARACTERS]!r} overflows a float64",
            line=line_numbers[at].as_py(),
            field="score",
        )
    return pa.table(
        {
            "query_id": column["query_id"].cast(pa.string()),
            "doc_id": column["doc_id"].cast(pa.string()),
            "score": scores,
            "at": line_numbers,
        }
    )


def _is_string(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_id(kind: pa.DataType) -> bool:
    return _is_string(kind) or pa.types.is_integer(kind)


def read_parquet_run(path: Path, accepted: dict) -> Iterator[pa.Table]:
    """query_id, doc_id, score and the row (from 0) of each, from a Parquet run, a batch of
    ``PARQUET_BATCH_ROWS`` at a time; ``accepted["ids_cast_to_string"]``: which id columns
    held integers, read as their decimal strings."""
    try:
        file = contracts.ParquetFile(path)
    except DamagedFileError as error:  # the user's own file: to fix, not to rebuild
        raise InputError(path, f"cannot be read as Parquet: {error.problem}") from None
    except (OSError, pa.ArrowException) as error:
        raise InputError(path, f"cannot be read as Parquet: {error}") from None
    schema = file.schema_arrow
    for name, accepts, what in (
        ("query_id", _is_id, "strings or integers"),
        ("doc_id", _is_id, "strings or integers"),
        ("score", lambda t: pa.types.is_floating(t) or pa.types.is_integer(t), "numbers"),
    ):
        if name not in schema.names:
            has = ", ".join(schema.names)
            raise InputError(path, f"missing column (the table has: {has})", field=name)
        if not accepts(kind := schema.field(name).type):
            raise InputError(path, f"expected {what}, the column holds {kind}", field=name)
    ids = ("query_id", "doc_id")
    accepted["ids_cast_to_string"] = [n for n in ids if not _is_string(schema.field(n).type)]
    first_row = 0
    for batch in _parquet_batches(file, path):
        for name in (*ids, "score"):
            if (at := _first(batch.column(name).is_null())) is not None:
                raise InputError(f"{path}, row {first_row + at}", "null", field=name)
        scores = batch.column("score").cast(pa.float64())
        if (at := _first(pc.invert(pc.is_finite(scores)))) is not None:
            where = f"{path}, row {first_row + at}"
            raise InputError(where, f"not finite: {scores[at].as_py()}", field="score")
        yield pa.table(
            {
                "query_id": batch.column("query_id").cast(pa.string()),
                "doc_id": batch.column("doc_id").cast(pa.string()),
                "score": scores,
                "at": pa.array(np.arange(first_row, first_row + batch.num_rows)),
            }
        )
        first_row += batch.num_rows


def _parquet_batches(file: contracts.ParquetFile, path: Path) -> Iterator[pa.RecordBatch]:
    columns = ["query_id", "doc_id", "score"]
    try:
        yield from file.iter_batches(PARQUET_BATCH_ROWS, columns=columns)
    except DamagedFileError as error:  # the user's own file: to fix, not to rebuild
        raise InputError(path, f"cannot be read as Parquet: {error.problem}") from None
    except (OSError, pa.ArrowException) as error:
        raise InputError(path, f"cannot be read as Parquet: {error}") from None


def _check_unique(run: pd.DataFrame, path: Path, unit: str) -> None:
    repeated = run.duplicated(["query_id", "doc_id"])
    if not repeated.any():
        return
    second = run.loc[repeated.idxmax()]
    same = (run["query_id"] == second["query_id"]) & (run["doc_id"] == second["doc_id"])
    first = run.loc[same.idxmax(), "at"]
    message = (
        f"document {second['doc_id']!r} is listed again for query {second['query_id']!r} "
        f"(first on {unit} {first}; {int(repeated.sum())} repeated (query, doc) rows); a run "
        "lists each document at most once per query"
    )
    if unit == "line":
        raise InputError(path, message, line=int(second["at"]))
    raise InputError(f"{path}, row {second['at']}", message)


class _TopK:
    """Each query's ``top_k`` rows in trec_eval's order among the rows offered so far.

    Rows offered wait until there are as many as are kept (at least ``CUT_ROWS``); then all
    are sorted in trec_eval's order (query, score descending, doc id descending; Arrow compares
    strings by their UTF-8 bytes, as trec_eval does) and cut to ``top_k`` a query. The order is
    total, so cutting part of the rows keeps every row that the whole file's cut keeps, ties
    included, and the cost over the file is that of sorting it once or twice. Held, as Arrow
    columns: at most twice top_k a query, plus ``CUT_ROWS`` and a block."""

    def __init__(self, top_k: int, path: Path, unit: str):
        self.top_k, self.path, self.unit = top_k, path, unit
        self.kept: list[pa.Table] = []
        self.waiting: list[pa.Table] = []
        self.kept_rows = self.waiting_rows = self.offered = 0

    def offer(self, rows: pa.Table) -> None:
        self.waiting.append(rows)
        self.waiting_rows += len(rows)
        self.offered += len(rows)
        if self.waiting_rows >= max(CUT_ROWS, self.kept_rows):
            self._cut()

    def _cut(self) -> None:
        pool = pa.concat_tables([*self.kept, *self.waiting]).combine_chunks()
        self.waiting, self.waiting_rows = [], 0
        self._check_unique(pool)
        order = pc.sort_indices(pool, sort_keys=TREC_ORDER)
        queries = pool.column("query_id").take(order).combine_chunks()
        first = np.ones(len(queries), dtype=bool)  # where a query's rows start
        if len(queries) > 1:
            first[1:] = pc.not_equal(queries.slice(1), queries.slice(0, len(queries) - 1))
        starts = np.flatnonzero(first)
        rank = np.arange(len(queries)) - np.repeat(starts, np.diff(np.append(starts, len(first))))
        self.kept = [pool.take(order.filter(pa.array(rank < self.top_k)))]
        self.kept_rows = len(self.kept[0])

    def _check_unique(self, pool: pa.Table) -> None:
        """A (query, doc) pair listed twice in ``pool``, named by its later line: the kept rows
        all come from lines before the waiting ones."""
        pairs = ["query_id", "doc_id"]
        counts = pool.group_by(pairs).aggregate([("at", "count")])
        repeated = counts.filter(pc.greater(counts.column("at_count"), 1))
        if len(repeated):
            rows = pool.join(repeated.select(pairs), pairs, join_type="inner")
            _check_unique(
                rows.to_pandas().sort_values("at", ignore_index=True), self.path, self.unit
            )

    def run(self) -> pd.DataFrame:
        """The run: each query's top_k in trec_eval's order, with its rank."""
        self._cut()
        return trec_order(self.kept[0].drop_columns("at").to_pandas())


class _Tally:
    """What the rows read hold that the dataset does not, counted as they are read."""

    def __init__(self, unit: str):
        self.unit = unit
        self.rows = self.unjudged_rows = self.rows_with_unknown_query = 0
        self.rows_with_unknown_doc = self.unknown_rows = 0
        self.unjudged_queries: set[str] = set()
        self.unknown_queries: set[str] = set()
        self.unknown_docs: set[str] = set()
        self.examples: list[str] = []

    def add(self, table: pa.Table, unknown_query, unjudged, unknown_doc) -> None:
        self.rows += len(table)
        self.unjudged_rows += int(unjudged.sum())
        self.rows_with_unknown_query += int(unknown_query.sum())
        self.rows_with_unknown_doc += int(unknown_doc.sum())
        self.unknown_rows += int((unknown_query | unknown_doc).sum())
        for ids, column, mask in (
            (self.unjudged_queries, "query_id", unjudged),
            (self.unknown_queries, "query_id", unknown_query),
            (self.unknown_docs, "doc_id", unknown_doc),
        ):
            if mask.any():
                ids.update(pc.unique(table.column(column).filter(mask)).to_pylist())
        if len(self.examples) < EXAMPLES:
            more = _examples(table, unknown_query, unknown_doc, self.unit)
            self.examples += more[: EXAMPLES - len(self.examples)]


def _absent(run: pa.Table, known: pa.Array, column: str) -> np.ndarray:
    """Whether each row's ``column`` is missing from ``known``."""
    return ~pc.is_in(run.column(column), value_set=known).to_numpy(zero_copy_only=False)


def _ids(path: Path, column: str) -> pa.Array:
    return contracts.read_table(path, columns=[column]).column(column).combine_chunks()


def import_run(
    path: Path,
    corpus_path: Path,
    queries_path: Path,
    all_queries_path: Path,
    *,
    run_format: str = "auto",
    top_k: int,
    remove_self_matches: bool,
    max_unknown_fraction: float,
) -> tuple[pd.DataFrame, dict]:
    """The run in ``path`` checked against the dataset's filtered ``corpus_path``, the queries
    scored (``queries_path``, those judged in the split) and its whole queries table
    (``all_queries_path``), put in trec_eval's order (see the module docstring); and its
    report. The file is read a block at a time, keeping each query's top_k as it goes."""
    parquet = run_format == "parquet" or (run_format == "auto" and path.suffix == ".parquet")
    unit = "row" if parquet else "line"
    accepted: dict = {}
    tables = read_parquet_run(path, accepted) if parquet else read_trec(path, accepted)
    doc_ids = _ids(corpus_path, "doc_id")
    query_ids = _ids(queries_path, "query_id")
    all_query_ids = _ids(all_queries_path, "query_id")
    tally, best, removed = _Tally(unit), _TopK(top_k, path, unit), 0
    for table in tables:
        unknown_query = _absent(table, all_query_ids, "query_id")
        unjudged = _absent(table, query_ids, "query_id") & ~unknown_query
        unknown_doc = _absent(table, doc_ids, "doc_id")
        tally.add(table, unknown_query, unjudged, unknown_doc)
        rows = table.filter(pa.array(~(unknown_query | unknown_doc | unjudged)))
        if remove_self_matches:
            own = pc.equal(rows.column("query_id"), rows.column("doc_id"))
            removed += int(pc.sum(own).as_py() or 0)
            rows = rows.filter(pc.invert(own))
        best.offer(rows)
    rows = tally.rows
    report = {
        "format": "parquet" if parquet else "trec",
        "rows_read": rows,
        **accepted,
        "unjudged": {"rows": tally.unjudged_rows, "queries": len(tally.unjudged_queries)},
        "unknown": {
            "rows": tally.unknown_rows,
            "rows_with_unknown_query": tally.rows_with_unknown_query,
            "rows_with_unknown_document": tally.rows_with_unknown_doc,
            "unknown_queries": len(tally.unknown_queries),
            "unknown_documents": len(tally.unknown_docs),
            "examples": tally.examples,
            "max_unknown_fraction": max_unknown_fraction,
        },
    }
    if rows == 0:
        raise InputError(path, "holds no run rows")
    run = best.run()
    if tally.unknown_rows > max_unknown_fraction * rows:
        raise InputError(
            path,
            f"{tally.unknown_rows} of {rows} rows ({tally.unknown_rows / rows:.1%}) name a query "
            f"or document the dataset lacks, more than max_unknown_fraction "
            f"({max_unknown_fraction:.1%}); is it a run of another dataset or corpus version? "
            f"{'; '.join(tally.examples)}",
        )
    short = short_queries(run, query_ids, doc_ids, top_k, remove_self_matches)
    without = int(len(query_ids) - run["query_id"].nunique())
    report |= {
        "rows": len(run),
        "self_matches_removed": removed,
        "rows_beyond_top_k": best.offered - len(run),
        "queries_in_run": int(run["query_id"].nunique()),
        "queries_without_results": without,
        "short_queries": len(short),
    }
    return run, report


def _examples(table: pa.Table, unknown_query, unknown_doc, unit: str) -> list[str]:
    examples = []
    for at in np.flatnonzero(unknown_query | unknown_doc)[:EXAMPLES]:
        parts = [
            f"{kind} {table.column(column)[at].as_py()!r}"
            for kind, column, mask in (
                ("query", "query_id", unknown_query),
                ("document", "doc_id", unknown_doc),
            )
            if mask[at]
        ]
        examples.append(f"{unit} {table.column('at')[at].as_py()}: unknown {' and '.join(parts)}")
    return examples


def log_report(report: dict, location: str) -> None:
    """Warn of what was accepted, cast, dropped or short, so that a partial run says so."""
    if cast := report.get("ids_cast_to_string"):
        log.warning(
            "%s: read the integer column(s) %s as decimal strings; an id written with leading "
            "zeros elsewhere (007) will not match",
            location,
            ", ".join(cast),
        )
    if report["unjudged"]["rows"]:
        log.info(
            "%s: dropped %d rows of %d queries without judgements in the split (trec_eval "
            "ignores them too)",
            location,
            report["unjudged"]["rows"],
            report["unjudged"]["queries"],
        )
    unknown = report["unknown"]
    if unknown["rows"]:
        log.warning(
            "%s: dropped %d rows naming %d unknown queries and %d unknown documents: %s",
            location,
            unknown["rows"],
            unknown["unknown_queries"],
            unknown["unknown_documents"],
            "; ".join(unknown["examples"]),
        )
    accepted = [
        f"{report[key]} {what}"
        for key, what in (("crlf_lines", "CRLF line ends"), ("blank_lines", "blank lines"))
        if report.get(key)
    ] + (["a leading byte-order mark"] if report.get("bom") else [])
    if accepted:
        log.info("%s: accepted %s", location, ", ".join(accepted))
    if report["queries_without_results"]:
        log.warning(
            "%s: %d queries of the dataset have no results in the run (they score 0)",
            location,
            report["queries_without_results"],
        )
