"""The kinds of derived dataset (irflow.workflow.kinds): each declares itself in its own module,
and the plan iterates over the registry; no analysis is named outside its own files."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from conftest import REPO
from test_inputs import plan_of, validated

from irflow.core import contracts, settings_types
from irflow.core.errors import ConfigError
from irflow.workflow import kinds
from irflow.workflow.kinds import KINDS

# A kind of the test's: of every dataset of the config, under "<name>-toy", its first query
# (by id), made by the shared rule derive.
TOY_MODULE = """
from irflow.workflow.kinds.base import DerivedKind


class Toy(DerivedKind):
    name = "toy"
    order = 9
    layout = "toy copies"
    reuses_vectors = False
    derive = True

    def listed(self, config):
        return {f"{name}-toy": {"dataset": name} for name in sorted(config["datasets"])}

    def filter_inputs(self, dataset):
        return {"toy": f"results/toy/{dataset}.parquet"}

    @staticmethod
    def make(tables, spec):
        first = sorted(tables.queries["query_id"])[:1]
        tables.queries = tables.queries[tables.queries["query_id"].isin(first)]
        tables.qrels = tables.qrels[tables.qrels["query_id"].isin(first)]
        return tables, {"queries": len(tables.queries)}


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


EXPAND = {"d-x": {"dataset": "d", "model": {"id": "org/t5"}}}


def test_the_plan_lists_the_datasets_of_every_registered_kind_in_their_order():
    plan = plan_of(
        curate={"d-clean": {"dataset": "d"}},
        expand=EXPAND,
    )
    assert sorted(plan.kinds) == sorted(KINDS.all())
    orders = [kind.order for kind in plan.kinds.values()]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)
    assert plan.datasets == ["d", "d-clean", "d-x"]
    assert plan.table_layout["derived"] == {
        "d-clean": {"base": "d", "kind": "curated copies"},
        "d-x": {"base": "d", "kind": "document-expanded copies"},
    }
    # A curated copy reuses its base's vectors; an expanded one has new documents.
    assert (plan.base_dataset("d-clean"), plan.base_dataset("d-x")) == ("d", None)


def test_a_kind_plans_from_its_datasets_settings_typed_once():
    """A kind with a ``settings_type`` types each dataset's settings once, when the plan is
    made (``DerivedKind.typed``), and plans from them; its jobs' params stay the config's
    dicts (on main: no typed settings, the planning read the dicts)."""
    llm_copy = {"d-llm": {"dataset": "d", "llm": {"queries": 3}}}
    plan = plan_of(expand=EXPAND | llm_copy, generate={"g": {"dataset": "d"}}, llm={"model": "m"})
    expand = plan.kinds["expand"]
    assert isinstance(expand.typed["d-x"], settings_types.Expand)
    assert expand.typed["d-x"].model.queries == 40 and expand.typed["d-x"].llm is None
    assert isinstance(expand.typed["d-llm"], settings_types.Expand1)
    assert expand.estimated() == ["d-llm"]
    wildcards = type("Wildcards", (), {"dataset": "d-x"})
    assert expand.settings(wildcards)["expand"] is plan.config["expand"]["d-x"]
    generate = plan.kinds["generate"]
    assert isinstance(generate.typed["g"], settings_types.Generate)
    assert generate.typed["g"].dev_share == 0.2 and generate.typed["g"].seed == 0
    assert generate.tokenizer(type("Wildcards", (), {"dataset": "g"})) is None


def test_a_new_kind_is_one_module_that_the_plan_follows(toy_kind):
    plan = plan_of(curate={"d-clean": {"dataset": "d"}})
    assert list(plan.kinds)[-1] == "toy"
    assert plan.derived["d-toy"] is plan.kinds["toy"]
    assert plan.datasets == ["d", "d-clean", "d-toy"]
    assert plan.table_layout["derived"]["d-toy"] == {"base": "d", "kind": "toy copies"}
    assert plan.dataset_specs["d-toy"] == plan.dataset_specs["d"]
    assert plan.base_dataset("d-toy") is None
    assert "results/manifests/derive/d-toy.json" in plan.manifests
    assert "results/manifests/filter/d-toy.json" in plan.manifests
    wildcards = type("Wildcards", (), {"dataset": "d-toy"})
    assert plan.filter_inputs(wildcards)["toy"] == "results/toy/d-toy.parquet"
    assert ("d-toy", "bm25") in plan.pairs
    assert plan.kinds["toy"].inputs(wildcards) == {
        "base_source": "results/datasets/d/source.json",
        "corpus": "results/datasets/d/corpus.parquet",
        "queries": "results/datasets/d/queries.parquet",
        "qrels": "results/datasets/d/qrels.parquet",
    }


def test_a_derived_datasets_name_and_a_block_reading_any_dataset_follow_every_kind(toy_kind):
    """The registry's datasets, a new kind's too: a name taken by a dataset of another kind is
    refused (each kind's check had listed the kinds before it by hand, and a dataset of a kind
    it did not list passed); ``negatives`` and ``quality_control.label_audit`` take a derived
    dataset of any kind (they took the config's own, curated, generated and positional ones)."""
    with pytest.raises(ConfigError) as refused:
        validated(curate={"d-toy": {"dataset": "d"}, "d-x": {"dataset": "d"}}, expand=EXPAND)
    assert str(refused.value).splitlines()[1:] == [
        "  config key 'expand.d-x': the name is already a dataset's",
        "  config key 'toy.d-toy': the name is already a dataset's",
    ]
    exports = {
        "n": {"dataset": "d-toy", "system": "bm25"},
        "x": {"dataset": "d-x", "system": "bm25"},
    }
    assert set(validated(expand=EXPAND, negatives=exports)["negatives"]) == {"n", "x"}


# Runs scripts/derive.py in a process where the toy kind's folder is part of irflow.workflow.kinds,
# with the parts of the snakemake object it reads.
DRIVER = """
import json, runpy, sys
from types import SimpleNamespace
from snakemake.iocontainers import Namedlist
import irflow.workflow.kinds
irflow.workflow.kinds.__path__.append(sys.argv[1])
sys.path.insert(0, sys.argv[2])
parts = json.loads(sys.argv[3])
snakemake = SimpleNamespace(**{
    key: Namedlist(fromdict=value) if isinstance(value, dict) else value
    for key, value in parts.items()
})
runpy.run_path(sys.argv[4], init_globals={"snakemake": snakemake}, run_name="__main__")
"""


def test_the_derive_job_makes_a_kinds_dataset_with_its_make(tmp_path, monkeypatch):
    (tmp_path / "toy.py").write_text(TOY_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    base = tmp_path / "results" / "datasets" / "d"
    base.mkdir(parents=True)
    (base / "source.json").write_text(json.dumps({"checksum": "c0", "split": "test"}))
    corpus = pd.DataFrame({"doc_id": ["d1"], "title": [""], "text": ["one"]})
    contracts.write_frame(corpus, base / "corpus.parquet", contracts.CORPUS)
    queries = pd.DataFrame({"query_id": ["q2", "q1"], "text": ["two", "one"]})
    contracts.write_frame(queries, base / "queries.parquet", contracts.QUERIES)
    qrels = pd.DataFrame(
        {"query_id": ["q1", "q2"], "doc_id": ["d1", "d1"], "relevance": [1, 1]}
        | {"span_start": [None, None], "span_end": [None, None]}
    )
    contracts.write_frame(qrels, base / "qrels.parquet", contracts.QRELS)
    made = "results/datasets/d-toy"
    names = ("corpus", "queries", "qrels")
    parts = {
        "input": {"base_source": str(base / "source.json")}
        | {name: str(base / f"{name}.parquet") for name in names},
        "output": {name: f"{made}/{name}.parquet" for name in names}
        | {
            "source": f"{made}/source.json",
            "stats": f"{made}/stats.json",
            "manifest": "results/manifests/derive/d-toy.json",
        },
        "params": {"kind": "toy", "spec": {"dataset": "d"}},
        "wildcards": {"dataset": "d-toy"},
        "rule": "derive",
        "log": [],
        "config": {},
    }
    (tmp_path / made).mkdir(parents=True)
    script, scripts = REPO / "scripts" / "derive.py", REPO / "scripts"
    command = [sys.executable, "-c", DRIVER, str(tmp_path), str(scripts), json.dumps(parts)]
    result = subprocess.run([*command, str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert contracts.read_frame(tmp_path / made / "queries.parquet")["query_id"].tolist() == ["q1"]
    assert contracts.read_frame(tmp_path / made / "qrels.parquet")["query_id"].tolist() == ["q1"]
    source = json.loads((tmp_path / made / "source.json").read_text())
    assert (source["base_dataset"], source["base_checksum"], source["kind"]) == ("d", "c0", "toy")
    assert source["checksum"] not in ("c0", None)
    manifest = json.loads((tmp_path / "results/manifests/derive/d-toy.json").read_text())
    assert (manifest["stage"], manifest["kind"], manifest["dataset"]) == ("derive", "toy", "d-toy")
    assert manifest["statistics"]["queries"] == 1
    assert manifest["dataset_checksum"] == source["checksum"]


# An analysis's module, or its config block.
PACKAGES = ("core", "data", "encoding", "retrieval", "evaluation", "derived", "workflow")
ANALYSES = re.compile(r"irflow\.analyses\.[a-z]\w*|position_analysis|saliency|beir_figures")


def test_no_analysis_is_named_outside_its_own_files():
    """The packages beside and below irflow.analyses name none (irflow.workflow.config imports
    them all by walking the package)."""
    named = sorted(
        str(path.relative_to(REPO))
        for package in PACKAGES
        for path in (REPO / "src" / "irflow" / package).rglob("*.py")
        # Every Parquet schema, the analyses' tables among them; and the types generated from
        # config/config.schema.yaml, whose blocks the analyses add (as docs/configuration.md).
        if path.name not in ("contracts.py", "settings_types.py")
        and ANALYSES.search(path.read_text(encoding="utf-8"))
    )
    assert named == []
