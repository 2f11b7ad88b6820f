"""irflow.core.plugins.Registry: the one mechanism of every pluggable kind's registry (retriever
families, reranker types, dataset source types, measures, derived-dataset kinds)."""

from importlib.metadata import EntryPoint

import pytest
from conftest import REPO, fake_entry_points

from irflow.core.errors import ConfigError
from irflow.core.plugins import Registry
from irflow.data.sources import SOURCES
from irflow.evaluation.measures import MEASURES
from irflow.retrieval.rerankers import RERANKERS
from irflow.workflow.families import FAMILIES
from irflow.workflow.kinds import KINDS

REGISTRIES = {
    "retriever type": FAMILIES,
    "reranker type": RERANKERS,
    "dataset source type": SOURCES,
    "measure": MEASURES,
    "derived-dataset kind": KINDS,
}


@pytest.mark.parametrize("kind", REGISTRIES)
def test_an_unknown_name_is_refused_naming_the_kind_and_the_known_names(kind):
    registry = REGISTRIES[kind]
    known = sorted(registry.all())
    assert len(known) >= 4
    with pytest.raises(ConfigError) as error:
        registry.get("no-such-name")
    assert str(error.value) == f"no {kind} 'no-such-name'; known: {', '.join(known)}"


def test_no_module_but_the_registrys_lists_entry_points():
    """Entry points are read in one place: irflow.core.plugins."""
    listing = sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "src" / "irflow").rglob("*.py")
        if "entry_points(" in path.read_text(encoding="utf-8")
    )
    assert listing == ["src/irflow/core/plugins.py"]


def test_an_installed_one_is_found_once_and_may_not_take_a_built_in_name(monkeypatch):
    registry = Registry(
        "measure", "irflow.evaluation.measures", "MEASURE", key="name", group="irflow.test"
    )
    point = EntryPoint("mine", "irflow.evaluation.measures.hole:MEASURE", "irflow.test")
    fake_entry_points(monkeypatch, registry, point)
    assert registry.all()["mine"] is MEASURES.get("hole")
    assert sorted(registry.all()) == sorted([*MEASURES.all(), "mine"])
    taken = EntryPoint("hole", "irflow.evaluation.measures.hole:MEASURE", "irflow.test")
    fake_entry_points(monkeypatch, registry, taken)
    with pytest.raises(ConfigError, match="entry point 'hole' .* built-in measure"):
        registry.all()
