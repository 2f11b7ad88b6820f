"""messages: a chat ``Request`` and its ``Answer``, the cache key of a request, and the JSON in a
model's answer (secrets are kept out of what is recorded by irflow.core.redaction)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# --- requests and answers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One chat request. Unset parameters take the client's (the ``llm`` config block's).

    ``check`` validates a parsed JSON answer (the answer's text when ``json`` is false): it
    returns None when the answer is usable, or a sentence saying what is wrong, which makes the
    answer an ``invalid_answer`` and re-asks.
    """

    messages: Sequence[dict]
    json: bool = True
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    check: Callable[[Any], str | None] | None = field(default=None, compare=False)


@dataclass
class Answer:
    """The outcome of one request: ``text`` and, for JSON requests, ``data``; or ``error`` (a
    short reason such as ``http_429`` or ``malformed_json``) and ``detail`` when it was dropped.
    ``cached`` is true when no request was needed; ``asks`` counts the answers it took (1 plus
    the re-asks)."""

    text: str | None = None
    data: Any = None
    finish_reason: str | None = None
    error: str | None = None
    detail: str | None = None
    cached: bool = True
    asks: int = 0
    key: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def cache_key(payload: dict) -> str:
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def canonical_json(payload: dict) -> str:
    return json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# The lazy body meets the closing fence first; no quantifier before it, so no backtracking.
FENCE = re.compile(r"```(?:json|JSON)?(.*?)```", re.DOTALL)
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def without_thinking(text: str) -> str:
    """``text`` without its ``<think>...</think>`` blocks (a reasoning model's thoughts come
    first and may hold braces of their own); an unclosed ``<think>`` stays. One pass: a
    regular expression would rescan the rest of the text at every unclosed ``<think>``."""
    lower, kept, position = text.lower(), [], 0
    while (start := lower.find(THINK_OPEN, position)) >= 0:
        end = lower.find(THINK_CLOSE, start + len(THINK_OPEN))
        if end < 0:
            break
        kept.append(text[position:start])
        position = end + len(THINK_CLOSE)
    kept.append(text[position:])
    return "".join(kept)


def parse_json(text: str) -> Any:
    """The JSON value in a model's answer, after any ``<think>...</think>`` block: the whole
    text, else the content of a ```json fence, else the first value that starts at a ``{`` (or,
    failing that, a ``[``) and parses, ignoring what follows it (a second object, prose).
    Raises ValueError when none parses, or at once when a value is nested deeper than Python's
    recursion limit lets ``json`` decode (``[`` * 100000 would otherwise be tried at every
    bracket)."""
    text = without_thinking(text).strip()
    try:
        for candidate in [text, *FENCE.findall(text)]:
            try:
                return json.loads(candidate)
            except ValueError:
                continue
        decoder = json.JSONDecoder()
        for opener in "{[":
            start = text.find(opener)
            while start >= 0:
                try:
                    return decoder.raw_decode(text, start)[0]
                except ValueError:
                    start = text.find(opener, start + 1)
    except RecursionError:
        raise ValueError("the answer's JSON is nested too deeply to decode") from None
    raise ValueError(f"no JSON value in the answer: {text[:80]!r}")
