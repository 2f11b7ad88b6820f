"""External runs (type: run): a TREC or Parquet run made outside irflow becomes a system."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import bm25s
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import pytrec_eval
import Stemmer
from bm25_index import bm25_run
from conftest import schema_defaults, snakemake

from irflow.core import contracts
from irflow.core.errors import DownloadError, InputError
from irflow.data.download_cache import cached_file_name
from irflow.data.filter import queries_to_score
from irflow.data.ingest import ingest
from irflow.evaluation.score import score_run
from irflow.retrieval.external_run import import_run, locate_run, run_location
from irflow.retrieval.runs import trec_order

DOCS = ["d1", "d2", "d3", "d10"]
QUERIES = ["q1", "q2", "d2"]
UNJUDGED = ["q3"]  # in the dataset's queries table, without judgements in the split


def write_dataset(
    folder: Path, docs: list[str], judged: list[str], unjudged: list[str]
) -> tuple[Path, Path, Path]:
    """The filtered corpus, the queries scored (``judged``) and the dataset's whole queries
    table (``judged`` and ``unjudged``), as the workflow hands them to the import."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus.parquet"
    rows = [{"doc_id": d, "title": "", "text": f"text of {d}"} for d in docs]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus)
    paths = []
    for name, ids in (("queries", judged), ("all_queries", judged + unjudged)):
        paths.append(folder / f"{name}.parquet")
        rows = [{"query_id": q, "text": f"query {q}"} for q in ids]
        contracts.write_table(pa.Table.from_pylist(rows, contracts.QUERIES), paths[-1])
    return corpus, *paths


@pytest.fixture
def dataset(tmp_path) -> tuple[Path, Path, Path]:
    return write_dataset(tmp_path / "dataset", DOCS, QUERIES, UNJUDGED)


def imported(path: Path, dataset, **settings) -> tuple[pd.DataFrame, dict]:
    settings = {"top_k": 1000, "remove_self_matches": False, "max_unknown_fraction": 0.5} | settings
    return import_run(path, *dataset, **settings)


def write(tmp_path: Path, text: str | bytes, name: str = "run.trec") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


GOOD = "q1 Q0 d1 1 2.5 sys\nq1 Q0 d2 2 1.5 sys\nq2 Q0 d3 1 0.5 sys\n"


def test_a_trec_run_becomes_the_run_contract_in_trec_eval_order(tmp_path, dataset):
    # Ranks in the file are ignored, as trec_eval ignores them: ties go by doc id descending
    # (bytes: "d3" > "d2" > "d10"); scores parse exactly.
    text = "q1 Q0 d10 1 1.0 x\nq1\tQ0  d3 9 1.0 x\nq1 Q0 d2 5 1 x\nq2 Q0 d1 1 -2.25e-1 x\n"
    run, report = imported(write(tmp_path, text), dataset)
    assert run["doc_id"].tolist() == ["d3", "d2", "d10", "d1"]
    assert run["rank"].tolist() == [1, 2, 3, 1]
    assert run["score"].tolist() == [1.0, 1.0, 1.0, -0.225]
    assert report["rows"] == 4 and report["unknown"]["rows"] == 0
    assert report["queries_without_results"] == 1  # query "d2" has no line
    assert report["bom"] is False and report["crlf_lines"] == 0


def test_a_parquet_run_gives_the_same_run_as_its_trec_file(tmp_path, dataset):
    trec, _ = imported(write(tmp_path, GOOD), dataset)
    table = pd.DataFrame(
        {"query_id": ["q2", "q1", "q1"], "doc_id": ["d3", "d2", "d1"], "score": [0.5, 1.5, 2.5]}
    )
    table.to_parquet(tmp_path / "run.parquet")
    parquet, report = imported(tmp_path / "run.parquet", dataset)
    pd.testing.assert_frame_equal(parquet, trec)
    assert report["format"] == "parquet"


@pytest.mark.parametrize(
    ("text", "line", "field", "says"),
    [
        (GOOD + "q1 Q0 d3 3 1.0\n", 4, None, "expected 6 whitespace-separated fields"),
        ("q1 Q0 d1 1 2.5 sys\nq1 Q0 d2 2 high sys\n", 2, "score", "not a number: 'high'"),
        ("q1 Q0 d1 1 nan sys\n", 1, "score", "not a number: 'nan'"),
        ("q1 Q0 d1 1 2,5 sys\n", 1, "score", "not a number"),
        ("q1 Q0 d1 1 1e999 sys\n", 1, "score", "overflows"),
        ("q1 Q0 d1 first 1 sys\n", 1, "rank", "not a number: 'first'"),
        (GOOD + "q1 Q0 d1 4 0.1 sys\n", 4, None, "first on line 1"),
        (b"q1 Q0 d1 1 1 sys\nq1 Q0 d\xff 2 0 sys\n", 2, None, "not valid UTF-8"),
    ],
    ids=["missing-column", "non-numeric", "nan", "comma", "overflow", "rank", "dup", "utf8"],
)
def test_a_malformed_run_is_one_error_naming_line_and_field(
    tmp_path, dataset, text, line, field, says
):
    with pytest.raises(InputError, match=says) as error:
        imported(write(tmp_path, text), dataset)
    assert (error.value.line, error.value.field) == (line, field)
    assert error.value.path == str(tmp_path / "run.trec")


def test_bom_crlf_and_blank_lines_are_accepted_and_counted(tmp_path, dataset):
    plain, _ = imported(write(tmp_path, GOOD), dataset)
    text = "\ufeff" + GOOD.replace("\n", "\r\n").replace("q2", "\r\nq2", 1)
    run, report = imported(write(tmp_path, text, "windows.trec"), dataset)
    pd.testing.assert_frame_equal(run, plain)
    assert (report["bom"], report["crlf_lines"], report["blank_lines"]) == (True, 4, 1)


def test_gzipped_runs_are_read(tmp_path, dataset):
    plain, _ = imported(write(tmp_path, GOOD), dataset)
    run, _ = imported(write(tmp_path, gzip.compress(GOOD.encode()), "run.trec.gz"), dataset)
    pd.testing.assert_frame_equal(run, plain)


def test_unknown_ids_are_counted_dropped_and_refused_past_the_limit(tmp_path, dataset):
    text = GOOD + "q1 Q0 gone 3 0.1 sys\nq9 Q0 d1 1 3 sys\n"
    run, report = imported(write(tmp_path, text), dataset)
    assert len(run) == 3 and "gone" not in set(run["doc_id"]) and "q9" not in set(run["query_id"])
    unknown = report["unknown"]
    assert (unknown["rows"], unknown["unknown_documents"], unknown["unknown_queries"]) == (2, 1, 1)
    assert unknown["examples"] == ["line 4: unknown document 'gone'", "line 5: unknown query 'q9'"]
    with pytest.raises(InputError, match=r"2 of 5 rows \(40.0%\).*line 4: unknown document"):
        imported(write(tmp_path, text), dataset, max_unknown_fraction=0.3)


def test_unjudged_queries_are_dropped_as_trec_eval_drops_them_and_counted_apart(tmp_path, dataset):
    # A run over every query of the dataset (as tools write one from BEIR's queries.jsonl):
    # q3 has no judgements in the split, so trec_eval ignores it; q9 is in no queries table.
    unjudged = "q3 Q0 d1 1 3 sys\nq3 Q0 d2 2 2 sys\nq3 Q0 d3 3 1 sys\n"
    text = GOOD + unjudged + "q9 Q0 d1 1 3 sys\n"
    run, report = imported(write(tmp_path, text), dataset, max_unknown_fraction=0.2)
    plain, _ = imported(write(tmp_path, GOOD, "judged.trec"), dataset)
    pd.testing.assert_frame_equal(run, plain)
    assert report["unjudged"] == {"rows": 3, "queries": 1}
    assert (report["unknown"]["rows"], report["unknown"]["unknown_queries"]) == (1, 1)
    assert report["rows_read"] == 7 and report["rows"] == 3
    # Unknown ids are still refused past the limit: 1 of 7 rows is over 10 %.
    with pytest.raises(InputError, match=r"1 of 7 rows \(14.3%\).*line 7: unknown query 'q9'"):
        imported(write(tmp_path, text), dataset, max_unknown_fraction=0.1)


def test_a_rank_written_as_a_decimal_is_accepted_as_trec_eval_ignores_it(tmp_path, dataset):
    plain, _ = imported(write(tmp_path, GOOD), dataset)
    decimal, _ = imported(write(tmp_path, GOOD.replace(" 1 ", " 1.0 "), "decimal.trec"), dataset)
    pd.testing.assert_frame_equal(decimal, plain)


def test_integer_ids_of_a_parquet_run_are_read_as_strings_and_reported(tmp_path):
    dataset = write_dataset(tmp_path / "numeric", ["1", "2", "10"], ["7", "8"], [])
    frame = pd.DataFrame({"query_id": [7, 7, 8], "doc_id": [10, 2, 1], "score": [1.0, 2.0, 3.0]})
    frame.to_parquet(tmp_path / "run.parquet")
    run, report = imported(tmp_path / "run.parquet", dataset, max_unknown_fraction=0.0)
    assert run[["query_id", "doc_id"]].values.tolist() == [["7", "2"], ["7", "10"], ["8", "1"]]
    assert report["ids_cast_to_string"] == ["query_id", "doc_id"]
    frame.astype({"doc_id": str}).to_parquet(tmp_path / "run.parquet")
    assert imported(tmp_path / "run.parquet", dataset)[1]["ids_cast_to_string"] == ["query_id"]


def test_top_k_and_self_matches_apply_as_to_irflow_retrievers(tmp_path, dataset):
    text = "d2 Q0 d2 1 9 s\nd2 Q0 d1 2 5 s\nd2 Q0 d3 3 5 s\nd2 Q0 d10 4 1 s\n"
    run, report = imported(write(tmp_path, text), dataset, top_k=2, remove_self_matches=True)
    assert run["doc_id"].tolist() == ["d3", "d1"]
    assert (report["self_matches_removed"], report["rows_beyond_top_k"]) == (1, 1)


@pytest.mark.parametrize(
    ("frame", "field", "says"),
    [
        (pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"]}), "score", "missing column"),
        (pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "score": ["1"]}), "score", "numbers"),
        (pd.DataFrame({"query_id": ["q1"], "doc_id": [None], "score": [1.0]}), "doc_id", "null"),
    ],
)
def test_a_malformed_parquet_run_names_its_column(tmp_path, dataset, frame, field, says):
    frame.to_parquet(tmp_path / "run.parquet")
    with pytest.raises(InputError, match=says) as error:
        imported(tmp_path / "run.parquet", dataset)
    assert error.value.field == field


def test_a_repeated_row_of_a_parquet_run_names_both_rows(tmp_path, dataset):
    frame = pd.DataFrame({"query_id": ["q1", "q2", "q1"], "doc_id": ["d1"] * 3, "score": [1, 2, 3]})
    frame.to_parquet(tmp_path / "run.parquet")
    with pytest.raises(InputError, match=r"row 2: .*first on row 0"):
        imported(tmp_path / "run.parquet", dataset)


def test_locate_run_from_a_path_a_url_and_offline(tmp_path, monkeypatch):
    assert run_location("runs/{dataset}.trec", "scifact") == "runs/scifact.trec"
    local = write(tmp_path, GOOD)
    assert locate_run(str(local), tmp_path / "cache") == local
    with pytest.raises(InputError, match="checksum mismatch"):
        locate_run(str(local), tmp_path / "cache", md5="0" * 32)
    with pytest.raises(InputError, match="run file not found"):
        locate_run(str(tmp_path / "missing.trec"), tmp_path / "cache")
    url = "https://runs.example/bm25/scifact.trec"
    cached = tmp_path / "cache" / cached_file_name(url, "run.trec")  # "<digest>-scifact.trec"
    with pytest.raises(DownloadError, match=f"place the file at {cached}"):
        locate_run(url, tmp_path / "cache", offline=True)
    fetched = []

    def fake_fetch(location, dest, md5=None):
        fetched.append((location, dest, md5))
        return dest

    monkeypatch.setattr("irflow.data.fetch.fetch_url", fake_fetch)
    assert locate_run(url, tmp_path / "cache", md5="a" * 32) == cached
    assert fetched == [(url, cached, "a" * 32)]


def test_the_schema_takes_a_run_system():
    spec = schema_defaults({"type": "run", "path": "runs/{dataset}.trec"})
    assert spec == {
        "type": "run",
        "path": "runs/{dataset}.trec",
        "format": "auto",
        "md5": {},
        "max_unknown_fraction": 0.05,
    }


# --- an external BM25 run of SciFact, written by bare bm25s ---------------------------------


def bare_bm25s_run(folder: Path, path: Path, judged: set[str]) -> None:
    """BM25 as irflow's default retriever configures it (lucene, k1 0.9, b 0.4, English stemmer
    and stopwords, title + " " + text), by bm25s alone from the BEIR files, over every query of
    queries.jsonl as such tools run it: for a ``judged`` query every document that scores above
    0 (lucene scores exactly the documents sharing a term), for the others their top 10 (they
    are dropped unscored; fewer lines keep the test fast); each score written as the shortest
    decimal of its float64 value."""
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines]
    with open(folder / "queries.jsonl", encoding="utf-8") as lines:
        queries = [json.loads(line) for line in lines]
    stemmer = Stemmer.Stemmer("english")
    model = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    texts = [f"{d.get('title') or ''} {d['text']}".strip() for d in docs]
    model.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False))
    scored = [q for q in queries if q["_id"] in judged]
    unscored = [q for q in queries if q["_id"] not in judged]
    with open(path, "w", encoding="utf-8") as out:
        for subset, depth in ((scored, len(docs)), (unscored, 10)):
            tokens = bm25s.tokenize(
                [q["text"] for q in subset], stopwords="en", stemmer=stemmer, show_progress=False
            )
            rows, scores = model.retrieve(tokens, k=depth, show_progress=False, n_threads=1)
            for query, query_rows, query_scores in zip(subset, rows, scores):
                for rank, (row, score) in enumerate(zip(query_rows, query_scores), start=1):
                    if score > 0:
                        doc = docs[row]["_id"]
                        out.write(f"{query['_id']} Q0 {doc} {rank} {float(score)!r} b\n")


def test_a_bare_bm25s_run_of_scifact_scores_what_irflow_bm25_scores(tmp_path, shared_datasets):
    folder = shared_datasets / "scifact"
    tables = tmp_path / "tables"
    tables.mkdir()
    ingest(
        folder / "corpus.jsonl.gz", folder / "queries.jsonl", folder / "qrels" / "test.tsv", tables
    )
    corpus, all_queries = tables / "corpus.parquet", tables / "queries.parquet"
    queries = tables / "judged_queries.parquet"  # as filter writes them: SciFact's 300 of 1,109
    scored = queries_to_score(all_queries, tables / "qrels.parquet")
    contracts.write_table(scored, queries, contracts.QUERIES)
    spec = schema_defaults({"type": "bm25"})
    ours, _ = bm25_run(corpus, queries, spec, top_k=1000, remove_self_matches=False)
    bare_bm25s_run(folder, tmp_path / "bm25s.trec", set(scored.column("query_id").to_pylist()))
    theirs, report = import_run(
        tmp_path / "bm25s.trec",
        corpus,
        queries,
        all_queries,
        top_k=1000,
        remove_self_matches=False,
        max_unknown_fraction=0.0,
    )
    assert report["rows_beyond_top_k"] > 0  # the file lists every matching document
    # The 809 queries without judgements are dropped (as trec_eval drops them), not unknown.
    assert report["unjudged"] == {"rows": 8090, "queries": 809}
    pd.testing.assert_frame_equal(theirs, ours)
    qrels = pd.read_parquet(tables / "qrels.parquet")
    measures = ["ndcg_cut.10", "map", "recall.100,1000"]
    pd.testing.assert_frame_equal(
        score_run(theirs, qrels, measures), score_run(ours, qrels, measures)
    )
    # pytrec_eval on the file as written (at every depth, so its cut cannot differ) agrees.
    judged = {q: dict(zip(g["doc_id"], g["relevance"])) for q, g in qrels.groupby("query_id")}
    file_run = pd.read_csv(tmp_path / "bm25s.trec", sep=" ", header=None, dtype={0: str, 2: str})
    evaluator = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut"})
    per_query = evaluator.evaluate(
        {q: dict(zip(g[2], g[4])) for q, g in file_run.groupby(0) if q in judged}
    )
    ours_ndcg = score_run(ours, qrels, ["ndcg_cut.10"]).query("metric == 'ndcg_cut_10'")
    assert {q: v["ndcg_cut_10"] for q, v in per_query.items()} == dict(
        zip(ours_ndcg["query_id"], ours_ndcg["value"])
    )


# --- through the workflow ---------------------------------------------------------------------


@pytest.mark.e2e
def test_one_external_run_on_one_query_runs_to_the_database(tmp_path):
    """The one-system, one-dataset, one-query case with a run made outside irflow: every
    stage copes, and the run is scored as its file says (a document of another corpus
    dropped and counted)."""

    from conftest import write_beir

    data = write_beir(
        tmp_path / "tiny",
        [{"_id": "d1", "title": "Cats", "text": "cats purr"}, {"_id": "d2", "text": "dogs"}],
        [{"_id": "q1", "text": "why do cats purr"}],
        [("q1", "d1", 1)],
    )
    write(tmp_path, "q1 Q0 d2 1 3.0 x\r\nq1 Q0 d1 2 2 x\r\nq1 Q0 other 3 1 x\r\n", "tiny.trec")
    config = {
        "offline": True,
        "datasets": {"tiny": {"source": {"type": "path", "path": str(data)}}},
        "retrievers": {
            "ext": {
                "type": "run",
                "path": str(tmp_path / "{dataset}.trec"),
                "max_unknown_fraction": 0.5,
            }
        },
    }
    snakemake(tmp_path, config=config)
    summary = pd.read_parquet(tmp_path / "results" / "summary.parquet")
    ndcg = summary.query("system == 'ext' and metric == 'ndcg_cut_10'")["value"]
    assert ndcg.tolist() == [pytest.approx(1 / np.log2(3), abs=1e-12)]
    manifest = json.loads(
        (tmp_path / "results" / "manifests" / "external_run" / "tiny" / "ext.json").read_text()
    )
    assert (manifest["unknown"]["rows"], manifest["crlf_lines"], manifest["rows"]) == (1, 3, 2)
    cost = pd.read_parquet(tmp_path / "results" / "cost.parquet")
    assert cost["kind"].tolist() == ["run"] and cost["latency_median_ms"].isna().all()


# --- streamed: memory bounded by top_k per query, not by the file ----------------------------


def whole_file_import(path: Path, dataset, top_k: int) -> pd.DataFrame:
    """The run as reading the whole file gives it: every judged, known row, self-matches
    removed, in trec_eval's order, cut to top_k."""
    corpus, queries, _ = dataset
    lines = pd.read_csv(path, sep=" ", header=None, dtype={0: str, 2: str})
    run = lines.rename(columns={0: "query_id", 2: "doc_id", 4: "score"})
    known = run["query_id"].isin(pd.read_parquet(queries)["query_id"])
    known &= run["doc_id"].isin(pd.read_parquet(corpus)["doc_id"])
    run = run[known & (run["query_id"] != run["doc_id"])]
    run = pd.DataFrame({name: run[name].to_numpy() for name in ("query_id", "doc_id", "score")})
    run = trec_order(run.astype({"score": "float64"}))
    return run[run["rank"] <= top_k].reset_index(drop=True)


@pytest.fixture
def tied_run(tmp_path) -> tuple[Path, tuple]:
    """A random run with many ties: judged, unjudged and unknown queries, unknown documents
    and self-matches (queries named as documents), its lines shuffled across queries."""
    rng = np.random.default_rng(7)
    docs = [f"d{i}" for i in range(150)]
    judged = [f"q{i}" for i in range(20)] + ["d3", "d40"]
    dataset = write_dataset(tmp_path / "tied", docs, judged, ["q90", "q91"])
    lines = []
    for query in [*judged, "q90", "q91", "q99"]:
        listed = rng.choice([*docs, "gone1", "gone2"], size=int(rng.integers(5, 80)), replace=False)
        listed = [query, *listed[listed != query]] if query in docs else listed
        for rank, doc in enumerate(listed, start=1):
            lines.append(f"{query} Q0 {doc} {rank} {rng.choice([0.5, 1, 1.5, 2.25])} t\n")
    rng.shuffle(lines)
    return write(tmp_path, "".join(lines), "tied.trec"), dataset


@pytest.mark.parametrize("name", ["tied.trec", "tied.trec.gz", "tied.parquet"])
def test_a_streamed_run_equals_the_whole_file_read_with_ties(tied_run, tmp_path, monkeypatch, name):
    path, dataset = tied_run
    if name.endswith(".gz"):
        path = write(tmp_path, gzip.compress(path.read_bytes()), name)
    elif name.endswith(".parquet"):
        frame = pd.read_csv(path, sep=" ", header=None, dtype={0: str, 2: str})
        frame = frame.rename(columns={0: "query_id", 2: "doc_id", 4: "score"})
        frame[["query_id", "doc_id", "score"]].to_parquet(tmp_path / name)
        path = tmp_path / name
    settings = {"top_k": 20, "remove_self_matches": True}
    whole, whole_report = imported(path, dataset, **settings)
    # Blocks of a few lines, and the kept rows cut every few dozen rows, so that every query's
    # top 20 is merged across many blocks and cuts.
    monkeypatch.setattr("irflow.retrieval.external_run.BLOCK_BYTES", 300)
    monkeypatch.setattr("irflow.retrieval.external_run.PARQUET_BATCH_ROWS", 13)
    monkeypatch.setattr("irflow.retrieval.external_run.CUT_ROWS", 50)
    streamed, report = imported(path, dataset, **settings)
    pd.testing.assert_frame_equal(streamed, whole_file_import(tmp_path / "tied.trec", dataset, 20))
    pd.testing.assert_frame_equal(streamed, whole)
    assert report == whole_report
    assert report["unknown"]["unknown_queries"] == 1 and report["unjudged"]["queries"] == 2
    assert report["self_matches_removed"] > 0 and report["rows_beyond_top_k"] > 0


def test_a_run_of_many_rows_for_few_queries_is_read_in_bounded_memory(tmp_path, monkeypatch):
    import tracemalloc

    docs = [f"d{i}" for i in range(25_000)]
    dataset = write_dataset(tmp_path / "wide", docs, ["q1", "q2", "q3", "q4"], [])
    rng = np.random.default_rng(0)
    scores = rng.random(100_000).round(3)
    with open(tmp_path / "wide.trec", "w") as out:
        for i, score in enumerate(scores):
            out.write(f"q{i % 4 + 1} Q0 d{i // 4} {i // 4 + 1} {score} t\n")
    size = (tmp_path / "wide.trec").stat().st_size
    monkeypatch.setattr("irflow.retrieval.external_run.BLOCK_BYTES", 2**16)
    monkeypatch.setattr("irflow.retrieval.external_run.CUT_ROWS", 2_000)
    imported(write(tmp_path, "q1 Q0 d1 1 1 t\n", "warm.trec"), dataset)  # modules loaded first
    tracemalloc.start()
    try:
        run, report = imported(tmp_path / "wide.trec", dataset, top_k=10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report["rows_read"] == 100_000 and len(run) == 40
    assert peak < size / 4, f"peak {peak} bytes for a {size}-byte file"


def test_a_line_past_the_cap_is_refused_before_the_rest_is_read(tmp_path, dataset):
    # A gzip bomb of one endless line, 64 MiB unpacked from 64 KB: refused at the cap.
    path = tmp_path / "bomb.trec.gz"
    with gzip.open(path, "wb") as bomb:
        bomb.write(GOOD.encode() + b"q1 Q0 ")
        for _ in range(64):
            bomb.write(b"d" * 2**20)
    with pytest.raises(InputError, match="longer than 1048576 bytes") as error:
        imported(path, dataset)
    assert error.value.line == 4


def test_a_pair_listed_again_blocks_later_names_both_lines(tmp_path, dataset, monkeypatch):
    monkeypatch.setattr("irflow.retrieval.external_run.BLOCK_BYTES", 40)
    monkeypatch.setattr("irflow.retrieval.external_run.CUT_ROWS", 2)
    text = GOOD + "q2 Q0 d1 2 0.1 sys\nq2 Q0 d2 3 0.0 sys\nq1 Q0 d2 4 9 sys\n"
    with pytest.raises(InputError, match=r"'d2' is listed again .*first on line 2") as error:
        imported(write(tmp_path, text), dataset)
    assert error.value.line == 6
