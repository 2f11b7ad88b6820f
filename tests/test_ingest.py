"""ingest: BEIR and PosIR files -> Parquet contracts, and clear errors for bad input."""

from __future__ import annotations

import codecs
import gzip
import hashlib
import json
import logging
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import TINY_CORPUS, TINY_QRELS, TINY_QUERIES, write_beir
from test_positionalize import word_tokenizer

from irflow.analyses.position import length_bucket, relative_position, span_positions
from irflow.core import contracts
from irflow.core.errors import InputError
from irflow.data.catalog import catalog_entry
from irflow.data.ingest import ingest
from irflow.data.layouts import dataset_files, dataset_layout
from irflow.evaluation.score import score_run


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
        (
            "corpus.jsonl",
            2,
            b'{"_id": "d2", "text": \n',
            "corpus.jsonl, line 2: malformed JSON: Expecting value at column 24",
        ),
        (  # a raw tab inside a string: json's message ends "at", its column follows
            "corpus.jsonl",
            2,
            b'{"_id": "d2", "text": "a\tb"}\n',
            "line 2: malformed JSON: Invalid control character at column 25",
        ),
        (
            "corpus.jsonl",
            2,
            b'{"_id": "d2", "text": ' + b"[" * 100_000 + b"\n",
            "corpus.jsonl, line 2: malformed JSON: nested too deeply",
        ),
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
    with caplog.at_level(logging.WARNING, logger="irflow.data.ingest"):
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


# --- PosIR layout ---------------------------------------------------------------------------

POSIR_CORPUS = [
    {"_id": "d1", "title": "ignored", "text": "Cats purr and sleep in the sun."},  # 31 chars
    {"_id": "d2", "title": "ignored", "text": "Dogs bark at the postman."},  # 25 chars
    {"_id": "d3", "title": "ignored", "text": "The sun is a star."},
]
POSIR_QUERIES = [
    {"_id": "q1", "text": "why do cats purr", "pos_char_span": [5, 9], "pos_char_length": 31},
    {"_id": "q2", "text": "what barks", "pos_char_span": [5, 9], "pos_char_length": 25},
    {"_id": "q3", "text": "what is the sun", "pos_char_span": [-1, -1], "pos_char_length": 18},
    {"_id": "q4", "text": "sunny animals", "pos_char_span": [0, 3], "pos_char_length": 31},
    {"_id": "q5", "text": "unjudged", "pos_char_span": None, "pos_char_length": None},
]
POSIR_QRELS = [
    {"query-id": "q1", "corpus-id": "d1", "score": 1},
    {"query-id": "q2", "corpus-id": "d2", "score": 1},
    {"query-id": "q2", "corpus-id": "d1", "score": 0},
    {"query-id": "q3", "corpus-id": "d3", "score": 1},
    {"query-id": "q4", "corpus-id": "d1", "score": 1},
    {"query-id": "q4", "corpus-id": "d3", "score": 2},
]


def write_posir(folder: Path, corpus=None, queries=None, qrels=None) -> Path:
    """A PosIR-layout folder, as PosIR-Benchmark-v1 holds one language and domain."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    tables = {
        "corpus.parquet": POSIR_CORPUS if corpus is None else corpus,
        "queries.parquet": [
            {"pos_token_length": 9} | q for q in (POSIR_QUERIES if queries is None else queries)
        ],
        "qrels/test.parquet": POSIR_QRELS if qrels is None else qrels,
    }
    for name, rows in tables.items():
        pd.DataFrame(rows).to_parquet(folder / name, index=False)
    return folder


def ingest_posir(folder: Path, out: Path, unknown: str = "keep") -> dict:
    assert dataset_layout(folder, "test") == "posir"
    return ingest(*dataset_files(folder, "test"), out, unknown, "posir")


def test_posir_layout_ingests_to_the_contracts_with_spans(tmp_path):
    stats = ingest_posir(write_posir(tmp_path / "biology"), tmp_path / "out")
    corpus = pq.read_table(tmp_path / "out" / "corpus.parquet")
    queries = pq.read_table(tmp_path / "out" / "queries.parquet")
    qrels = pq.read_table(tmp_path / "out" / "qrels.parquet")
    assert corpus.schema.equals(contracts.CORPUS)
    assert queries.schema.equals(contracts.QUERIES)
    assert qrels.schema.equals(contracts.QRELS_POSIR)
    assert corpus.to_pylist()[1] == {
        "doc_id": "d2",
        "title": "",
        "text": "Dogs bark at the postman.",
    }
    assert queries.column("query_id").to_pylist() == ["q1", "q2", "q3", "q4", "q5"]
    assert [tuple(row.values()) for row in qrels.to_pylist()] == [
        ("q1", "d1", 1, 5, 9, 9, 31),  # "purr", with pos_token_length and pos_char_length
        ("q2", "d2", 1, 5, 9, 9, 25),  # "bark"
        ("q2", "d1", 0, None, None, None, None),  # not the relevant document
        ("q3", "d3", 1, None, None, None, None),  # [-1, -1]: not located
        ("q4", "d1", 1, None, None, None, None),  # two relevant documents: which one is a guess
        ("q4", "d3", 2, None, None, None, None),
    ]
    assert stats["layout"] == "posir"
    assert stats["documents"] == 3 and stats["queries"] == 5
    assert stats["judged_queries"] == 4
    assert stats["relevance_levels"] == {"0": 1, "1": 4, "2": 1}
    assert stats["spans"] == {
        "attached": 2,
        "clipped": 0,
        "clipped_examples": [],
        "left_out": {
            "missing": 1,
            "not_located": 1,
            "no_relevant": 0,
            "several_relevant": 1,
            "unknown_document": 0,
        },
        "length_mismatches": 0,
        "length_mismatch_examples": [],
    }
    assert json.dumps(stats)


def test_posir_spans_that_cannot_be_checked_are_counted_and_warned(tmp_path, caplog):
    queries = [
        POSIR_QUERIES[0] | {"pos_char_length": 40},  # d1 has 31 characters
        POSIR_QUERIES[1],
        POSIR_QUERIES[2] | {"pos_char_span": [0, 3]},
    ]
    qrels = [POSIR_QRELS[0], POSIR_QRELS[1], {"query-id": "q3", "corpus-id": "gone", "score": 1}]
    folder = write_posir(tmp_path / "d", queries=queries, qrels=qrels)
    with caplog.at_level(logging.WARNING, logger="irflow.data.ingest"):
        stats = ingest_posir(folder, tmp_path / "out")
    assert stats["spans"]["attached"] == 2
    assert stats["spans"]["left_out"]["unknown_document"] == 1
    assert stats["spans"]["length_mismatches"] == 1
    assert stats["spans"]["length_mismatch_examples"] == ["query 'q1': 40 for document 'd1' of 31"]
    assert any("pos_char_length differs" in message for message in caplog.messages)
    assert any("1 a relevant document unknown" in message for message in caplog.messages)
    spans = pd.read_parquet(tmp_path / "out" / "qrels.parquet").set_index("query_id")
    assert spans.loc["q1", "span_start"] == 5 and spans.loc["q1", "span_end"] == 9
    assert pd.isna(spans.loc["q3", "span_start"])


def test_posir_spans_past_the_end_are_clipped_as_posir(tmp_path, caplog):
    queries = [
        POSIR_QUERIES[0] | {"pos_char_span": [25, 35]},  # d1 has 31 characters: centre 30
        POSIR_QUERIES[1] | {"pos_char_span": [24, 30]},  # d2 has 25: centre 27, past the end
        POSIR_QUERIES[3] | {"pos_char_span": [0, 31]},  # ends at the end: not clipped
    ]
    qrels = [POSIR_QRELS[0], POSIR_QRELS[1], {"query-id": "q4", "corpus-id": "d1", "score": 1}]
    folder = write_posir(tmp_path / "d", queries=queries, qrels=qrels)
    with caplog.at_level(logging.WARNING, logger="irflow.data.ingest"):
        stats = ingest_posir(folder, tmp_path / "out")
    assert stats["spans"]["attached"] == 3 and stats["spans"]["clipped"] == 2
    assert stats["spans"]["clipped_examples"] == [
        "row 0: query 'q1': 25..35 in document 'd1' of 31 characters -> 29..31",
        "row 1: query 'q2': 24..30 in document 'd2' of 25 characters -> 25..25",
    ]
    assert any("2 spans run past the end" in message for message in caplog.messages)
    spans = pd.read_parquet(tmp_path / "out" / "qrels.parquet").set_index("query_id")
    assert spans.loc["q4", ["span_start", "span_end"]].tolist() == [0, 31]
    # PosIR's relative position: min(centre, length) / length.
    relpos = relative_position(spans["span_start"], spans["span_end"], [31, 25, 31])
    assert relpos.tolist() == pytest.approx([30 / 31, 1.0, 15.5 / 31])


def test_posir_token_lengths_bucket_a_translation_with_its_original(tmp_path):
    """PosIR buckets by the English original's pos_token_length, so a translation whose text
    is shorter or longer in tokens still lands in the original's bucket."""
    english = write_posir(
        tmp_path / "en",
        queries=[
            POSIR_QUERIES[0] | {"pos_token_length": 1100},
            POSIR_QUERIES[1] | {"pos_token_length": 600},
        ],
        qrels=POSIR_QRELS[:2],
    )
    translated = [
        {"_id": "d1", "text": "Les chats ronronnent et dorment au soleil, longuement."},
        {"_id": "d2", "text": "Chiens aboient."},
    ]
    french = write_posir(
        tmp_path / "fr",
        corpus=translated,
        queries=[
            POSIR_QUERIES[0] | {"pos_char_span": [10, 20], "pos_token_length": 1100},
            POSIR_QUERIES[1] | {"pos_char_span": [7, 14], "pos_token_length": 600},
        ],
        qrels=POSIR_QRELS[:2],
    )
    buckets = {}
    for name, folder in (("en", english), ("fr", french)):
        ingest_posir(folder, tmp_path / name / "out")
        positions = span_positions(
            pd.read_parquet(tmp_path / name / "out" / "qrels.parquet"),
            pd.read_parquet(tmp_path / name / "out" / "corpus.parquet"),
            word_tokenizer(),
        )
        assert positions["doc_tokens"].tolist() == [1100, 600]
        buckets[name] = length_bucket(positions["doc_tokens"]).tolist()
    assert buckets == {"en": ["Q3", "Q2"], "fr": ["Q3", "Q2"]}


def test_posir_qrels_take_judgements_added_by_quality_control(tmp_path):
    from irflow.derived.qc.control import apply_decisions

    ingest_posir(write_posir(tmp_path / "d"), tmp_path / "out")
    tables = {n: pd.read_parquet(tmp_path / "out" / f"{n}.parquet") for n in CONTRACT_TABLES}
    audit = pd.DataFrame({"query_id": ["q3"], "doc_id": ["d1"], "action": ["add_positive"]})
    qrels = apply_decisions(*tables.values(), audit).qrels.set_index(["query_id", "doc_id"])
    assert qrels.loc[("q1", "d1"), "doc_tokens"] == 9
    assert qrels.loc[("q3", "d1"), "relevance"] == 1
    assert pd.isna(qrels.loc[("q3", "d1"), "doc_tokens"])


CONTRACT_TABLES = ("corpus", "queries", "qrels")


def with_row(rows: list[dict], index: int, **changes) -> list[dict]:
    return [row | changes if i == index else row for i, row in enumerate(rows)]


@pytest.mark.parametrize(
    ("tables", "file", "expected"),
    [
        (
            {"queries": with_row(POSIR_QUERIES, 0, pos_token_length=-3)},
            "queries.parquet",
            "row 0, field 'pos_token_length': expected a count, got -3",
        ),
        (
            {"queries": with_row(POSIR_QUERIES, 1, pos_char_span=[9, 5])},
            "queries.parquet",
            "row 1, field 'pos_char_span': invalid span 9..5",
        ),
        (
            {"queries": with_row(POSIR_QUERIES, 1, pos_char_span=[-1, 5])},
            "queries.parquet",
            "row 1, field 'pos_char_span': invalid span -1..5",
        ),
        (
            {"queries": with_row(POSIR_QUERIES, 4, pos_char_span=[1, 2, 3])},
            "queries.parquet",
            "row 4, field 'pos_char_span': expected integer offsets [start, end], got [1, 2, 3]",
        ),
        (
            {"queries": [q | {"pos_char_span": [[0, 4], [5, 9]]} for q in POSIR_QUERIES]},
            "queries.parquet",
            "row 0, field 'pos_char_span': a list of spans [[0, 4], [5, 9]]; "
            "expected one pair [start, end]",
        ),
        (
            {
                "queries": [
                    {k: v for k, v in q.items() if k != "pos_char_span"} for q in POSIR_QUERIES
                ]
            },
            "queries.parquet",
            "queries.parquet, field 'pos_char_span': missing column (the table has: _id, "
            "pos_char_length, pos_token_length, text)",
        ),
        (
            {"qrels": [{k: v for k, v in r.items() if k != "score"} for r in POSIR_QRELS]},
            "qrels/test.parquet",
            "test.parquet, field 'score': missing column",
        ),
        (
            {"corpus": with_row(POSIR_CORPUS, 2, _id="d1")},
            "corpus.parquet",
            "corpus.parquet, row 2, field '_id': duplicate id 'd1' (first on row 0)",
        ),
        (
            {"corpus": with_row(POSIR_CORPUS, 1, text=None)},
            "corpus.parquet",
            "row 1, field 'text': missing",
        ),
        (
            {"queries": with_row(POSIR_QUERIES, 3, _id=" ")},
            "queries.parquet",
            "row 3, field '_id': empty id",
        ),
        (
            {"queries": with_row(POSIR_QUERIES, 3, _id="q1")},
            "queries.parquet",
            "row 3, field '_id': duplicate id 'q1' (first on row 0)",
        ),
        (
            {"qrels": [*POSIR_QRELS, POSIR_QRELS[0]]},
            "qrels/test.parquet",
            "row 6: duplicate judgement of 'd1' for query 'q1' (first on row 0)",
        ),
        (
            {"qrels": with_row(POSIR_QRELS, 2, score=0.5)},
            "qrels/test.parquet",
            "row 2, field 'score': not an integer grade: 0.5",
        ),
    ],
)
def test_bad_posir_input_names_file_row_and_field(tmp_path, tables, file, expected):
    folder = write_posir(tmp_path / "d", **tables)
    with pytest.raises(InputError) as error:
        ingest_posir(folder, tmp_path / "out")
    assert expected in str(error.value)
    assert str(folder / file) in str(error.value)
    assert not (tmp_path / "out" / "corpus.parquet").exists()


def test_posir_unknown_qrels_follow_the_policy(tmp_path):
    qrels = [*POSIR_QRELS, {"query-id": "q9", "corpus-id": "d1", "score": 1}]
    folder = write_posir(tmp_path / "d", qrels=qrels)
    stats = ingest_posir(folder, tmp_path / "kept", "keep")
    assert stats["unknown_qrels"]["unknown_queries"] == 1
    assert stats["unknown_qrels"]["examples"] == ["row 6: query 'q9'"]
    assert ingest_posir(folder, tmp_path / "dropped", "drop")["qrels_rows"] == 6
    with pytest.raises(InputError, match=r"test\.parquet, row 6: names unknown query 'q9'"):
        ingest_posir(folder, tmp_path / "error", "error")


def test_file_that_is_not_parquet_is_reported(tmp_path):
    folder = write_posir(tmp_path / "d")
    (folder / "queries.parquet").write_text('{"_id": "q1"}\n')
    with pytest.raises(InputError, match=r"queries\.parquet: cannot be read as Parquet"):
        ingest_posir(folder, tmp_path / "out")


# --- ir_datasets source -----------------------------------------------------------------------


def ir_datasets_home(home: Path, beir_folder: Path) -> Path:
    """An ir_datasets data folder holding beir/scifact as ir_datasets stores its download:
    the BEIR zip (members scifact/...) at beir/scifact/source.zip, made from ``beir_folder``."""
    import zipfile

    archive = home / "beir" / "scifact" / "source.zip"
    archive.parent.mkdir(parents=True)
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("scifact/corpus.jsonl", gzip.decompress(
            (beir_folder / "corpus.jsonl.gz").read_bytes()
        ))  # fmt: skip
        out.write(beir_folder / "queries.jsonl", "scifact/queries.jsonl")
        out.write(beir_folder / "qrels" / "test.tsv", "scifact/qrels/test.tsv")
    return archive


def test_an_ir_datasets_file_of_another_md5_stops_the_download(tmp_path):
    """beir/scifact read offline from ir_datasets' data folder: the zip made here is not the
    one ir_datasets publishes, so the download stops with an error naming the file and both
    md5s (issue 32, item 8), and nothing reaches the cache. In a process of its own: ir_datasets
    fixes its data folder when imported."""
    import subprocess
    import sys

    home = tmp_path / "ir_datasets"
    tiny = write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS, gzip_corpus=True)
    archive = ir_datasets_home(home, tiny)
    code = (
        "from pathlib import Path\n"
        "from irflow.data.sources import locate_dataset\n"
        "locate_dataset('irds', {'type': 'ir_datasets', 'id': 'beir/scifact'}, split='test',"
        f" data_dir=None, cache_dir=Path({str(tmp_path / 'cache')!r}), offline=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"IR_DATASETS_HOME": str(home), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 1
    actual = hashlib.md5(archive.read_bytes()).hexdigest()
    official_md5 = catalog_entry("beir", "scifact")["source"]["md5"]
    assert (
        f"DownloadError: {archive}: md5 {actual}, not the {official_md5} "
        "ir_datasets publishes for it"
    ) in result.stderr
    assert not (tmp_path / "cache" / "irds").exists()


def test_an_ir_datasets_dataset_missing_offline_names_the_file_to_place(tmp_path):
    import subprocess
    import sys

    code = (
        "from pathlib import Path\n"
        "from irflow.data.sources import locate_dataset\n"
        "locate_dataset('s', {'type': 'ir_datasets', 'id': 'beir/scifact'}, split='test',"
        f" data_dir=None, cache_dir=Path({str(tmp_path / 'cache')!r}), offline=True)\n"
    )
    home = tmp_path / "home"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"IR_DATASETS_HOME": str(home), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 1
    # ir_datasets fetches BEIR's own zip: the one irflow's catalog names.
    official = catalog_entry("beir", "scifact")["source"]
    assert (
        f"DownloadError: ir_datasets dataset 'beir/scifact' is not available offline: place "
        f"{home}/beir/scifact/source.zip (from {official['url']}, md5 {official['md5']})"
    ) in result.stderr
    assert list((tmp_path / "cache").iterdir()) == []  # nothing half-written in the cache
