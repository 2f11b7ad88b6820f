"""What a published project carries: its licence, citation, changelog and API reference."""

from __future__ import annotations

import importlib.util
import re

import pytest
import yaml
from conftest import REPO

tomllib = pytest.importorskip("tomllib")
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_the_citation_is_cff_1_2_with_its_required_keys_and_the_package_version():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    # CFF 1.2.0's required keys (its schema.json): cff-version, message, title, authors.
    assert citation["cff-version"] == "1.2.0"
    assert citation["message"] and citation["title"]
    assert citation["authors"] and all(
        "name" in author or "family-names" in author for author in citation["authors"]
    )
    assert str(citation["version"]) == PROJECT["version"]
    assert citation["license"] == PROJECT["license"]


def test_the_licence_file_is_the_licence_the_package_declares():
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    assert (REPO / "LICENSE").read_text().startswith("MIT License\n")


def test_the_changelog_has_an_unreleased_section_above_the_releases():
    headings = re.findall(r"^## (.+)$", (REPO / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings[0] == "[Unreleased]"
    assert f"[{PROJECT['version']}] - " in headings[1]


def test_every_api_page_is_in_the_nav_and_documents_modules_that_exist():
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    api = next(entry["API reference"] for entry in nav if "API reference" in entry)
    listed = {page if isinstance(page, str) else next(iter(page.values())) for page in api}
    pages = sorted((REPO / "docs" / "api").glob("*.md"))
    assert listed == {f"api/{page.name}" for page in pages}
    for page in pages:
        for module in re.findall(r"^::: (\S+)$", page.read_text(), re.MULTILINE):
            assert importlib.util.find_spec(module) is not None, f"{page.name}: {module}"
