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
  them and irflow's own measures would count both;
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
"""

from __future__ import annotations

import codecs
import gzip
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from irflow.core.errors import DownloadError, InputError
from irflow.core.fingerprint import file_md5
from irflow.core.redact import public_url
from irflow.data.download_cache import cached_file_name
from irflow.data.fetch import fetch_url
from irflow.retrieval.runs import short_queries, trec_order

log = logging.getLogger(__name__)

TREC_FIELDS = ("query_id", "Q0", "doc_id", "rank", "score", "tag")
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
    return fetch_url(location, dest, md5=md5)


def recorded_settings(settings: dict) -> dict:
    """The external_run settings as the log, manifest and run's lineage record them: a URL
    without its userinfo and query string, which can hold a token (irflow.core.redact)."""
    location = settings["location"]
    return settings | {"location": public_url(location) if is_url(location) else location}


def _text(path: Path) -> tuple[str, bool]:
    """The file's text (gunzipped for ``.gz``) without a leading BOM, and whether it had one."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError) as error:
        raise InputError(path, f"cannot be read: {error}") from None
    bom = raw.startswith(codecs.BOM_UTF8)
    raw = raw[len(codecs.BOM_UTF8) :] if bom else raw
    try:
        return raw.decode("utf-8"), bom
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise InputError(path, "not valid UTF-8", line=line) from None


def _first(mask: pa.Array) -> int | None:
    """The index of the first true value of ``mask``, or None."""
    hits = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    return int(hits[0]) if len(hits) else None


def read_trec(path: Path) -> tuple[pa.Table, dict]:
    """query_id, doc_id, score and the line each came from, as the file lists them; and what
    was accepted on the way (BOM, CRLF line ends, blank lines)."""
    text, bom = _text(path)
    lines = pc.split_pattern(pa.array([text], pa.large_string()), "\n").flatten()
    if len(lines) and lines[-1].as_py() == "":  # the newline that ends the last line
        lines = lines.slice(0, len(lines) - 1)
    crlf = int(pc.sum(pc.ends_with(lines, "\r")).as_py() or 0)
    trimmed = pc.ascii_trim_whitespace(lines)
    blank = pc.equal(trimmed, "")
    fields = pc.ascii_split_whitespace(trimmed)
    counts = pc.list_value_length(fields)
    wrong = pc.and_(pc.not_equal(counts, len(TREC_FIELDS)), pc.invert(blank))
    if (at := _first(wrong)) is not None:
        raise InputError(
            path,
            f"expected {len(TREC_FIELDS)} whitespace-separated fields "
            f"({' '.join(TREC_FIELDS)}), found {counts[at].as_py()}: {lines[at].as_py()!r}",
            line=at + 1,
        )
    kept = np.flatnonzero(~blank.to_numpy(zero_copy_only=False))
    fields = fields.take(pa.array(kept))
    column = {name: pc.list_element(fields, i) for i, name in enumerate(TREC_FIELDS)}
    line_numbers = pa.array(kept + 1)
    for name in ("rank", "score"):
        bad = pc.invert(pc.match_substring_regex(column[name], _NUMBER))
        if (at := _first(bad)) is not None:
            raise InputError(
                path,
                f"not a number: {column[name][at].as_py()!r}",
                line=line_numbers[at].as_py(),
                field=name,
            )
    scores = pc.cast(column["score"], pa.float64())
    if (at := _first(pc.invert(pc.is_finite(scores)))) is not None:
        raise InputError(
            path,
            f"{column['score'][at].as_py()!r} overflows a float64",
            line=line_numbers[at].as_py(),
            field="score",
        )
    table = pa.table(
        {
            "query_id": column["query_id"].cast(pa.string()),
            "doc_id": column["doc_id"].cast(pa.string()),
            "score": scores,
            "at": line_numbers,
        }
    )
    accepted = {"bom": bom, "crlf_lines": crlf, "blank_lines": int(pc.sum(blank).as_py() or 0)}
    return table, accepted


def _is_string(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_id(kind: pa.DataType) -> bool:
    return _is_string(kind) or pa.types.is_integer(kind)


def read_parquet_run(path: Path) -> tuple[pa.Table, dict]:
    """query_id, doc_id, score and the row (from 0) of each, from a Parquet run; and which id
    columns held integers, read as their decimal strings."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise InputError(path, f"cannot be read as Parquet: {error}") from None
    for name, accepts, what in (
        ("query_id", _is_id, "strings or integers"),
        ("doc_id", _is_id, "strings or integers"),
        ("score", lambda t: pa.types.is_floating(t) or pa.types.is_integer(t), "numbers"),
    ):
        if name not in table.column_names:
            has = ", ".join(table.column_names)
            raise InputError(path, f"missing column (the table has: {has})", field=name)
        kind = table.schema.field(name).type
        if not accepts(kind):
            raise InputError(path, f"expected {what}, the column holds {kind}", field=name)
        if (at := _first(table.column(name).is_null().combine_chunks())) is not None:
            raise InputError(f"{path}, row {at}", "null", field=name)
    scores = table.column("score").cast(pa.float64())
    if (at := _first(pc.invert(pc.is_finite(scores)).combine_chunks())) is not None:
        raise InputError(f"{path}, row {at}", f"not finite: {scores[at].as_py()}", field="score")
    cast = [
        name for name in ("query_id", "doc_id") if not _is_string(table.schema.field(name).type)
    ]
    run = pa.table(
        {
            "query_id": table.column("query_id").cast(pa.string()),
            "doc_id": table.column("doc_id").cast(pa.string()),
            "score": scores,
            "at": pa.array(np.arange(len(table))),
        }
    )
    return run, {"ids_cast_to_string": cast}


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


def _absent(run: pa.Table, known: pa.Array, column: str) -> np.ndarray:
    """Whether each row's ``column`` is missing from ``known``."""
    return ~pc.is_in(run.column(column), value_set=known).to_numpy(zero_copy_only=False)


def _ids(path: Path, column: str) -> pa.Array:
    return pq.read_table(path, columns=[column]).column(column).combine_chunks()


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
    report."""
    parquet = run_format == "parquet" or (run_format == "auto" and path.suffix == ".parquet")
    unit = "row" if parquet else "line"
    table, accepted = read_parquet_run(path) if parquet else read_trec(path)
    _check_unique(table.select(["query_id", "doc_id", "at"]).to_pandas(), path, unit)
    doc_ids = _ids(corpus_path, "doc_id")
    query_ids = _ids(queries_path, "query_id")
    unknown_query = _absent(table, _ids(all_queries_path, "query_id"), "query_id")
    unjudged = _absent(table, query_ids, "query_id") & ~unknown_query
    unknown_doc = _absent(table, doc_ids, "doc_id")
    unknown = unknown_query | unknown_doc
    rows = len(table)
    report = {
        "format": "parquet" if parquet else "trec",
        "rows_read": rows,
        **accepted,
        "unjudged": {
            "rows": int(unjudged.sum()),
            "queries": len(pc.unique(table.column("query_id").filter(unjudged))),
        },
        "unknown": {
            "rows": int(unknown.sum()),
            "rows_with_unknown_query": int(unknown_query.sum()),
            "rows_with_unknown_document": int(unknown_doc.sum()),
            "unknown_queries": len(pc.unique(table.column("query_id").filter(unknown_query))),
            "unknown_documents": len(pc.unique(table.column("doc_id").filter(unknown_doc))),
            "examples": _examples(table, unknown_query, unknown_doc, unit),
            "max_unknown_fraction": max_unknown_fraction,
        },
    }
    if rows == 0:
        raise InputError(path, "holds no run rows")
    if unknown.sum() > max_unknown_fraction * rows:
        raise InputError(
            path,
            f"{int(unknown.sum())} of {rows} rows ({unknown.sum() / rows:.1%}) name a query or "
            f"document the dataset lacks, more than max_unknown_fraction "
            f"({max_unknown_fraction:.1%}); is it a run of another dataset or corpus version? "
            f"{'; '.join(report['unknown']['examples'])}",
        )
    kept = pa.array(~(unknown | unjudged))
    run = table.filter(kept).select(["query_id", "doc_id", "score"]).to_pandas()
    removed = 0
    if remove_self_matches:
        own = run["query_id"] == run["doc_id"]
        removed = int(own.sum())
        run = run[~own]
    run = trec_order(run)
    deep = run["rank"] > top_k
    run = run[~deep].reset_index(drop=True)
    short = short_queries(run, query_ids, doc_ids, top_k, remove_self_matches)
    without = int(len(query_ids) - run["query_id"].nunique())
    report |= {
        "rows": len(run),
        "self_matches_removed": removed,
        "rows_beyond_top_k": int(deep.sum()),
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
