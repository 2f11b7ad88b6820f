"""Each feature's config check lives beside its feature and still runs in the real config check.

Fusion, significance, the position analysis, saliency and correlation check their own blocks
(``irflow.core.config.register_check``); the Snakefile validates through
``irflow.workflow.config``, which imports them (tests/test_dry_run.py: the Snakefile imports it).
"""

from __future__ import annotations

import importlib

import pytest
from conftest import SCHEMA, minimal_config

from irflow.core import config as core
from irflow.core.errors import ConfigError
from irflow.workflow.config import validate_config

BASE = minimal_config(
    "scifact",
    retrievers={"bm25": {"type": "bm25"}, "bm25_k12": {"type": "bm25", "k1": 1.2}},
    models={
        "minilm": {"id": "org/minilm"},
        "minilm-onnx": {"id": "org/minilm", "backend": "onnx"},
    },
)
RRF = {"method": "rrf", "runs": ["bm25", "bm25_k12"]}
SALIENCY = {"models": ["minilm"], "datasets": ["scifact"]}

# (the feature's check, the config's change, the problem it names)
MOVED = [
    (
        "irflow.retrieval.fuse.fusion_problems",
        {"fusion": {"bm25": RRF}},
        "config key 'fusion.bm25': the name is already a retriever's",
    ),
    (
        "irflow.retrieval.fuse.fusion_problems",
        {"fusion": {"f": RRF | {"runs": ["bm25", "nope"]}}},
        "config key 'fusion.f.runs.1': 'nope' is not a key of 'retrievers'",
    ),
    (
        "irflow.retrieval.fuse.fusion_problems",
        {"fusion": {"f": RRF | {"method": "weighted", "weights": [1.0]}}},
        "config key 'fusion.f.weights': 1 weights for 2 runs",
    ),
    (
        "irflow.evaluation.significance.baseline_problems",
        {"significance": {"baseline": "bm25+ce@10"}},
        "config key 'significance.baseline': 'bm25+ce@10' is not a key of 'systems'",
    ),
    (
        "irflow.analyses.position.position_analysis_problems",
        {"position_analysis": {"datasets": ["nope"], "tokenizer": "minilm"}},
        "config key 'position_analysis.datasets.0': 'nope' is not a key of 'datasets'",
    ),
    (
        "irflow.analyses.position.position_analysis_problems",
        {"position_analysis": {"datasets": ["scifact"]}},
        "config key 'position_analysis.tokenizer': needed to count tokens of",
    ),
    (
        "irflow.analyses.position.position_analysis_problems",
        {"position_analysis": {"pool": {"p": ["scifact"]}}},
        "config key 'position_analysis.pool.p.0': 'scifact' is not a key of "
        "'position_analysis.datasets'",
    ),
    (
        "irflow.analyses.position.position_analysis_problems",
        {
            "position_analysis": {
                "datasets": ["scifact"],
                "tokenizer": "minilm",
                "pool": {"p": ["scifact"], "q": ["scifact"]},
            }
        },
        "config key 'position_analysis.pool.q.0': 'scifact' is already in another pool",
    ),
    (
        "irflow.analyses.saliency.saliency_problems",
        {"position_analysis": {"saliency": SALIENCY | {"models": ["nope"]}}},
        "config key 'position_analysis.saliency.models.0': 'nope' is not a key of 'models'",
    ),
    (
        "irflow.analyses.saliency.saliency_problems",
        {"position_analysis": {"saliency": SALIENCY | {"models": ["minilm-onnx"]}}},
        "config key 'position_analysis.saliency.models.0': model 'minilm-onnx' has backend "
        "'onnx'; this stage runs the model on torch",
    ),
    (
        "irflow.analyses.saliency.saliency_problems",
        {"position_analysis": {"saliency": {"models": ["minilm"]}}},
        "config key 'position_analysis.saliency.datasets': needed when saliency.models is not "
        "empty",
    ),
    (
        "irflow.analyses.saliency.saliency_problems",
        {"position_analysis": {"saliency": SALIENCY | {"select": "random"}}},
        "config key 'position_analysis.saliency.queries': needed when saliency.select is random",
    ),
    (
        "irflow.analyses.saliency.saliency_problems",
        {"position_analysis": {"saliency": SALIENCY | {"centre": [0.6, 0.4]}}},
        "config key 'position_analysis.saliency.centre': [0.6, 0.4] is not a range [low, high]",
    ),
    (
        "irflow.analyses.saliency.saliency_problems",
        {"position_analysis": {"saliency": SALIENCY | {"datasets": ["scifact", "nope"]}}},
        "config key 'position_analysis.saliency.datasets.1': 'nope' is not a key of 'datasets or "
        "variants'",
    ),
    (
        "irflow.analyses.saliency.saliency_problems",
        {"position_analysis": {"saliency": SALIENCY | {"datasets": ["all"]}}},
        "config key 'position_analysis.saliency.datasets.0': 'all' names the pooled curve; "
        "rename the dataset",
    ),
    (
        "irflow.analyses.correlate.correlation_problems",
        {"correlation": {"benchmarks": {"beir": ["scifact", "nope"]}}},
        "config key 'correlation.benchmarks.beir': 'nope' is not a key of 'datasets'",
    ),
    (
        "irflow.analyses.correlate.correlation_problems",
        {
            "correlation": {
                "benchmarks": {"beir": ["scifact"]},
                "bootstrap": {"left": "beir", "right": "air"},
            }
        },
        "config key 'correlation.bootstrap.right': 'air' is not a key of 'correlation.benchmarks'",
    ),
]


def the_check(dotted: str):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("check", "change", "problem"), MOVED)
def test_the_features_own_check_names_the_problem(check, change, problem, monkeypatch):
    """The check is the feature's, registered for every validation, and finds the problem in
    the config with its defaults filled in."""
    assert core.CHECKS[check] is the_check(check)
    monkeypatch.setattr(core, "CHECKS", {})  # the config as the checks see it, unchecked
    config = core.validate_config(BASE | change, SCHEMA)
    assert any(problem in found for found in the_check(check)(config))


@pytest.mark.parametrize(("check", "change", "problem"), MOVED)
def test_the_config_check_still_refuses_what_the_feature_checks(check, change, problem):
    with pytest.raises(ConfigError) as error:
        validate_config(BASE | change, SCHEMA)
    assert problem in str(error.value)
