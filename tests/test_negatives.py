"""Hard-negative mining: never a positive, never a score above the cap, top-k by rank, and the
JSONL that sentence-transformers reads."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from bm25_index import bm25_run, indexed
from conftest import (
    REPO,
    SCHEMA,
    TINY_CORPUS,
    TINY_QRELS,
    TINY_QUERIES,
    minimal_config,
    snakemake,
    write_beir,
)

from irflow.core import contracts
from irflow.core.errors import ConfigError, DownloadError
from irflow.core.settings_types import FalseNegativeFilter, Negatives
from irflow.data.ingest import ingest
from irflow.derived.negatives import Teacher, mine, run_negatives, score_cap
from irflow.retrieval.retrieve import bm25_searcher
from irflow.retrieval.runs import SearchRequest
from irflow.workflow.config import validate_config
from irflow.workflow.families import family

SETTINGS = {
    "dataset": "d",
    "system": "bm25",
    "split": "test",
    "top_k": 6,
    "num_negatives": 3,
    "false_negative_filter": {"method": "none"},
    "near_duplicate_jaccard": None,
    "min_relevance": 1,
    "format": "triplet",
    "scores": False,
}
# q1: positives p1 (grade 1) and p2 (grade 2); n0 is judged non-relevant, so a fair negative.
RUN_ROWS = [
    ("q1", "p1", 10.0, 1),
    ("q1", "x1", 9.5, 2),
    ("q1", "p2", 9.0, 3),
    ("q1", "n0", 8.0, 4),
    ("q1", "x2", 7.0, 5),
    ("q1", "x3", 5.0, 6),
    ("q1", "x4", 4.0, 7),  # beyond top_k
    ("q2", "x1", 3.0, 1),
    ("q2", "x2", 2.0, 2),
]
QRELS_ROWS = [("q1", "p1", 1), ("q1", "p2", 2), ("q1", "n0", 0), ("q2", "p9", 1)]


def run_table(rows) -> pa.Table:
    return pa.Table.from_pylist(
        [dict(zip(contracts.RUN.names, row)) for row in rows], contracts.RUN
    )


def qrels_table(rows) -> pa.Table:
    return pa.Table.from_pylist(
        [{"query_id": q, "doc_id": d, "relevance": r} for q, d, r in rows],
        contracts.QRELS,
    )


# Distinct texts: no two documents share a word 5-gram.
DOCUMENTS = {
    d: f"{d} " + " ".join(f"{d}w{i}" for i in range(8))
    for d in ["p1", "p2", "p9", "n0", "x1", "x2", "x3", "x4"]
}


def typed(settings: dict) -> Negatives:
    """An export's block as mine takes it, typed (run_negatives types the job's params)."""
    return Negatives.model_validate(settings)


def mined(documents=DOCUMENTS, **settings):
    triples, counts = mine(
        run_table(RUN_ROWS), qrels_table(QRELS_ROWS), documents, typed(SETTINGS | settings)
    )
    return {
        (t["query_id"], t["positive_id"]): [doc_id for doc_id, _, _ in t["negatives"]]
        for t in triples
    }, counts


def test_positives_are_never_negatives_and_top_k_is_by_rank():
    triples, counts = mined()
    assert triples == {
        ("q1", "p1"): ["x1", "n0", "x2"],
        ("q1", "p2"): ["x1", "n0", "x2"],
        ("q2", "p9"): ["x1", "x2"],  # p9 was not retrieved; no relative cap asks for its score
    }
    assert counts["candidates_positive"] == 2
    assert mined(top_k=2)[0][("q1", "p1")] == ["x1"]


def absolute(max_score: float) -> dict:
    """Arctic-Embed's filter (§3.6): a fixed upper threshold on the teacher's score."""
    return {"false_negative_filter": {"method": "absolute", "max_score": max_score}}


def relative(ratio: float) -> dict:
    """NV-Retriever's TopK-PercPos: a share of the positive's score."""
    return {"false_negative_filter": {"method": "relative_to_positive", "ratio": ratio}}


def test_an_absolute_cap_drops_candidates_scoring_above_it():
    triples, counts = mined(**absolute(9.0))
    assert triples[("q1", "p1")] == ["n0", "x2", "x3"]  # x1 (9.5) is above the cap
    assert triples[("q1", "p2")] == ["n0", "x2", "x3"]  # the same cap, whatever the positive
    assert mined(**absolute(8.0))[0][("q1", "p1")] == ["n0", "x2", "x3"]  # the cap is inclusive
    assert counts["candidates_above_cap"] == 2  # x1, once for each of q1's positives
    # q2's p9 has no score (no scorer here) and needs none: its triple stands.
    assert triples[("q2", "p9")] == ["x1", "x2"] and counts["positives_not_scored"] == 1


def test_a_relative_cap_follows_each_positive_and_needs_its_score():
    triples, counts = mined(**relative(0.75))
    assert triples == {
        ("q1", "p1"): ["x2", "x3"],  # cap 7.5
        ("q1", "p2"): ["x3"],  # cap 6.75
    }
    # q2's p9 is not in the run and nothing scores it here: no cap, no triple, counted.
    assert counts["positives_not_retrieved"] == 1 == counts["positives_not_scored"]


def test_a_positive_missing_from_the_run_is_scored_directly():
    """p9 is outside q2's run: the scorer gives it 2.5, so its cap is 0.8 x 2.5 = 2.0."""
    asked = []

    def score(pairs):
        asked.extend(pairs)
        return {pair: 2.5 for pair in pairs}

    settings = SETTINGS | relative(0.8)
    triples, counts = mine(
        run_table(RUN_ROWS), qrels_table(QRELS_ROWS), DOCUMENTS, typed(settings), score
    )
    assert asked == [("q2", "p9")]  # run positives keep the run's scores
    q2 = next(t for t in triples if t["query_id"] == "q2")
    assert (q2["positive_score"], q2["positive_rank"]) == (2.5, None)
    assert q2["negatives"] == [("x2", 2.0, 2)]  # x1 (3.0) is above the cap
    assert counts["positives_scored_directly"] == 1 and counts["positives_not_scored"] == 0
    assert all(t["positive_rank"] is not None for t in triples if t["query_id"] == "q1")


def test_score_cap_is_the_named_method():
    def cap(method: dict, positive_score: float | None) -> float | None:
        return score_cap(FalseNegativeFilter.model_validate(method), positive_score)

    assert cap({"method": "none"}, 10.0) is None
    assert cap({"method": "absolute", "max_score": 6.0}, 10.0) == 6.0
    assert cap({"method": "absolute", "max_score": 6.0}, None) == 6.0
    # NV-Retriever: max_negative_score_threshold = pos_score * percentage_margin.
    assert cap({"method": "relative_to_positive", "ratio": 0.95}, 10.0) == 9.5
    # A negative score of -0.2 with 0.9: the cap is below the positive, as for positive scores.
    assert cap({"method": "relative_to_positive", "ratio": 0.9}, -0.2) == pytest.approx(-0.22)


def test_random_runs_never_yield_a_positive_or_a_score_above_the_cap():
    rng = random.Random(0)
    for _ in range(50):
        docs = [f"d{i}" for i in range(40)]
        run_rows, qrels_rows = [], []
        for q in range(5):
            hits = rng.sample(docs, 30)
            scores = sorted((rng.uniform(-1, 1) for _ in hits), reverse=True)
            run_rows += [(f"q{q}", d, s, r + 1) for r, (d, s) in enumerate(zip(hits, scores))]
            qrels_rows += [(f"q{q}", d, rng.choice([0, 1, 2])) for d in rng.sample(docs, 6)]
        method = rng.choice([absolute(rng.uniform(0, 1)), relative(0.9)])
        settings = typed(SETTINGS | {"top_k": 20, "num_negatives": 5} | method)
        documents = {d: f"text of {d}" for d in docs}
        triples, _ = mine(run_table(run_rows), qrels_table(qrels_rows), documents, settings)
        positives = {(q, d) for q, d, r in qrels_rows if r >= 1}
        scores = {(q, d): s for q, d, s, _ in run_rows}
        for triple in triples:
            positive_score = scores.get((triple["query_id"], triple["positive_id"]))
            cap = score_cap(settings.false_negative_filter, positive_score)
            assert 0 < len(triple["negatives"]) <= 5
            for doc_id, score, rank in triple["negatives"]:
                assert (triple["query_id"], doc_id) not in positives
                assert score <= cap and rank <= 20


def write_inputs(tmp_path):
    corpus_ids = ["p1", "p2", "n0", "x1", "x2", "x3", "x4"]
    corpus = pa.Table.from_pylist(
        [{"doc_id": d, "title": f"T{d}", "text": f"text of {d}"} for d in corpus_ids],
        contracts.CORPUS,
    )
    queries = pa.Table.from_pylist(
        [{"query_id": "q1", "text": "first query"}, {"query_id": "q2", "text": "second"}],
        contracts.QUERIES,
    )
    paths = {name: tmp_path / f"{name}.parquet" for name in ("run", "qrels", "queries", "corpus")}
    pq.write_table(run_table(RUN_ROWS), paths["run"])
    pq.write_table(qrels_table(QRELS_ROWS), paths["qrels"])
    pq.write_table(queries, paths["queries"])
    pq.write_table(corpus, paths["corpus"])
    return paths


def export(paths, settings, tmp_path):
    teacher = Teacher(pq.read_table(paths["run"]), pq.read_table(paths["qrels"]))
    outputs = (tmp_path / "n.parquet", tmp_path / "n.jsonl")
    return run_negatives(
        pq.read_table(paths["queries"]), paths["corpus"], settings, teacher, outputs
    )


def jsonl(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "n.jsonl").read_text().splitlines()]


def test_export_writes_parquet_and_triplet_jsonl(tmp_path):
    paths = write_inputs(tmp_path)
    counts = export(paths, SETTINGS | absolute(9.0), tmp_path)
    table = pq.read_table(tmp_path / "n.parquet").to_pylist()
    # q2's positive p9 is not in the corpus: no triple.
    assert [(r["query_id"], r["positive_id"], r["negative_ids"]) for r in table] == [
        ("q1", "p1", ["n0", "x2", "x3"]),
        ("q1", "p2", ["n0", "x2", "x3"]),
    ]
    first = table[0]
    assert first["positive"] == "Tp1 text of p1" and first["negatives"][0] == "Tn0 text of n0"
    assert first["negative_scores"] == [8.0, 7.0, 5.0] and first["negative_ranks"] == [4, 5, 6]
    assert first["positive_score"] == 10.0
    lines = jsonl(tmp_path)
    assert len(lines) == 6 == counts["jsonl_rows"]
    assert lines[0] == {
        "query": "first query",
        "positive": "Tp1 text of p1",
        "negative": "Tn0 text of n0",
    }
    assert counts["triples"] == 2 and counts["positives_not_in_corpus"] == 1


def test_n_tuple_jsonl_keeps_only_full_rows(tmp_path):
    paths = write_inputs(tmp_path)
    settings = SETTINGS | relative(0.75) | {"format": "n-tuple", "num_negatives": 2}
    counts = export(paths, settings, tmp_path)
    # p1 has two negatives (x2, x3); p2 only x3, so it is left out of the JSONL.
    assert jsonl(tmp_path) == [
        {
            "query": "first query",
            "positive": "Tp1 text of p1",
            "negative_1": "Tx2 text of x2",
            "negative_2": "Tx3 text of x3",
        }
    ]
    assert pq.read_table(tmp_path / "n.parquet").num_rows == 2
    assert counts["jsonl_left_out"] == 1 and counts["triples_short"] == 1


def test_scores_give_each_row_its_margins(tmp_path):
    paths = write_inputs(tmp_path)
    settings = SETTINGS | absolute(9.0) | {"format": "n-tuple", "scores": True}
    export(paths, settings, tmp_path)
    # p1 scores 10.0, p2 9.0; negatives n0, x2, x3 score 8.0, 7.0, 5.0.
    assert [row["label"] for row in jsonl(tmp_path)] == [[2.0, 3.0, 5.0], [1.0, 2.0, 4.0]]
    export(paths, settings | {"format": "triplet"}, tmp_path)
    assert [row["label"] for row in jsonl(tmp_path)][:3] == [2.0, 3.0, 5.0]


def test_documents_missing_from_the_corpus_are_dropped_before_the_cut():
    # x1 and n0 were filtered out of the corpus: the triple still gets three negatives.
    documents = {d: t for d, t in DOCUMENTS.items() if d not in ("x1", "n0")}
    triples, counts = mined(documents)
    assert triples[("q1", "p1")] == ["x2", "x3"]  # only x2, x3 remain in the top 6
    triples, counts = mined(documents, top_k=7)
    assert triples[("q1", "p1")] == ["x2", "x3", "x4"]
    assert counts["candidates_not_in_corpus"] == 3  # x1 and n0 for q1, x1 for q2


def test_a_copy_of_any_positive_is_never_a_negative():
    # x1 is an unjudged exact copy of p1, x2 a near copy of p2 (its last word changed: 35 of
    # 37 shingles shared, Jaccard 0.946).
    words = [f"w{i}" for i in range(40)]
    near = [*words[:-1], "changed"]
    documents = DOCUMENTS | {
        "p1": " ".join(reversed(words)),
        "x1": " ".join(reversed(words)),
        "p2": " ".join(words),
        "x2": " ".join(near),
    }
    triples, counts = mined(documents, near_duplicate_jaccard=0.8)
    assert triples[("q1", "p1")] == ["n0", "x3"] == triples[("q1", "p2")]
    assert counts["candidates_near_duplicate"] == 2
    assert mined(documents, near_duplicate_jaccard=None)[0][("q1", "p1")] == ["x1", "n0", "x2"]
    # Above x2's Jaccard it is a fair negative again; the exact copy x1 never is.
    assert mined(documents, near_duplicate_jaccard=0.95)[0][("q1", "p1")] == ["n0", "x2", "x3"]


def test_the_curation_config_mines_as_arctic_top_100_and_only_an_upper_threshold():
    """Arctic-Embed: "in practice, we retrieved the top 100 hardest negatives and applied only
    an upper threshold" (arctic-embed.txt, line 57). config/curation.yaml mines so: top 100, an
    absolute cap, no near-duplicate filter; with its settings a candidate above the cap goes and
    a copy of the positive under it stays. (Before: NV-Retriever's cap relative to the positive
    and irflow's near-duplicate filter at Jaccard 0.8.)"""
    from irflow.workflow.config import expand_config

    raw = yaml.safe_load((REPO / "config" / "curation.yaml").read_text())
    (export,) = validate_config(expand_config(raw), SCHEMA)["negatives"].values()
    assert export["top_k"] == 100 and export["near_duplicate_jaccard"] is None
    assert export["false_negative_filter"] == {"method": "absolute", "max_score": 13.0}
    assert export["consistency"] is None
    cap = export["false_negative_filter"]["max_score"]
    rows = [("q1", "p1", cap + 5, 1), ("q1", "x1", cap + 1, 2), ("q1", "x2", cap, 3)]
    rows += [("q1", f"y{i}", cap - 1 - i, 4 + i) for i in range(12)]
    documents = {d: f"{d} " + " ".join(f"{d}w{i}" for i in range(8)) for _, d, _, _ in rows}
    documents["x2"] = documents["p1"]  # an unjudged copy of the positive, under the cap
    settings = {**SETTINGS, **{k: export[k] for k in ("top_k", "false_negative_filter")}}
    settings |= {"near_duplicate_jaccard": export["near_duplicate_jaccard"], "num_negatives": 10}
    triples, counts = mine(
        run_table(rows), qrels_table([("q1", "p1", 1)]), documents, typed(settings)
    )
    negatives = [doc_id for doc_id, _, _ in triples[0]["negatives"]]
    assert negatives == ["x2", *[f"y{i}" for i in range(9)]]  # x1 (above the cap) is gone
    assert counts["candidates_above_cap"] == 1 and counts["candidates_near_duplicate"] == 0


BASE = minimal_config()


def test_defaults_are_nv_retrievers_cap_without_arctics_absent_filters_and_errors_name_the_key():
    """Arctic-Embed applies "only an upper threshold" (arctic-embed.txt, line 57): no
    near-duplicate filter by default (before: Jaccard 0.8), none for consistency. The upper
    threshold's default stays NV-Retriever's relative cap: Arctic's is on its teacher's scale
    and the paper gives no value (config/curation.yaml names one for its teacher)."""
    schema, base = SCHEMA, BASE
    curated = {"curate": {"d-clean": {"dataset": "d"}}}
    config = validate_config(
        base | curated | {"negatives": {"n": {"dataset": "d-clean", "system": "bm25"}}}, schema
    )
    assert config["negatives"]["n"] | {"dataset": None, "system": None} == {
        "dataset": None,
        "system": None,
        "split": "train",
        "top_k": 100,
        "num_negatives": 10,
        "false_negative_filter": {"method": "relative_to_positive", "ratio": 0.95},
        "near_duplicate_jaccard": None,
        "consistency": None,
        "min_relevance": 1,
        "format": "n-tuple",
        "scores": False,
    }
    with pytest.raises(
        ConfigError, match=r"'negatives\.n\.system': 'dense' is not a key of 'systems'"
    ):
        validate_config(base | {"negatives": {"n": {"dataset": "d", "system": "dense"}}}, schema)
    with pytest.raises(ConfigError, match=r"'negatives\.n\.format': 'pairs' is not allowed"):
        spec = {"dataset": "d", "system": "bm25", "format": "pairs"}
        validate_config(base | {"negatives": {"n": spec}}, schema)
    for method, problem in [
        ({"method": "relative_to_positive", "ratio": 1.5}, r"\.ratio': 1\.5 is greater"),
        ({"method": "absolute"}, r"\.max_score' is missing"),
        ({"method": "absolute", "max_score": 1.0, "ratio": 0.9}, r"\.ratio'"),
        ({"method": "percent"}, r"\.method': 'percent' is not allowed"),
    ]:
        spec = {"dataset": "d", "system": "bm25", "false_negative_filter": method}
        with pytest.raises(ConfigError, match=r"'negatives\.n\.false_negative_filter" + problem):
            validate_config(base | {"negatives": {"n": spec}}, schema)
    spec = {"dataset": "d", "system": "bm25", "false_negative_filter": {"method": "none"}}
    assert validate_config(base | {"negatives": {"n": spec}}, schema)["negatives"]
    with pytest.raises(ConfigError, match=r"'curate\.d': the name is already a dataset's"):
        validate_config(base | {"curate": {"d": {"dataset": "d"}}}, schema)
    # Another split than the scored one is retrieved in the job, by the system's searcher: a
    # dense retriever has one, a run imported from outside none.
    models = {"models": {"m": {"id": "x"}}}
    dense = models | {"retrievers": {"dense": {"type": "dense", "model": "m"}}}
    spec = {"dataset": "d", "system": "dense"}
    assert validate_config(base | dense | {"negatives": {"n": spec}}, schema)["negatives"]
    sparse = {"retrievers": {"s": {"type": "run", "path": "r.trec"}}}
    with pytest.raises(ConfigError, match=r"'negatives\.n\.system': 's' is a run system"):
        validate_config(
            base | sparse | {"negatives": {"n": {"dataset": "d", "system": "s"}}}, schema
        )
    spec = {"dataset": "d", "system": "s", "split": "test"}
    assert validate_config(base | sparse | {"negatives": {"n": spec}}, schema)["negatives"]


def test_another_split_is_read_from_the_dataset_folder_and_retrieved(tmp_path, tiny_beir):
    """Train queries are mined, never the scored test ones, from the corpus given."""
    train_qrels = [("q2", "d4", 1)]
    write_beir(tiny_beir, TINY_CORPUS, TINY_QUERIES, train_qrels, split="train")
    ingest(
        tiny_beir / "corpus.jsonl",
        tiny_beir / "queries.jsonl",
        tiny_beir / "qrels" / "test.tsv",
        tmp_path,
    )
    source = tmp_path / "source.json"
    record = {"layout": "beir", "qrels": str(tiny_beir / "qrels" / "test.tsv")}
    source.write_text(json.dumps(record))
    bm25 = validate_config(BASE, SCHEMA)["retrievers"]["bm25"]
    index, _ = indexed(tmp_path / "corpus.parquet", bm25)
    settings = SETTINGS | {"split": "train"}
    queries = pq.read_table(tmp_path / "queries.parquet")
    searcher = bm25_searcher(index, bm25)

    def teacher(split: str) -> Teacher:
        return Teacher.searching(queries, source, split, searcher, SearchRequest(10, False))

    outputs = (tmp_path / "n.parquet", tmp_path / "n.jsonl")
    counts = run_negatives(
        queries, tmp_path / "corpus.parquet", settings, teacher("train"), outputs
    )
    rows = pq.read_table(tmp_path / "n.parquet").to_pylist()
    assert [(r["query_id"], r["positive_id"]) for r in rows] == [("q2", "d4")]
    assert counts["queries"] == 1 and counts["split"] == "train"
    # "what is the sun": BM25 finds d3 and d1; d3, q2's positive in test, is unjudged in train.
    assert sorted(rows[0]["negative_ids"]) == ["d1", "d3"]
    assert rows[0]["negative_scores"] == sorted(rows[0]["negative_scores"], reverse=True)
    with pytest.raises(DownloadError, match="qrels/dev.tsv"):
        teacher("dev")


def test_a_users_own_retriever_mines_another_split_with_its_familys_searcher(tmp_path, tiny_beir):
    """A retriever class of the user's (type python) has a searcher like any family's: the
    config takes it for the train split, and it mines the train queries it searches itself
    (a document scores the distinct query words it holds)."""
    write_beir(tiny_beir, TINY_CORPUS, TINY_QUERIES, [("q2", "d4", 1)], split="train")
    ingest(*(tiny_beir / n for n in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")), tmp_path)
    source = tmp_path / "source.json"
    source.write_text(json.dumps({"layout": "beir", "qrels": str(tiny_beir / "qrels/test.tsv")}))
    overlap = {"type": "python", "class": "term_overlap_retriever:TermOverlap"}
    config = validate_config(
        BASE
        | {"retrievers": {"overlap": overlap}}
        | {"negatives": {"n": {"dataset": "d", "system": "overlap"}}},
        SCHEMA,
    )
    retrieval = {"retriever": config["retrievers"]["overlap"], "top_k": 10}
    retrieval["remove_self_matches"] = False
    files = {"corpus": tmp_path / "corpus.parquet"}
    searcher = family("python").open_searcher(files, retrieval, 1)
    queries = pq.read_table(tmp_path / "queries.parquet")
    request = SearchRequest.of(retrieval)
    teacher = Teacher.searching(queries, source, "train", searcher, request)
    settings = SETTINGS | {"split": "train", "false_negative_filter": {"method": "none"}}
    outputs = (tmp_path / "n.parquet", tmp_path / "n.jsonl")
    counts = run_negatives(queries, tmp_path / "corpus.parquet", settings, teacher, outputs)
    rows = pq.read_table(outputs[0]).to_pylist()
    # "what is the sun": d3 holds 3 of its words (is, the, sun), d1 2, d2 1; d4, the
    # positive, 1.
    assert [(r["query_id"], r["positive_id"]) for r in rows] == [("q2", "d4")]
    assert rows[0]["negative_ids"] == ["d3", "d1", "d2"]
    assert rows[0]["negative_scores"] == [3.0, 2.0, 1.0] and counts["split"] == "train"


def test_a_positive_bm25_did_not_retrieve_gets_the_score_bm25_gives_it(tmp_path, tiny_beir):
    """Train split, q2 ("what is the sun") with positive d1, BM25 cut at its top 1 (d3): d1
    still makes its triple, with the score BM25's own search gives d1 at full depth."""
    write_beir(tiny_beir, TINY_CORPUS, TINY_QUERIES, [("q2", "d1", 1)], split="train")
    ingest(*(tiny_beir / n for n in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")), tmp_path)
    source = tmp_path / "source.json"
    source.write_text(json.dumps({"layout": "beir", "qrels": str(tiny_beir / "qrels/test.tsv")}))
    bm25 = validate_config(BASE, SCHEMA)["retrievers"]["bm25"]
    full, _ = bm25_run(tmp_path / "corpus.parquet", tmp_path / "queries.parquet", bm25, 10, False)
    full = full[full["query_id"] == "q2"].set_index("doc_id")["score"]
    assert list(full.index) == ["d3", "d1"]  # d1 is second: outside a top 1

    def export(method: dict, **settings) -> tuple[list[dict], dict]:
        queries = pq.read_table(tmp_path / "queries.parquet")
        searcher = bm25_searcher(indexed(tmp_path / "corpus.parquet", bm25)[0], bm25)
        teacher = Teacher.searching(queries, source, "train", searcher, SearchRequest(1, False))
        counts = run_negatives(
            queries,
            tmp_path / "corpus.parquet",
            SETTINGS | {"split": "train", "top_k": 1} | method | settings,
            teacher,
            (tmp_path / "n.parquet", tmp_path / "n.jsonl"),
        )
        return pq.read_table(tmp_path / "n.parquet").to_pylist(), counts

    rows, counts = export(absolute(100.0), scores=True)
    assert [(r["query_id"], r["positive_id"], r["negative_ids"]) for r in rows] == [
        ("q2", "d1", ["d3"])
    ]
    assert rows[0]["positive_score"] == pytest.approx(full["d1"], rel=1e-6)
    assert rows[0]["positive_rank"] is None
    assert counts["positives_scored_directly"] == 1 and counts["jsonl_rows"] == 1
    label = json.loads((tmp_path / "n.jsonl").read_text())["label"]
    assert label == pytest.approx(full["d1"] - full["d3"], rel=1e-6)
    # TopK-PercPos with the same teacher: every candidate of its run scores at least the
    # missing positive, so none is below 0.95 of it. Counted as such, not as unscored.
    rows, counts = export(relative(0.95))
    assert rows == [] and counts["triples_without_negatives"] == 1
    assert counts["positives_not_scored"] == 0


def test_a_dense_teacher_scores_a_missing_positive_by_its_best_passage(tmp_path):
    """Inner products of the stored vectors; with passages, the document's best passage."""
    from irflow.derived.negatives import PositiveScores

    def vectors(path, rows):
        ids, matrix = zip(*rows)
        table = pa.table(
            {"id": pa.array(ids, pa.string()), "vector": contracts.vector_array(np.array(matrix))},
            schema=contracts.embeddings_schema(2),
        )
        pq.write_table(table, path)
        return path

    queries = vectors(tmp_path / "q.parquet", [("q1", [1.0, 0.0]), ("q2", [0.0, 1.0])])
    documents = vectors(
        tmp_path / "d.parquet", [("a#0", [0.2, 0.9]), ("a#1", [0.7, 0.1]), ("b#0", [0.3, 0.4])]
    )
    passages = tmp_path / "p.parquet"
    rows = [("a#0", "a"), ("a#1", "a"), ("b#0", "b")]
    pq.write_table(
        pa.Table.from_pylist(
            [{"passage_id": p, "doc_id": d, "title": "", "text": ""} for p, d in rows],
            contracts.PASSAGES,
        ),
        passages,
    )
    dense = {"type": "dense"}
    files = {"queries": queries, "documents": documents, "passages": passages}
    query_table = pa.table({"query_id": ["q1", "q2"], "text": ["x", "y"]})
    scorer = PositiveScores.of(dense, query_table, files)
    scores = scorer([("q1", "a"), ("q2", "a"), ("q1", "b")])
    assert scores == pytest.approx({("q1", "a"): 0.7, ("q2", "a"): 0.9, ("q1", "b"): 0.3})
    # A fusion or reranked system (no retriever spec) is not scored directly.
    assert PositiveScores.of(None, query_table) is None


@pytest.mark.e2e
def test_curated_dataset_and_negatives_run_through_the_graph(tmp_path, tiny_beir):
    """A small Snakemake run on the tiny dataset with BM25: the curated copy is filtered with
    its own block; the negatives export mines the curated copy's train split, a second one the
    scored split with warnings; the summary counts both datasets."""
    corpus = [dict(doc) for doc in TINY_CORPUS] + [
        {"_id": "copy", "title": "Cats", "text": "Cats purr and sleep in the sun."},
    ]
    write_beir(tiny_beir, corpus, TINY_QUERIES, TINY_QRELS)
    write_beir(tiny_beir, corpus, TINY_QUERIES, [("q2", "d4", 1)], split="train")
    config = {
        "datasets": {"tiny": {"source": {"type": "path", "path": str(tiny_beir)}}},
        "retrievers": {"bm25": {"type": "bm25"}},
        "curate": {
            "tiny-curated": {
                "dataset": "tiny",
                "filter": {"near_duplicates": {"enabled": True, "threshold": 0.9}},
            }
        },
        "negatives": {
            # d4 shares no term with q2: scored directly it gets 0, and a relative cap would
            # leave it no negative.
            "tiny-bm25": {
                "dataset": "tiny-curated",
                "system": "bm25",
                "format": "triplet",
                "false_negative_filter": {"method": "none"},
            },
            # irflow's near-duplicate filter, a named variant (Arctic has none).
            "tiny-test": {
                "dataset": "tiny",
                "system": "bm25",
                "split": "test",
                "near_duplicate_jaccard": 0.8,
            },
        },
    }
    targets = [
        "results/filter_summary.parquet",
        "results/negatives/tiny-bm25.parquet",
        "results/negatives/tiny-test.parquet",
    ]
    snakemake(tmp_path, *targets, config=config, cores="1")
    results = tmp_path / "results"
    summary = {
        (r["dataset"], r["filter"]): (r["dropped"], r["documents_out"], r["clusters"])
        for r in pq.read_table(results / "filter_summary.parquet").to_pylist()
    }
    # The judged d1 is kept; its unjudged copy goes, in the curated dataset only.
    assert summary == {
        ("tiny", "total"): (0, 5, 0),
        ("tiny-curated", "near_duplicate"): (1, 4, 1),
        ("tiny-curated", "total"): (1, 4, 1),
    }
    curated = pq.read_table(results / "datasets/tiny-curated/filtered/corpus.parquet")
    assert "copy" not in curated.column("doc_id").to_pylist()
    # Train split, curated corpus: q2 ("what is the sun") with d4; "copy" is gone.
    negatives = pq.read_table(results / "negatives/tiny-bm25.parquet").to_pylist()
    assert [(row["query_id"], row["positive_id"]) for row in negatives] == [("q2", "d4")]
    assert sorted(negatives[0]["negative_ids"]) == ["d1", "d3"]
    lines = (results / "negatives/tiny-bm25.jsonl").read_text().splitlines()
    assert len(lines) == 2
    manifest = json.loads((results / "manifests/negatives/tiny-bm25.json").read_text())
    assert manifest["warnings"] == [] and manifest["split"] == "train"
    # The scored split of the uncurated dataset: both warnings, test positives only, and
    # "copy", an unjudged copy of q1's positive d1, is never a negative.
    test = pq.read_table(results / "negatives/tiny-test.parquet").to_pylist()
    positives = {(q, d) for q, d, r in TINY_QRELS if r > 0}
    assert {(row["query_id"], row["positive_id"]) for row in test} <= positives
    assert "copy" not in {doc_id for row in test for doc_id in row["negative_ids"]}
    manifest = json.loads((results / "manifests/negatives/tiny-test.json").read_text())
    assert manifest["candidates_near_duplicate"] == 1  # "copy", for q1
    assert len(manifest["warnings"]) == 2
    assert "'test'" in manifest["warnings"][0] and "tiny-curated" in manifest["warnings"][1]


def scifact_train_slice(shared: Path, folder: Path, queries: int, documents: int) -> Path:
    """SciFact's first ``queries`` train queries (qrels/train.tsv) and their positives, its
    first 5 test queries (the scored split) and theirs, and other documents up to
    ``documents``: a BEIR folder with both splits."""
    splits = {
        split: [
            line.split("\t")
            for line in (shared / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]
        ]
        for split in ("train", "test")
    }
    for split, count in (("train", queries), ("test", 5)):
        asked = list(dict.fromkeys(row[0] for row in splits[split]))[:count]
        splits[split] = [tuple(row) for row in splits[split] if row[0] in asked]
    relevant = {row[1] for rows in splits.values() for row in rows}
    with gzip.open(shared / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        corpus = [json.loads(line) for line in lines]
    kept = [doc for doc in corpus if doc["_id"] in relevant]
    kept += [doc for doc in corpus if doc["_id"] not in relevant][: documents - len(kept)]
    asked = {row[0] for rows in splits.values() for row in rows}
    all_queries = [json.loads(line) for line in (shared / "queries.jsonl").open(encoding="utf-8")]
    chosen = [q for q in all_queries if q["_id"] in asked]
    for split, rows in splits.items():
        write_beir(folder, kept, chosen, rows, split=split)
    return folder


@pytest.mark.e2e
def test_a_dense_teacher_mines_scifacts_train_split_through_the_workflow(
    shared_datasets, minilm_path, tmp_path
):
    """all-MiniLM-L6-v2 mines SciFact's train split (not the scored test split) in the
    negatives job: its searcher encodes the train queries and searches the workflow's index.
    No negative is a positive of its query, and the negatives are the dense ranking's: a direct
    search (the model's own encoding of the queries against the stored document vectors)
    ranks them in the same order with the same scores, each the best ranked candidate that is
    no positive and scores at most 0.95 of the positive (the default cap)."""
    from sentence_transformers import SentenceTransformer

    from irflow.encoding.embed import read_embeddings

    data = scifact_train_slice(shared_datasets / "scifact", tmp_path / "scifact", 20, 150)
    export = {"dataset": "sf", "system": "mini", "top_k": 30, "num_negatives": 5}
    config = {
        "offline": True,
        "datasets": {"sf": {"source": {"type": "path", "path": str(data)}}},
        "models": {"mini": {"id": str(minilm_path)}},
        "retrievers": {"mini": {"type": "dense", "model": "mini"}},
        "negatives": {"sf-train": export | {"near_duplicate_jaccard": None}},
    }
    snakemake(tmp_path, "results/negatives/sf-train.parquet", config=config)
    rows = pq.read_table(tmp_path / "results/negatives/sf-train.parquet").to_pylist()
    train = {}
    for line in (data / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        query_id, doc_id, relevance = line.split("\t")
        if int(relevance) >= 1:
            train.setdefault(query_id, set()).add(doc_id)
    assert {row["query_id"] for row in rows} <= set(train) and len(rows) >= 15
    assert sum(len(row["negative_ids"]) for row in rows) >= 50
    for row in rows:
        assert row["positive_id"] in train[row["query_id"]]
        assert not set(row["negative_ids"]) & train[row["query_id"]]
    # The direct search: the stored document vectors (the index's rows), the queries encoded
    # by sentence-transformers itself.
    doc_ids, documents = read_embeddings(tmp_path / "results/embeddings/sf/mini/corpus.parquet")
    texts = {
        q["_id"]: q["text"]
        for q in map(json.loads, (data / "queries.jsonl").read_text().splitlines())
    }
    model = SentenceTransformer(str(minilm_path), device="cpu")
    asked = sorted(train)
    scores = dict(zip(asked, model.encode([texts[q] for q in asked]) @ documents.T))
    for row in rows:
        query = scores[row["query_id"]]
        positive = query[doc_ids.index(row["positive_id"])]
        assert row["positive_score"] == pytest.approx(positive, abs=1e-4)
        cap = positive - abs(positive) * 0.05
        top = [doc_ids[i] for i in np.argsort(-query)[:30]]
        allowed = [
            doc
            for doc in top
            if doc not in train[row["query_id"]] and query[doc_ids.index(doc)] <= cap
        ]
        assert row["negative_ids"] == allowed[:5]
        expected = [query[doc_ids.index(doc)] for doc in row["negative_ids"]]
        assert row["negative_scores"] == pytest.approx(expected, abs=1e-4)
        assert row["negative_ranks"] == [top.index(doc) + 1 for doc in row["negative_ids"]]
