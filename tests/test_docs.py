"""The documentation: a short README, and a configuration reference that is the schema's."""

from __future__ import annotations

import importlib.util
import re
import sys

import yaml
from conftest import REPO

SCHEMA = REPO / "config" / "config.schema.yaml"
PAGE = REPO / "docs" / "configuration.md"


def generator():
    path = REPO / "docs" / "hooks" / "config_reference.py"
    spec = importlib.util.spec_from_file_location("config_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_one_a_newcomer_finishes():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move the rest into docs/"


def test_the_configuration_page_is_generated_from_the_schema():
    assert PAGE.read_text(encoding="utf-8") == generator().generate(), (
        "docs/configuration.md differs from config/config.schema.yaml: run "
        "`.venv/bin/python docs/hooks/config_reference.py`"
    )


def blocks(node, where="schema"):
    """(where, the key names) of every block of keys in the schema, however deeply nested."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            yield where, list(node["properties"])
        for key, value in node.items():
            yield from blocks(value, f"{where}/{key}")
    elif isinstance(node, list):
        for at, value in enumerate(node):
            yield from blocks(value, f"{where}/{at}")


def test_the_configuration_page_documents_every_key_of_every_block():
    """Each block's keys all appear under one path of the page (`<path>.<key>`), whether the
    block is written in place or under $defs."""
    page = generator().render(yaml.safe_load(SCHEMA.read_text(encoding="utf-8")))
    documented = set(re.findall(r"^\| `([^`]+)` \|", page, re.M))
    undocumented = []
    for where, names in blocks(yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))):
        prefixes = {path[: -len(names[0])] for path in documented if path.endswith(names[0])}
        prefixes = {p for p in prefixes if p == "" or p.endswith((".", "[]."))}
        if not any(all(prefix + name in documented for name in names) for prefix in prefixes):
            undocumented.append(f"{where}: {names}")
    assert not undocumented, "keys missing from docs/configuration.md:\n" + "\n".join(undocumented)


def test_the_install_and_quickstart_pages_are_the_readmes():
    """docs/install.md and docs/quickstart.md are the README's sections, regenerated."""
    path = REPO / "docs" / "hooks" / "readme_pages.py"
    spec = importlib.util.spec_from_file_location("readme_pages", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in module.PAGES:
        assert (REPO / "docs" / name).read_text(encoding="utf-8") == module.render(name), (
            f"docs/{name} differs from README.md: run `.venv/bin/python docs/hooks/readme_pages.py`"
        )
    assert "](docs/" not in (REPO / "docs" / "quickstart.md").read_text(encoding="utf-8")
