"""messages: a chat ``Request`` and its ``Answer``, the cache key of a request, the JSON in a
model's answer, and secrets kept out of what is recorded."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# --- secrets out of what is recorded ----------------------------------------------------------

URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
KEY_LIKE = re.compile(
    r"(?i)(?:\bbearer\s+|\b(?:api[_-]?key|access[_-]?token|token|secret|password)"
    r"[\"']?\s*[=:]\s*[\"']?)[^\s\"',;&]+"
    r"|\b(?:sk|pk|rk|hf|gsk|xai|key)[-_][A-Za-z0-9_-]{8,}"
    r"|\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}"
)
MASK = "***"


def public_url(url: str) -> str:
    """``url`` without userinfo, query string and fragment (where keys hide)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with URLs made public, ``secrets`` and key-like strings masked."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    text = URL.sub(lambda m: public_url(m.group(0)), text)
    return KEY_LIKE.sub(lambda m: _mask(m.group(0)), text)


def _mask(found: str) -> str:
    """Keep a ``name=`` or ``Bearer`` prefix, so the text still says what was there."""
    head = re.match(r"(?i)(bearer\s+|[^=:]*[=:]\s*[\"']?)", found)
    return (head.group(0) if head and head.end() < len(found) else "") + MASK


# --- requests and answers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One chat request. Unset parameters take the client's (the ``llm`` config block's).

    ``check`` validates a parsed JSON answer: it returns None when the answer is usable, or a
    sentence saying what is wrong, which makes the answer an ``invalid_answer`` and re-asks.
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


FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
# A reasoning model's thoughts come first; they may hold braces of their own.
THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def parse_json(text: str) -> Any:
    """The JSON value in a model's answer, after any ``<think>...</think>`` block: the whole
    text, else the content of a ```json fence, else the first value that starts at a ``{`` (or,
    failing that, a ``[``) and parses, ignoring what follows it (a second object, prose).
    Raises ValueError when none parses."""
    text = THINKING.sub("", text).strip()
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
    raise ValueError(f"no JSON value in the answer: {text[:80]!r}")
