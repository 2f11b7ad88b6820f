"""ingest: BEIR files -> Parquet contracts, and clear errors for bad input."""

from __future__ import annotations

import codecs
import gzip
import json
import logging
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import TINY_CORPUS, TINY_QRELS, TINY_QUERIES, write_beir

from irflow import contracts
from irflow.errors import InputError
from irflow.ingest import ingest
from irflow.score import score_run


def run_ingest(folder: Path, out: Path, unknown: str = "keep", split: str = "test") -> dict:
    corpus = next(p for p in (folder / "corpus.jsonl", folder / "corpus.jsonl.gz") if p.exists())
    return ingest(corpus, folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv", out, unknown)


def test_tables_follow_the_contracts(tiny_beir, tmp_path):
    stats = run_ingest(tiny_beir, tmp_path / "out")
    corpus = pq.read_table(tmp_path / "out" / "corpus.parquet")
    queries = pq.read_table(tmp_path / "out" / "queries.parquet")
    qrels = pq.read_table(tmp_path / "out" / "qrels.parquet")
    assert corpus.schema.equals(contracts.CORPUS)
    assert queries.schema.equals(contracts.QUERIES)
    assert qrels.schema.equals(contracts.QRELS)
    assert corpus.column("doc_id").to_pylist() == ["d1", "d2", "d3", "d4"]
    assert corpus.column("title").to_pylist()[2] == ""
    assert qrels.to_pylist()[1] == {
        "query_id": "q2",
        "doc_id": "d3",
        "relevance": 2,
        "span_start": None,
        "span_end": None,
    }
    assert stats["documents"] == 4 and stats["queries"] == 3
    assert stats["judged_queries"] == 2
    assert stats["relevance_levels"] == {"0": 1, "1": 1, "2": 1}


def test_gzipped_corpus_and_integer_ids(tmp_path):
    corpus = [{"_id": 7, "title": "t", "text": "seven"}]
    folder = write_beir(
        tmp_path / "d", corpus, [{"_id": 1, "text": "q"}], [(1, 7, 1)], gzip_corpus=True
    )
    run_ingest(folder, tmp_path / "out")
    assert pq.read_table(tmp_path / "out" / "corpus.parquet").column("doc_id").to_pylist() == ["7"]


@pytest.mark.parametrize(("gzip_corpus", "qrels_header"), [(False, True), (True, False)])
def test_byte_order_marks_are_stripped(tmp_path, gzip_corpus, qrels_header):
    """A BOM at the start of each file (inside the gzip stream too) changes nothing."""
    folders = [
        write_beir(tmp_path / name, TINY_CORPUS, TINY_QUERIES, TINY_QRELS, gzip_corpus=gzip_corpus)
        for name in ("plain", "marked")
    ]
    corpus = "corpus.jsonl.gz" if gzip_corpus else "corpus.jsonl"
    for folder in folders:
        qrels = folder / "qrels" / "test.tsv"
        if not qrels_header:
            qrels.write_text(qrels.read_text().split("\n", 1)[1])
    for name in (corpus, "queries.jsonl", "qrels/test.tsv"):
        path = folders[1] / name
        if name.endswith(".gz"):
            path.write_bytes(gzip.compress(codecs.BOM_UTF8 + gzip.decompress(path.read_bytes())))
        else:
            path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    stats = [run_ingest(folder, tmp_path / f"out-{folder.name}") for folder in folders]
    assert stats[1] == stats[0]
    for table in ("corpus", "queries", "qrels"):
        plain, marked = (
            pq.read_table(tmp_path / f"out-{f.name}" / f"{table}.parquet") for f in folders
        )
        assert marked.equals(plain), table
    assert pq.read_table(tmp_path / "out-marked" / "queries.parquet")["query_id"][0].as_py() == "q1"


def corrupt_line(folder: Path, name: str, line: int, raw: bytes) -> None:
    path = folder / name
    lines = path.read_bytes().splitlines(keepends=True)
    lines[line - 1] = raw
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize(
    ("name", "line", "raw", "expected"),
    [
        ("corpus.jsonl", 2, b'{"_id": "d2", "text": \n', "corpus.jsonl, line 2: malformed JSON"),
        (
            "corpus.jsonl",
            3,
            b'{"_id": "d1", "text": "again"}\n',
            "line 3, field '_id': duplicate id 'd1' (first on line 1)",
        ),
        ("corpus.jsonl", 2, b'{"_id": "d2", "title": "x"}\n', "line 2, field 'text': missing"),
        ("corpus.jsonl", 4, b'{"_id": "d4", "text": "caf\xe9"}\n', "line 4: not valid UTF-8"),
        ("corpus.jsonl", 1, b'["d1", "text"]\n', "line 1: expected a JSON object"),
        (
            "corpus.jsonl",
            1,
            b'{"_id": "d1", "text": {"a": 1}}\n',
            "line 1, field 'text': expected a string",
        ),
        (
            "queries.jsonl",
            2,
            b'{"_id": "q2", "text": "  "}\n',
            "queries.jsonl, line 2, field 'text': empty query text",
        ),
        ("queries.jsonl", 3, b'{"_id": "", "text": "x"}\n', "line 3, field '_id': empty id"),
        (
            "qrels/test.tsv",
            2,
            b"q1\td1\n",
            "test.tsv, line 2: expected 3 tab-separated columns, found 2",
        ),
        ("qrels/test.tsv", 3, b"q2\td3\thigh\n", "line 3, field 'score': not an integer grade"),
        (
            "qrels/test.tsv",
            4,
            b"q1\td1\t1\n",
            "line 4: duplicate judgement of 'd1' for query 'q1' (first on line 2)",
        ),
    ],
)
def test_bad_input_names_file_line_and_field(tiny_beir, tmp_path, name, line, raw, expected):
    corrupt_line(tiny_beir, name, line, raw)
    with pytest.raises(InputError) as error:
        run_ingest(tiny_beir, tmp_path / "out")
    assert expected in str(error.value)
    assert str(tiny_beir / name) in str(error.value)


def test_failed_ingest_keeps_earlier_results(tiny_beir, tmp_path):
    out = tmp_path / "out"
    run_ingest(tiny_beir, out)
    before = (out / "corpus.parquet").read_bytes()
    corrupt_line(tiny_beir, "qrels/test.tsv", 2, b"q1\td1\tx\n")
    with pytest.raises(InputError):
        run_ingest(tiny_beir, out)
    assert (out / "corpus.parquet").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == [
        "corpus.parquet",
        "qrels.parquet",
        "queries.parquet",
    ]


def test_truncated_gzip_is_reported(tmp_path):
    folder = write_beir(tmp_path / "d", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, gzip_corpus=True)
    data = (folder / "corpus.jsonl.gz").read_bytes()
    (folder / "corpus.jsonl.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="corpus.jsonl.gz: cannot be read"):
        run_ingest(folder, tmp_path / "out")


def unknown_qrels_folder(tmp_path) -> Path:
    qrels = TINY_QRELS + [("q1", "missing-doc", 1), ("q9", "d2", 1)]
    return write_beir(tmp_path / "d", TINY_CORPUS, TINY_QUERIES, qrels)


def test_unknown_qrels_are_counted_and_kept(tmp_path):
    stats = run_ingest(unknown_qrels_folder(tmp_path), tmp_path / "out", "keep")
    assert stats["unknown_qrels"]["unknown_documents"] == 1
    assert stats["unknown_qrels"]["unknown_queries"] == 1
    assert pq.read_table(tmp_path / "out" / "qrels.parquet").num_rows == 5


@pytest.mark.parametrize(
    ("unknown_row", "says", "never_says", "recall_10"),
    [
        (
            ("q1", "missing-doc", 1),
            "its query is still scored, but if the document is relevant the query's recall "
            "cannot reach 1",
            "score 0",
            0.5,  # q1 has d1 and the unknown document relevant; a run can find only d1
        ),
        (
            ("q9", "d2", 1),
            "an unknown query is never retrieved for, so it scores 0 for every system",
            "recall",
            0.0,
        ),
    ],
    ids=["unknown document", "unknown query"],
)
def test_unknown_qrels_warning_says_what_scoring_does(
    tmp_path, caplog, unknown_row, says, never_says, recall_10
):
    folder = write_beir(tmp_path / "d", TINY_CORPUS, TINY_QUERIES, [*TINY_QRELS, unknown_row])
    with caplog.at_level(logging.WARNING, logger="irflow.ingest"):
        run_ingest(folder, tmp_path / "out", "keep")
    (warning,) = caplog.messages
    assert says in warning and never_says not in warning

    # The warning says what scoring does, for a run that ranks every document for every query.
    run = pd.DataFrame(
        [(q["_id"], d["_id"], 1.0) for q in TINY_QUERIES for d in TINY_CORPUS],
        columns=["query_id", "doc_id", "score"],
    )
    scores = score_run(run, pd.read_parquet(tmp_path / "out" / "qrels.parquet"), ["recall.10"])
    recall = scores.set_index("query_id")["value"].to_dict()
    assert recall[unknown_row[0]] == recall_10
    assert recall["q2"] == 1.0


def test_unknown_qrels_can_be_dropped(tmp_path):
    stats = run_ingest(unknown_qrels_folder(tmp_path), tmp_path / "out", "drop")
    assert stats["unknown_qrels"]["dropped_rows"] == 2
    assert pq.read_table(tmp_path / "out" / "qrels.parquet").num_rows == 3


def test_unknown_qrels_can_be_errors(tmp_path):
    with pytest.raises(InputError, match=r"line 5: names unknown document 'missing-doc'"):
        run_ingest(unknown_qrels_folder(tmp_path), tmp_path / "out", "error")


def test_relevant_spans_are_kept(tmp_path):
    folder = write_beir(tmp_path / "d", TINY_CORPUS, TINY_QUERIES, [("q1", "d1", 1, 5, 9)])
    run_ingest(folder, tmp_path / "out")
    row = pq.read_table(tmp_path / "out" / "qrels.parquet").to_pylist()[0]
    assert (row["span_start"], row["span_end"]) == (5, 9)


def test_real_arguana_reports_its_five_missing_documents(shared_datasets, tmp_path):
    folder = shared_datasets / "arguana"
    stats = ingest(
        folder / "corpus.jsonl.gz",
        folder / "queries.jsonl",
        folder / "qrels" / "test.tsv",
        tmp_path,
        "keep",
    )
    assert stats["documents"] == 8674
    assert stats["judged_queries"] == 1406
    assert stats["unknown_qrels"]["unknown_documents"] == 5
    assert json.dumps(stats)  # statistics are JSON-serialisable
