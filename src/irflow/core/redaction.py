"""redaction: secrets kept out of what irflow records (logs, manifests, tables), and the check
that a secret goes over plain HTTP only to this machine.

``public_url`` is how a URL is written anywhere (logs, manifests, Parquet metadata, the
database): a URL's userinfo (``https://user:password@host``), its query string
(``?token=...``, pre-signed S3 ``X-Amz-Signature=...``, GCS ``X-Goog-Signature=...``) and its
fragment are where credentials hide, so all three are dropped; the scheme, host, port and path
remain, which say where a file came from.

``redact`` is for every text that may quote a URL or a provider's error: it masks given
secrets, drops URLs' userinfo, query and fragment, and masks key-like strings. Its regular
expressions take time linear in the text (no nested or overlapping quantifiers that
backtrack), and it keeps only the first ``MAX_REDACTED_CHARS`` characters, so a hostile
40 KB error body or a 50 MB answer costs milliseconds, not minutes.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

# What redact keeps of a longer text; what is recorded is a short excerpt anyway.
MAX_REDACTED_CHARS = 10_000
MASK = "***"
# A URL inside free text (an exception's message); its end is the first space or quote. The
# scheme is bounded (RFC 3986 schemes are short), so a long run of letters is scanned once.
URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s'\"<>]+")
# A named value: "Bearer <key>", "api_key=<key>", "token: <key>" (the name is kept).
NAMED_SECRET = re.compile(
    r"(?i)(\bbearer\s+|\b(?:api[_-]?key|access[_-]?token|token|secret|password)"
    r"[\"']?\s*[=:]\s*[\"']?)[^\s\"',;&]+"
)
# A provider's key prefix: sk-..., hf_..., gsk_...
PREFIXED_KEY = re.compile(r"(?i)\b(?:sk|pk|rk|hf|gsk|xai|key)[-_][A-Za-z0-9_-]{8,}")
# A whole run of 32 or more key characters; masked when it mixes letters and digits (a key,
# not a word). Matching only at a run's start keeps the scan linear.
LONG_RUN = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{32,}")
DIGIT, LETTER = re.compile(r"\d"), re.compile(r"[A-Za-z]")
LOOPBACK_NAMES = {"localhost"}


def public_url(url: str) -> str:
    """``url`` without userinfo, query string and fragment (where keys hide)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def public_urls_in(text: str) -> str:
    """``text`` with every URL in it made public (``public_url``)."""
    return URL.sub(lambda match: public_url(match.group(0)), text)


class PublicUrls(logging.Filter):
    """Make every URL in a log record public; for libraries that log whole URLs (httpx logs
    each request's, query string included, at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = public_urls_in(record.getMessage()), None
        return True


def public_urls_of(value):
    """``value`` (a config: dicts, lists, strings) with each string that is a URL made public."""
    if isinstance(value, dict):
        return {key: public_urls_of(item) for key, item in value.items()}
    if isinstance(value, list):
        return [public_urls_of(item) for item in value]
    if isinstance(value, str) and URL.fullmatch(value):
        return public_url(value)
    return value


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with ``secrets`` masked, URLs made public and key-like strings masked; past
    ``MAX_REDACTED_CHARS`` it is cut (at a space, so no half key is left) and ends in "…"."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    if len(text) > MAX_REDACTED_CHARS:
        head = text[:MAX_REDACTED_CHARS].rsplit(maxsplit=1)
        text = (head[0] if len(head) == 2 else "") + " …"
    text = public_urls_in(text)
    text = NAMED_SECRET.sub(lambda m: m.group(1) + MASK, text)
    text = LONG_RUN.sub(_mask_key, text)
    return PREFIXED_KEY.sub(MASK, text)


def _mask_key(match: re.Match) -> str:
    run = match.group(0)
    return MASK if DIGIT.search(run) and LETTER.search(run) else run


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine: 127.0.0.0/8, ::1 or localhost."""
    host = (urlsplit(url).hostname or "").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cleartext_to_another_host(url: str) -> bool:
    """Whether a secret sent to ``url`` would cross the network unencrypted: plain
    ``http://`` to any host but this machine."""
    return urlsplit(url).scheme.lower() == "http" and not is_loopback(url)
