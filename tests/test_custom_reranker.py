"""A reranker of the user's: a class outside irflow named by ``type: python`` or installed as an
``irflow.rerankers`` entry point, checked when the config is validated and run by the workflow
like any reranker (docs/retrievers.md); tests/test_custom_family.py's workflow run takes it
through rerank, scores and the database."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import REPO, SCHEMA, fake_entry_points, minimal_config

from irflow.core.errors import ConfigError
from irflow.retrieval import rerankers
from irflow.retrieval.rerank import load_scorer, rerank
from irflow.workflow.config import validate_config
from irflow.workflow.run_inputs import Plan

TESTS = REPO / "tests"
DENSITY = "word_overlap_reranker:WordDensity"


@pytest.fixture(autouse=True)
def tests_on_path(monkeypatch):
    """The reranker's module is importable as a user's would be: its folder on sys.path. The
    entry points are listed again after the test (each test lists its own)."""
    monkeypatch.syspath_prepend(str(TESTS))
    yield
    rerankers.RERANKERS.installed.cache_clear()


def validated(reranker: dict) -> dict:
    config = minimal_config(
        rerankers={"mine": reranker},
        reranking=[{"first_stage": "bm25", "reranker": "mine", "k": [3]}],
    )
    return validate_config(config, SCHEMA)


def test_a_python_class_is_a_reranker_with_its_settings():
    """On main: "config key 'rerankers.mine': {'type': 'python', ...} is not valid under any of
    the given schemas"."""
    config = validated({"type": "python", "class": DENSITY, "settings": {"weight": 2.0}})
    spec = config["rerankers"]["mine"]
    assert spec["settings"] == {"weight": 2.0}
    scorer = load_scorer(spec, config["models"], {})
    assert scorer.score("cats purr", ["Cats purr and sleep", "Dogs bark"]).tolist() == [1.0, 0.0]
    assert scorer.provenance == {"class": DENSITY, "device": "cpu"}


@pytest.mark.parametrize(
    "reference, says",
    [
        (
            "no_such_module:Reranker",
            "config key 'rerankers.mine.class': cannot import 'no_such_module:Reranker' "
            "(ModuleNotFoundError: No module named 'no_such_module'); install its package or "
            "put its folder on PYTHONPATH",
        ),
        (
            "word_overlap_reranker:NoScore",
            "config key 'rerankers.mine.class': word_overlap_reranker.NoScore does not implement "
            "irflow's reranker protocol (irflow.retrieval.rerankers.python.Reranker): no "
            "method score",
        ),
    ],
)
def test_a_class_that_does_not_import_or_score_is_refused_naming_its_key(reference, says):
    with pytest.raises(ConfigError) as error:
        validated({"type": "python", "class": reference})
    assert says in str(error.value)


def test_an_entry_point_is_a_reranker_type_of_its_own(monkeypatch):
    fake_entry_points(
        monkeypatch, rerankers.RERANKERS, EntryPoint("density", DENSITY, "irflow.rerankers")
    )
    spec = validated({"type": "density", "settings": {"weight": 3.0}})["rerankers"]["mine"]
    scorer = load_scorer(spec, {}, {})
    assert scorer.score("cats", ["cats dogs"]).tolist() == [1.5]
    with pytest.raises(ConfigError, match="'class' was unexpected"):  # the point names it
        validated({"type": "density", "class": DENSITY})
    fake_entry_points(
        monkeypatch, rerankers.RERANKERS, EntryPoint("bi-encoder", DENSITY, "irflow.rerankers")
    )
    with pytest.raises(ConfigError, match="entry point 'bi-encoder' .* built-in reranker type"):
        validated({"type": "bi-encoder", "model": "m"})


def test_every_type_has_its_fragment_among_a_rerankers_choices():
    """The schema and the registry name the same types, each fragment fixing its type."""
    choices = SCHEMA["properties"]["rerankers"]["additionalProperties"]["oneOf"]
    named = {c["$ref"].rsplit("/", 1)[-1] for c in choices}
    assert named == {found.schema_def for found in rerankers.RERANKERS.built_in().values()}
    for found in rerankers.RERANKERS.built_in().values():
        assert SCHEMA["$defs"][found.schema_def]["properties"]["type"] == {"const": found.type}


def test_a_score_of_the_wrong_length_is_refused_naming_the_class():
    spec = validated({"type": "python", "class": DENSITY})["rerankers"]["mine"]
    scorer = load_scorer(spec, {}, {})
    scorer.reranker.score = lambda query, documents: [1.0]
    run = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [2.0, 1.0]})
    with pytest.raises(ValueError, match=r"WordDensity.score gave \(1,\) scores for 2"):
        rerank(run, {"q": "x"}, {"a": "x", "b": "y"}, scorer, 2)


def test_a_vote_and_a_rerank_job_take_the_same_settings_of_their_reranker():
    """One builder of a reranker's settings for every job that scores with it: a QC vote's
    params are a rerank job's without first_stage and k, the model's settings included for
    every type that names a model. On main, rules/qc_common.smk built a vote's settings apart and
    gave a late-interaction reranker's none of its model's ({'reranker_name': 'li', 'reranker':
    {...}}), so a changed ColBERT model did not rerun its votes."""
    config = minimal_config(
        models={"m": {"id": "org/m"}, "col": {"id": "org/col", "query_length": 32}},
        rerankers={
            "bi": {"type": "bi-encoder", "model": "m"},
            "ce": {"type": "cross-encoder", "id": "org/ce"},
            "li": {"type": "late-interaction", "model": "col"},
            "mine": {"type": "python", "class": DENSITY},
        },
        reranking=[{"first_stage": "bm25", "reranker": r, "k": [10]} for r in ("bi", "li")],
    )
    config = validate_config(config, SCHEMA)
    plan = Plan(config, REPO)
    for name in ("bi", "li"):
        job = plan.rerank_settings(SimpleNamespace(dataset="d", system=f"bm25+{name}@10"))
        vote = rerankers.reranker_settings(config, name)
        assert {k: v for k, v in job.items() if k not in ("first_stage", "k")} == vote
    late = rerankers.reranker_settings(config, "li")["model"]
    assert (late["id"], late["query_length"]) == ("org/col", 32)
    assert list(rerankers.reranker_settings(config, "ce")) == ["reranker_name", "reranker"]
    assert list(rerankers.reranker_settings(config, "mine")) == ["reranker_name", "reranker"]
