"""The package's imports: no modules of one package import each other in a circle, counting
the imports made for type annotations only (``if TYPE_CHECKING:``), which lint-imports sees
too ([tool.importlinter] in pyproject.toml)."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import grimp
import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]


def sibling_circles(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """Pairs of sibling modules (or subpackages) that import each other, directly or not."""
    circles = []
    for package in sorted(graph.modules):
        children = sorted(graph.find_children(package))
        for first, second in combinations(children, 2):
            there = graph.chain_exists(importer=first, imported=second, as_packages=True)
            if there and graph.chain_exists(importer=second, imported=first, as_packages=True):
                circles.append((first, second))
    return circles


def test_no_sibling_modules_import_each_other_even_for_type_annotations():
    graph = grimp.build_graph("irflow", exclude_type_checking_imports=False, cache_dir=None)
    assert sibling_circles(graph) == []


def test_lint_imports_counts_type_checking_imports():
    # An import made for annotations alone closed generate's circle where lint-imports
    # skipped such imports.
    linter = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert not linter.get("exclude_type_checking_imports", False)
