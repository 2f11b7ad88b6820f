"""irflow's own measures are a registry (irflow.evaluation.measures): a new measure is one
module there, which scoring, the metric names and the config check then know."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import SCHEMA, minimal_config

from irflow.core.errors import ConfigError
from irflow.evaluation import measures
from irflow.evaluation.score import metric_names, score_run
from irflow.workflow.config import validate_config

# A measure as a user or a contributor writes it: one module with its MEASURE.
HITS_MODULE = '''
"""``hits_k``: how many relevant documents the top k holds (a count, where P_k is a share)."""

from irflow.evaluation.measures.base import RELEVANCE_LEVEL, Measure


def hits(ranked, qrels, cutoffs):
    values = {}
    for query_id, group in ranked.groupby("query_id", sort=False):
        judged = qrels.get(query_id, {})
        relevant = {doc for doc, grade in judged.items() if grade >= RELEVANCE_LEVEL}
        docs = group["doc_id"].tolist()
        values[query_id] = {f"hits_{k}": float(len(relevant & set(docs[:k]))) for k in cutoffs}
    return values


MEASURE = Measure("hits", hits, "Hits@{k}", "the relevant documents in the top {k}")
'''


def test_the_registry_holds_the_measure_of_every_module_and_scoring_computes_each():
    """Each module of the measures package but ``base`` is one measure, which the registry
    holds by its name and score_run computes at a cutoff."""
    package = Path(measures.__file__).parent
    modules = sorted({path.stem for path in package.glob("*.py")} - {"__init__", "base"})
    defined = [importlib.import_module(f"{measures.__name__}.{m}").MEASURE for m in modules]
    assert measures.MEASURES.built_in() == {measure.name: measure for measure in defined}
    run = pd.DataFrame(
        [("q", "d1", 2.0), ("q", "d2", 1.0)], columns=["query_id", "doc_id", "score"]
    )
    qrels = pd.DataFrame([("q", "d1", 1)], columns=["query_id", "doc_id", "relevance"])
    specs = [f"{name}.1" for name in measures.MEASURES.built_in()]
    assert sorted(score_run(run, qrels, specs)["metric"]) == sorted(metric_names(specs))
    assert set(metric_names(specs)) == {f"{name}_1" for name in measures.MEASURES.built_in()}


@pytest.fixture
def hits_measure(tmp_path, monkeypatch):
    """``hits.py`` dropped into the measures package, as a new module of it would be."""
    (tmp_path / "hits.py").write_text(HITS_MODULE, encoding="utf-8")
    monkeypatch.setattr(measures, "__path__", [*measures.__path__, str(tmp_path)])
    measures.MEASURES.built_in.cache_clear()
    yield
    sys.modules.pop("irflow.evaluation.measures.hits", None)
    measures.MEASURES.built_in.cache_clear()


def test_a_new_measure_is_one_module(hits_measure):
    run = pd.DataFrame(
        [("q", "d1", 3.0), ("q", "d2", 2.0), ("p", "d3", 1.0)],
        columns=["query_id", "doc_id", "score"],
    )
    qrels = pd.DataFrame(
        [("q", "d1", 1), ("q", "d2", 2), ("p", "d9", 1), ("r", "d1", 1)],
        columns=["query_id", "doc_id", "relevance"],
    )
    scored = score_run(run, qrels, ["hits.1,2", "P.1"])
    got = scored.set_index(["query_id", "metric"])["value"].to_dict()
    assert got == {
        ("p", "P_1"): 0.0,
        ("p", "hits_1"): 0.0,
        ("p", "hits_2"): 0.0,
        ("q", "P_1"): 1.0,
        ("q", "hits_1"): 1.0,
        ("q", "hits_2"): 2.0,
        # r has no results: 0, as trec_eval -c counts it
        ("r", "P_1"): 0.0,
        ("r", "hits_1"): 0.0,
        ("r", "hits_2"): 0.0,
    }
    assert metric_names(["hits.5"]) == ["hits_5"]
    config = minimal_config(
        metrics=["ndcg_cut.10", "hits.5"],
        report_metrics=["ndcg_cut_10", "hits_5"],
        significance={"metrics": ["hits_5"]},
    )
    assert validate_config(config, SCHEMA)["report_metrics"] == ["ndcg_cut_10", "hits_5"]
    # Its name in results.md and the report is the module's own.
    name = measures.metric_name("hits_5")
    assert (name.label, name.meaning) == ("Hits@5 (hits_5)", "the relevant documents in the top 5")


def test_every_metric_is_named_as_a_paper_prints_it():
    """results.md's headings and legend (issue 51: they were trec_eval ids with no legend):
    each measure's title with its cutoff, MAP at every run's depth (top_k), trec_eval's id
    beside it; a metric no measure names keeps its id."""
    labels = {
        metric: measures.metric_name(metric, 1000).label
        for metric in ("ndcg_cut_10", "recall_100", "recall_cap_100", "map", "P_10")
    }
    assert labels == {
        "ndcg_cut_10": "nDCG@10 (ndcg_cut_10)",
        "recall_100": "Recall@100 (recall_100)",
        "recall_cap_100": "capped Recall@100 (recall_cap_100)",
        "map": "MAP@1000 (map)",
        "P_10": "P@10 (P_10)",
    }
    assert measures.metric_name("map").title == "MAP"  # no depth given: none shown
    assert measures.metric_name("recip_rank_cut_10").title == "MRR@10"
    unnamed = measures.metric_name("iprec_at_recall_0.10")
    assert unnamed.label == "iprec_at_recall_0.10"
    # Every measure of the registry has a title with its cutoff and a meaning.
    for measure in measures.MEASURES.all().values():
        assert "{k}" in measure.title and measure.meaning


def test_without_its_module_the_measure_is_unknown():
    config = minimal_config(metrics=["hits.5"])
    with pytest.raises(ConfigError, match="config key 'metrics': unknown measure 'hits'"):
        validate_config(config, SCHEMA)
