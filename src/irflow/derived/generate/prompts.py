"""prompts: generate's prompts file (config/prompts/airbench.yaml), checked on load: each step's
templates and the query attributes' weighted options."""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irflow.core.errors import InputError
from irflow.derived.llm.prompts import fence, read_prompts_file

STEPS = ("characters", "scenarios", "query", "rewrite", "negatives")
# Rewrites of each query when the prompts file does not say: AIR-Bench rewrites "for multiple
# times" (airbench.txt, line 45), and 2 is the fewest that are.
REWRITE_ROUNDS = 2
# In the order they are drawn: the type first, since it limits the lengths (AIR-Bench: a claim
# is "10 to 20" or "at least 20 words" long).
ATTRIBUTES = ("query_type", "query_length", "information_type", "expression_style")
# The placeholders each step's templates may use, and those they must use.
ALLOWED = {
    "characters": {"language", "document", "count"},
    "scenarios": {"language", "document", "count", "character"},
    "query": {"language", "document", "character", "scenario", *ATTRIBUTES},
    "rewrite": {"language", "document", "character", "scenario", "query", *ATTRIBUTES},
    "negatives": {"language", "document", "character", "scenario", "query", "count", *ATTRIBUTES},
}
REQUIRED = {
    "characters": {"document"},
    "scenarios": {"document", "character"},
    "query": {"document", "character", "scenario"},
    "rewrite": {"query"},
    "negatives": {"document", "query"},
}


@dataclass(frozen=True)
class Option:
    """One value of a query attribute: drawn with probability proportional to ``weight``.
    ``words`` (query_length only): the length's least and most words (None: no most).
    ``query_lengths`` (query_type only): the query_length values a query of this type may have
    (None: all); AIR-Bench (App. A.2.1) draws a claim's length from "10 to 20" and "at least 20
    words" only. ``long_doc`` (query_type only): False leaves the type out of Long-Doc corpora
    (``chunk_tokens`` set), where AIR-Bench asks only questions and claims."""

    value: str
    weight: float = 1.0
    words: tuple[int, int | None] | None = None
    query_lengths: tuple[str, ...] | None = None
    long_doc: bool = True


@dataclass(frozen=True)
class Prompts:
    path: str
    steps: dict
    attributes: dict[str, list[Option]]
    sha256: str

    def messages(self, step: str, values: dict) -> list[dict]:
        spec = self.steps[step]
        messages = [{"role": "system", "content": spec["system"]}] if spec.get("system") else []
        messages.append({"role": "user", "content": spec["user"]})
        values = values | {"document": fence(values["document"])}
        return [
            {"role": m["role"], "content": string.Template(m["content"]).substitute(values)}
            for m in messages
        ]


def _placeholders(template: str) -> set[str]:
    return {
        match.group("named") or match.group("braced")
        for match in string.Template.pattern.finditer(template)
        if match.group("named") or match.group("braced")
    }


def load_prompts(path: str | Path) -> Prompts:
    """Read and check a prompts file; errors name the file and the field."""
    path = Path(path)
    data, sha256 = read_prompts_file(path, "the prompts file")
    attributes = data.get("attributes")
    if not isinstance(attributes, dict):
        raise InputError(path, "missing: a mapping of attribute lists", field="attributes")
    options = {name: _options(path, name, attributes.get(name)) for name in ATTRIBUTES}
    lengths = {o.value for o in options["query_length"]}
    for i, option in enumerate(options["query_type"]):
        unknown = set(option.query_lengths or ()) - lengths
        if unknown:
            raise InputError(
                path,
                f"{', '.join(sorted(map(repr, unknown)))} is not a query_length value",
                field=f"attributes.query_type.{i}.query_lengths",
            )
    if not any(o.long_doc for o in options["query_type"]):
        raise InputError(
            path,
            "no value is left for Long-Doc corpora (all long_doc: false)",
            field="attributes.query_type",
        )
    for step in STEPS:
        spec = data.get(step)
        if not isinstance(spec, dict):
            raise InputError(path, "missing: the step's system and user templates", field=step)
        if not isinstance(spec.get("user"), str) or not spec["user"].strip():
            raise InputError(path, "must be a non-empty template", field=f"{step}.user")
        if not isinstance(spec.get("answer_key"), str) or not spec["answer_key"]:
            raise InputError(path, "must name the answer's JSON key", field=f"{step}.answer_key")
        for part in ("system", "user"):
            template = spec.get(part)
            if template is None:
                continue
            if not isinstance(template, str):
                raise InputError(path, "must be a string", field=f"{step}.{part}")
            try:
                used = _placeholders(template)
                string.Template(template).substitute(dict.fromkeys(used, ""))
            except ValueError as error:
                raise InputError(
                    path, f"bad placeholder: {error}", field=f"{step}.{part}"
                ) from None
            unknown = used - ALLOWED[step]
            if unknown:
                raise InputError(
                    path,
                    f"unknown placeholder(s) {', '.join(sorted(unknown))}; allowed: "
                    f"{', '.join(sorted(ALLOWED[step]))}",
                    field=f"{step}.{part}",
                )
        used = _placeholders(spec["user"]) | _placeholders(spec.get("system") or "")
        missing = REQUIRED[step] - used
        if missing:
            raise InputError(
                path, f"must use ${{{'}, ${'.join(sorted(missing))}}}", field=f"{step}.user"
            )
    for step, key, low in (("characters", "count", 1), ("scenarios", "count", 1)):
        if not isinstance(data[step].get(key, 1), int) or data[step].get(key, 1) < low:
            raise InputError(path, f"must be an integer >= {low}", field=f"{step}.{key}")
    rounds = data["rewrite"].get("rounds", REWRITE_ROUNDS)
    if not isinstance(rounds, int) or rounds < 0:
        raise InputError(path, "must be an integer >= 0", field="rewrite.rounds")
    return Prompts(
        path=str(path),
        steps={step: data[step] for step in STEPS},
        attributes=options,
        sha256=sha256,
    )


def _options(path: Path, name: str, values: Any) -> list[Option]:
    """An attribute's options: plain strings (weight 1) or mappings with ``value`` and
    ``weight`` (and ``words`` for a length, ``query_lengths`` and ``long_doc`` for a type)."""
    field = f"attributes.{name}"
    if not isinstance(values, list) or not values:
        raise InputError(path, "must be a non-empty list of values", field=field)
    options = []
    for i, item in enumerate(values):
        where = f"{field}.{i}"
        if isinstance(item, str):
            item = {"value": item}
        if not isinstance(item, dict) or not isinstance(item.get("value"), str):
            raise InputError(path, "must be a string or a mapping with a 'value'", field=where)
        own = {"query_length": {"words"}, "query_type": {"query_lengths", "long_doc"}}
        unknown = set(item) - {"value", "weight", *own.get(name, ())}
        if unknown:
            raise InputError(
                path, f"unknown key(s) for {name}: {', '.join(sorted(unknown))}", field=where
            )
        weight = item.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            raise InputError(path, "must be a number > 0", field=f"{where}.weight")
        words = item.get("words")
        if words is not None:
            low, high = (list(words) + [None, None])[:2] if isinstance(words, list) else (-1, 0)
            if not (isinstance(low, int) and low >= 0 and (high is None or high >= low)):
                raise InputError(path, "must be [least, most or null]", field=f"{where}.words")
            words = (low, high)
        lengths = item.get("query_lengths")
        if lengths is not None:
            if not (
                isinstance(lengths, list)
                and lengths
                and all(isinstance(v, str) and v.strip() for v in lengths)
            ):
                raise InputError(
                    path,
                    "must be a non-empty list of query_length values",
                    field=f"{where}.query_lengths",
                )
            lengths = tuple(v.strip() for v in lengths)
        long_doc = item.get("long_doc", True)
        if not isinstance(long_doc, bool):
            raise InputError(path, "must be true or false", field=f"{where}.long_doc")
        if not item["value"].strip():
            raise InputError(path, "must be a non-empty string", field=f"{where}.value")
        options.append(Option(item["value"].strip(), float(weight), words, lengths, long_doc))
    return options
