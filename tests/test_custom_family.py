"""A retriever family of the user's: a class outside irflow named by ``type: python`` or
installed as an ``irflow.retrievers`` entry point, checked when the config is validated and
run by the workflow like any retriever (docs/retrievers.md). The workflow run (conftest's
user_plugins_run, shared with tests/test_sources.py) also reranks with a reranker class of the
user's (tests/test_custom_reranker.py tests its type) and fetches its dataset by a source type
of the user's."""

from __future__ import annotations

import json
import os
import re
import shlex
from importlib.metadata import EntryPoint
from itertools import combinations

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import (
    SCHEMA,
    TESTS,
    TINY_CORPUS,
    USER_RERANKER,
    USER_RETRIEVER,
    fake_entry_points,
    minimal_config,
)

from irflow.core import contracts
from irflow.core.errors import ConfigError
from irflow.core.records import check
from irflow.retrieval.custom import custom_search
from irflow.workflow import families
from irflow.workflow.config import validate_config

OVERLAP, DENSITY = USER_RETRIEVER, USER_RERANKER
RERANKED = "bm25+density@3"


@pytest.fixture(autouse=True)
def tests_on_path(monkeypatch):
    """The retriever's module is importable as a user's would be: its folder on sys.path. The
    entry points are listed again after the test (each test lists its own)."""
    monkeypatch.syspath_prepend(str(TESTS))
    yield
    families.FAMILIES.installed.cache_clear()


def validated(retriever: dict) -> dict:
    config = minimal_config(retrievers={"mine": retriever})
    return validate_config(config, SCHEMA)


def test_a_python_class_is_a_retriever_with_its_settings():
    config = validated({"type": "python", "class": OVERLAP, "settings": {"lowercase": False}})
    assert config["retrievers"]["mine"]["settings"] == {"lowercase": False}
    assert validated({"type": "python", "class": OVERLAP})["retrievers"]["mine"]["settings"] == {}


@pytest.mark.parametrize(
    "reference, says",
    [
        (
            "no_such_module:Retriever",
            "config key 'retrievers.mine.class': cannot import 'no_such_module:Retriever' "
            "(ModuleNotFoundError: No module named 'no_such_module'); install its package or "
            "put its folder on PYTHONPATH",
        ),
        (
            "term_overlap_retriever:Missing",
            "config key 'retrievers.mine.class': cannot import 'term_overlap_retriever:Missing' "
            "(AttributeError:",
        ),
        (
            "term_overlap_retriever:NoSearch",
            "config key 'retrievers.mine.class': term_overlap_retriever.NoSearch does not "
            "implement irflow's retriever protocol (irflow.retrieval.custom.Retriever): no "
            "method search",
        ),
        ("term_overlap_retriever:words", "is not a class"),
    ],
)
def test_a_class_that_does_not_import_or_retrieve_is_refused_naming_its_key(reference, says):
    with pytest.raises(ConfigError) as error:
        validated({"type": "python", "class": reference})
    assert says in str(error.value)


def test_a_class_reference_without_its_colon_is_refused_by_the_schema():
    with pytest.raises(ConfigError, match="retrievers.mine.class"):
        validated({"type": "python", "class": "term_overlap_retriever.TermOverlap"})


def test_an_entry_point_is_a_retriever_type_of_its_own(monkeypatch):
    fake_entry_points(
        monkeypatch, families.FAMILIES, EntryPoint("overlap", OVERLAP, "irflow.retrievers")
    )
    config = validated({"type": "overlap", "settings": {"lowercase": False}})
    family = families.family("overlap")
    assert family.search_rule == families.family("python").search_rule
    retriever = family.user_class(config["retrievers"]["mine"])
    assert retriever.__name__ == "TermOverlap"
    with pytest.raises(ConfigError, match="'class' was unexpected"):  # the point names it
        validated({"type": "overlap", "class": OVERLAP})


def test_an_entry_point_that_does_not_load_or_takes_a_built_in_name_is_refused(monkeypatch):
    fake_entry_points(
        monkeypatch,
        families.FAMILIES,
        EntryPoint("broken", "no_such_module:X", "irflow.retrievers"),
    )
    with pytest.raises(ConfigError) as error:
        validated({"type": "broken"})
    assert "config key 'retrievers.mine.type': cannot import 'no_such_module:X'" in str(error.value)
    fake_entry_points(
        monkeypatch, families.FAMILIES, EntryPoint("bm25", OVERLAP, "irflow.retrievers")
    )
    with pytest.raises(ConfigError, match="entry point 'bm25' .* built-in retriever type"):
        validated({"type": "bm25"})


def test_without_the_entry_point_its_type_is_refused_with_the_types_allowed(monkeypatch):
    fake_entry_points(monkeypatch, families.FAMILIES)
    with pytest.raises(ConfigError, match="'overlap' is not allowed; allowed values: 'bm25'"):
        validated({"type": "overlap"})


def test_every_family_has_its_fragment_among_a_retrievers_choices():
    """The schema and the registry name the same families: the schema's retriever choices
    are the built-in families' fragments, each fixing its type."""
    choices = SCHEMA["properties"]["retrievers"]["additionalProperties"]["oneOf"]
    assert [c["$ref"].rsplit("/", 1)[-1] for c in choices] == sorted(
        (f.schema_def for f in families.FAMILIES.built_in().values()),
        key=[c["$ref"].rsplit("/", 1)[-1] for c in choices].index,
    )
    for family in families.FAMILIES.built_in().values():
        assert SCHEMA["$defs"][family.schema_def]["properties"]["type"] == {"const": family.type}


def test_a_custom_retriever_gives_the_run_contract(tmp_path):
    """Ranked as trec_eval ranks, cut to top_k, its own id removed, timed as BM25 is."""
    corpus = pa.table(
        {
            "doc_id": [d["_id"] for d in TINY_CORPUS] + ["q2"],
            "title": [d["title"] for d in TINY_CORPUS] + [""],
            "text": [d["text"] for d in TINY_CORPUS] + ["dogs bark"],
        }
    )
    queries = pa.table({"query_id": ["q1", "q2"], "text": ["the sun", "dogs bark"]})
    pq.write_table(corpus, tmp_path / "corpus.parquet")
    pq.write_table(queries, tmp_path / "queries.parquet")
    from term_overlap_retriever import TermOverlap

    run, timing = custom_search(
        TermOverlap(), tmp_path / "corpus.parquet", tmp_path / "queries.parquet", 1, True, 2
    )
    assert list(run.columns) == contracts.RUN.names
    pa.Table.from_pandas(run, contracts.RUN, preserve_index=False)  # the contract's types
    # q1: d1 and d3 both hold "the" and "sun" (score 2); the tie goes to the larger doc id, as
    # in trec_eval.
    assert run[["query_id", "doc_id", "score", "rank"]].values.tolist() == [
        ["q1", "d3", 2.0, 1],
        ["q2", "d2", 2.0, 1],
    ]
    assert timing["self_matches_removed"] == 1 and set(timing["latency"]) == {"q1", "q2"}
    assert timing["index_seconds"] >= 0
    check({"stage": "retrieve", "settings": {}, "device": "cpu", "rows": len(run)} | timing)


@pytest.mark.e2e
def test_a_python_retriever_runs_through_scores_significance_database_and_report(
    user_plugins_run, monkeypatch
):
    """The workflow runs a retriever of the user's beside BM25 with no change to irflow."""
    results = user_plugins_run / "results"
    summary = pd.read_parquet(results / "summary.parquet")
    ndcg = summary.query("metric == 'ndcg_cut_10'").set_index("system")["value"]
    assert ndcg["overlap"] == pytest.approx(1.0)  # each query's own document shares most words
    significance = pd.read_parquet(results / "significance.parquet")
    pairs = {frozenset(pair) for pair in zip(significance["system_a"], significance["system_b"])}
    assert pairs == {frozenset(pair) for pair in combinations(["bm25", "overlap", RERANKED], 2)}
    monkeypatch.chdir(user_plugins_run)  # the database's views read results/ from where it is
    with duckdb.connect("results/irflow.duckdb", read_only=True) as db:
        kinds = dict(db.sql("select system, kind from cost where dataset = 'tiny'").fetchall())
        runs = db.sql("select count(*) from runs where system = 'overlap'").fetchall()[0][0]
    assert kinds == {"bm25": "bm25", "overlap": "python", RERANKED: "rerank"} and runs > 0
    text = (results / "results.md").read_text()
    # Each system against the baseline, BM25 (issue 51: results.md had no significance).
    against = text.split("\n## Against the baseline, bm25\n", 1)[1]
    rows = re.findall(r"^\| (\S+) \| tiny \| ([-+]\d\.\d{4}) \|", against, re.M)
    assert {system for system, _ in rows} == {"overlap", RERANKED}
    wins = significance.query("family == 'against bm25'").set_index("system_b")["b_minus_a"]
    assert {system: float(value) for system, value in rows} == pytest.approx(
        wins.to_dict(), abs=5e-5
    )


@pytest.mark.e2e
def test_the_printed_report_command_carries_the_run_s_pythonpath(user_plugins_run):
    """The run had PYTHONPATH for its classes, which --report imports too (issue 51: the
    printed command omitted it, so pasting it failed)."""
    printed = (user_plugins_run / "output.txt").read_text(encoding="utf-8")
    [command] = re.findall(r"is made by:\n +(.+)\n", printed)
    words = shlex.split(command)
    site = user_plugins_run / "site"
    assert words[0] == f"PYTHONPATH={TESTS}{os.pathsep}{site}" and "--report" in words


@pytest.mark.e2e
def test_a_python_reranker_runs_through_rerank_scores_and_database(user_plugins_run, monkeypatch):
    """The workflow reranks BM25's run with a reranker of the user's (one class), scores it
    and files it in the database, with no change to irflow. On irflow before reranker types
    were a registry, the config was refused: "config key 'rerankers.density.type': 'python' is
    not allowed; allowed values: 'cross-encoder', 'bi-encoder', 'late-interaction'"."""
    results = user_plugins_run / "results"
    first = pd.read_parquet(results / "runs" / "tiny" / "bm25.parquet")
    run = pd.read_parquet(results / "runs" / "tiny" / f"{RERANKED}.parquet")
    corpus = pd.read_parquet(results / "datasets" / "tiny" / "filtered" / "corpus.parquet")
    texts = dict(zip(corpus["doc_id"], contracts.document_texts(corpus["title"], corpus["text"])))
    queries = pd.read_parquet(results / "datasets" / "tiny" / "filtered" / "queries.parquet")
    from word_overlap_reranker import WordDensity

    # Each of BM25's top 3 scores what the class gives its text, ranked as trec_eval ranks.
    for query_id, text in zip(queries["query_id"], queries["text"]):
        top = first[first["query_id"] == query_id].nsmallest(3, "rank")["doc_id"].tolist()
        got = run[run["query_id"] == query_id].sort_values("rank")
        expected = dict(zip(top, WordDensity().score(text, [texts[d] for d in top])))
        assert dict(zip(got["doc_id"], got["score"])) == expected
        # Higher scores first, a tie to the larger doc id (trec_eval's order).
        order = sorted(expected, key=lambda d: (expected[d], d), reverse=True)
        assert got["doc_id"].tolist() == order
    manifest = results / "manifests" / "rerank" / "tiny" / f"{RERANKED}.json"
    manifest = json.loads(manifest.read_text())
    assert (manifest["class"], manifest["device"], manifest["k"]) == (DENSITY, "cpu", 3)
    scores = pd.read_parquet(results / "scores" / "tiny" / f"{RERANKED}.parquet")
    monkeypatch.chdir(user_plugins_run)  # the database's views read results/ from where it is
    with duckdb.connect("results/irflow.duckdb", read_only=True) as db:
        runs = db.sql(f"select count(*) from runs where system = '{RERANKED}'").fetchall()
        scored = db.sql(f"select count(*) from per_query where system = '{RERANKED}'").fetchall()
    assert runs[0][0] == len(run) and scored[0][0] == len(scores) > 0
