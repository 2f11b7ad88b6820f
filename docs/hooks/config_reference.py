"""Writes docs/configuration.md from config/config.schema.yaml, the one source of truth for
every config key: its type, default, allowed values and description.

A mkdocs hook (mkdocs.yml `hooks`) regenerates the page before every build; run this file
(`python docs/hooks/config_reference.py`) to refresh the committed copy after a schema change.
tests/test_docs.py fails while the committed page differs from what the schema gives.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "config" / "config.schema.yaml"
PAGE = REPO / "docs" / "configuration.md"

INTRO = """\
# Configuration reference

<!-- Generated from config/config.schema.yaml by docs/hooks/config_reference.py: edit the
schema, not this page. -->

Every key a config may hold, generated from `config/config.schema.yaml`, which also validates
each config before anything runs: an unknown key, a wrong type or a value outside the allowed
ones stops the run, naming the key. `<name>` stands for a name you choose (a dataset, model or
system); `[]` for each item of a list. A key without a default must be given when its block
is. Required at the top level: `datasets` and `retrievers`. The
[user guide](user-guide.md#configuration) explains the keys by task.
"""


@dataclass
class Row:
    """One documented key: its dotted path, the path of the block that holds it, its schema,
    and the alternatives (of a oneOf: where, which) that it belongs to."""

    path: str
    parent: str
    node: dict
    required: bool
    variants: tuple[tuple[str, str], ...] = ()
    same_as: str = ""  # a block defined once in the schema and documented at this path


class Reference:
    def __init__(self, schema: dict):
        self.defs = schema.get("$defs", {})
        self.schema = schema
        self.documented_at: dict[str, str] = {}  # $defs name -> the path its keys are under

    def resolve(self, node: dict) -> dict:
        while isinstance(node, dict) and "$ref" in node:
            node = self.defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def rows(self) -> list[Row]:
        return list(self._children(self.schema, "", ()))

    def _children(self, node: dict, path: str, variants: tuple):
        """The keys under ``node``, which sits at ``path``, each followed by its own keys."""
        node = self.resolve(node)
        required = set(node.get("required", []))
        for key, sub in node.get("properties", {}).items():
            child = f"{path}.{key}" if path else key
            yield from self._key(child, path, sub, key in required, variants)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            yield from self._key(f"{path}.<name>", path, extra, False, variants)
        items = self.resolve(node.get("items", {}))
        if isinstance(items, dict) and items.get("properties"):
            yield from self._children(items, f"{path}[]", variants)
        for branch in node.get("oneOf", []):
            branch = self.resolve(branch)
            if branch.get("properties"):
                yield from self._children(branch, path, (*variants, (path, variant(branch))))

    def _key(self, path: str, parent: str, sub: dict, required: bool, variants: tuple):
        name = sub["$ref"].rsplit("/", 1)[-1] if "$ref" in sub else None
        first = self.documented_at.setdefault(name, path) if name else path
        if first != path and self.resolve(sub).get("properties"):
            yield Row(path, parent, sub, required, variants, same_as=first)
            return
        yield Row(path, parent, sub, required, variants)
        yield from self._children(sub, path, variants)


def variant(branch: dict) -> str:
    """How a config picks this alternative of a oneOf: its `type` (or `method`), else the key
    only it has."""
    properties = branch.get("properties", {})
    for key in ("type", "method"):
        if "const" in properties.get(key, {}):
            return f"`{key}: {properties[key]['const']}`"
    return ", ".join(f"`{key}`" for key in branch.get("required", []))


def type_of(node: dict, reference: Reference) -> str:
    node = reference.resolve(node)
    if "oneOf" in node:
        return " or ".join(sorted({type_of(branch, reference) for branch in node["oneOf"]}))
    kinds = node.get("type")
    if kinds is None:
        if "enum" in node or "const" in node:
            values = node.get("enum", [node.get("const")])
            kinds = sorted({_json_type(value) for value in values})
        elif node.get("properties"):
            kinds = "object"
        else:
            return "any"
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    if "array" in kinds and node.get("items"):
        item = type_of(node["items"], reference)
        kinds = [f"array of {item}" if kind == "array" else kind for kind in kinds]
    if "object" in kinds and isinstance(node.get("additionalProperties"), dict):
        value = type_of(node["additionalProperties"], reference)
        kinds = [f"map of name → {value}" if kind == "object" else kind for kind in kinds]
    return " or ".join(kinds)


def _json_type(value) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), "null" if value is None else "object"
    )


def allowed(node: dict, reference: Reference) -> str:
    node = reference.resolve(node)
    parts = []
    values = node.get("enum")
    if values is None and "const" in node:
        values = [node["const"]]
    items = reference.resolve(node.get("items", {}))
    if values is None and isinstance(items, dict) and "enum" in items:
        values = items["enum"]
        parts.append("each of")
    if values is not None:
        parts.append(", ".join(f"`{_inline(value)}`" for value in values))
    bounds = [
        ("minimum", "≥"),
        ("exclusiveMinimum", ">"),
        ("maximum", "≤"),
        ("exclusiveMaximum", "<"),
    ]
    for source in (node, items if isinstance(items, dict) else {}):
        limits = [f"{sign} {source[key]}" for key, sign in bounds if key in source]
        if limits:
            parts.append(("items " if source is items else "") + ", ".join(limits))
    if "minItems" in node or "maxItems" in node:
        low, high = node.get("minItems", 0), node.get("maxItems")
        if high is None:
            parts.append(f"at least {low} item{'s' * (low != 1)}")
        else:
            parts.append(f"{low} items" if low == high else f"{low} to {high} items")
    if "pattern" in node:
        parts.append(f"matches `{node['pattern']}`")
    return "; ".join(parts)


def _inline(value) -> str:
    """A value as it is written in a YAML config, on one line."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def default(node: dict, required: bool) -> str:
    if required:
        return "required"
    if "default" not in node:
        return ""
    value = node["default"]
    return f"`{_inline(value)}`" if value != "" else '`""`'


def _cell(text: str) -> str:
    """One table cell. A pipe separates cells even inside a code span on some renderers
    (GitHub), and an escaped one shows its backslash in code on others (mkdocs): such a span
    is written as HTML, with the pipe as an entity."""
    text = re.sub(
        r"`([^`]*\|[^`]*)`",
        lambda span: "<code>" + html.escape(span.group(1)).replace("|", "&#124;") + "</code>",
        " ".join(text.split()),
    )
    return text.replace("|", "\\|")


def _prose(text: str) -> str:
    """A description as Markdown: <placeholders> outside code spans shown, not taken as HTML."""
    pieces = text.split("`")
    for at in range(0, len(pieces), 2):  # the even pieces lie outside code spans
        pieces[at] = pieces[at].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(pieces)


def _table(rows: list[Row], reference: Reference) -> list[str]:
    out = ["| key | type | default | allowed | description |", "| --- | --- | --- | --- | --- |"]
    for row in rows:
        # A key written as a $ref to a shared definition, with its own settings beside it.
        node = {**reference.resolve(row.node), **row.node}
        description = node.get("description", "")
        if row.same_as:
            description = f"The keys of `{row.same_as}`. {description}".strip()
        cells = [
            f"`{row.path}`",
            type_of(row.node, reference),
            default(node, row.required),
            allowed(row.node, reference),
            _prose(description),
        ]
        out.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return [*out, ""]


def _top(path: str) -> str:
    return re.split(r"[.\[]", path)[0]


def render(schema: dict) -> str:
    reference = Reference(schema)
    rows = reference.rows()
    # A top-level key with keys of its own gets a section; the single settings share one.
    blocks = {_top(row.path) for row in rows if row.parent}
    sections: dict[str, dict[tuple, list[Row]]] = {}
    for row in rows:
        top = _top(row.path)
        title = f"`{top}`" if top in blocks else "Single settings"
        sections.setdefault(title, {}).setdefault(row.variants, []).append(row)
    out = [INTRO]
    for title, groups in sections.items():
        out.append(f"## {title}\n")
        for variants, rows in groups.items():
            if variants:
                where = ", ".join(f"`{path}` with {label}" for path, label in variants)
                out.append(f"### {where}\n")
            out.extend(_table(rows, reference))
    return "\n".join(out)


def generate() -> str:
    return render(yaml.safe_load(SCHEMA.read_text(encoding="utf-8")))


def on_pre_build(config, **kwargs) -> None:
    """mkdocs hook: the page always shows the schema the site is built from."""
    text = generate()
    if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
        PAGE.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    PAGE.write_text(generate(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}")
