"""The kinds of derived dataset (irflow.workflow.kinds): each declares itself in its own module,
and the plan iterates over the registry; no analysis is named outside its own files."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import REPO
from test_inputs import plan_of

from irflow.workflow import kinds
from irflow.workflow.kinds import KINDS

# A kind of the test's: a copy of every dataset of the config, under "<name>-toy".
TOY_MODULE = """
from irflow.workflow.kinds.base import DerivedKind


class Toy(DerivedKind):
    name = "toy"
    order = 9
    layout = "toy copies"
    reuses_vectors = False

    def listed(self, config):
        return {f"{name}-toy": {"dataset": name} for name in sorted(config["datasets"])}

    def filter_inputs(self, dataset):
        return {"toy": f"results/toy/{dataset}.parquet"}


KIND = Toy
"""


@pytest.fixture
def toy_kind(tmp_path, monkeypatch):
    """``toy.py`` dropped into irflow.workflow.kinds, as a new kind's module would be."""
    (tmp_path / "toy.py").write_text(TOY_MODULE, encoding="utf-8")
    monkeypatch.setattr(kinds, "__path__", [*kinds.__path__, str(tmp_path)])
    KINDS.built_in.cache_clear()
    yield
    sys.modules.pop("irflow.workflow.kinds.toy", None)
    KINDS.built_in.cache_clear()


def test_the_plan_lists_the_datasets_of_every_registered_kind_in_their_order():
    plan = plan_of(
        curate={"d-clean": {"dataset": "d"}},
        expand={"d-x": {"dataset": "d", "model": {"id": "org/t5"}}},
    )
    assert list(plan.kinds) == ["positionalize", "generate", "curate", "quality_control", "expand"]
    assert sorted(plan.kinds) == sorted(KINDS.all())
    assert plan.datasets == ["d", "d-clean", "d-x"]
    assert plan.table_layout["derived"] == {
        "d-clean": {"base": "d", "kind": "curated copies"},
        "d-x": {"base": "d", "kind": "document-expanded copies"},
    }
    # A curated copy reuses its base's vectors; an expanded one has new documents.
    assert (plan.base_dataset("d-clean"), plan.base_dataset("d-x")) == ("d", None)


def test_a_new_kind_is_one_module_that_the_plan_follows(toy_kind):
    plan = plan_of(curate={"d-clean": {"dataset": "d"}})
    assert list(plan.kinds)[-1] == "toy"
    assert plan.derived["d-toy"] is plan.kinds["toy"]
    assert plan.datasets == ["d", "d-clean", "d-toy"]
    assert plan.table_layout["derived"]["d-toy"] == {"base": "d", "kind": "toy copies"}
    assert plan.dataset_specs["d-toy"] == plan.dataset_specs["d"]
    assert plan.base_dataset("d-toy") is None
    assert "results/manifests/toy/d-toy.json" in plan.manifests
    assert "results/manifests/filter/d-toy.json" in plan.manifests
    wildcards = type("Wildcards", (), {"dataset": "d-toy"})
    assert plan.filter_inputs(wildcards)["toy"] == "results/toy/d-toy.parquet"
    assert ("d-toy", "bm25") in plan.pairs


# An analysis's module, or its config block.
PACKAGES = ("core", "data", "encoding", "retrieval", "evaluation", "derived", "workflow")
ANALYSES = re.compile(r"irflow\.analyses\.[a-z_]+|position_analysis|saliency|beir_figures")


def test_no_analysis_is_named_outside_its_own_files():
    """The packages beside and below irflow.analyses name none (irflow.workflow.config imports
    them all by walking the package)."""
    named = sorted(
        str(path.relative_to(REPO))
        for package in PACKAGES
        for path in (REPO / "src" / "irflow" / package).rglob("*.py")
        if path.name != "contracts.py"  # every Parquet schema, the analyses' tables among them
        and ANALYSES.search(path.read_text(encoding="utf-8"))
    )
    assert named == []
