"""redact: URLs as they may be written anywhere (logs, manifests, Parquet metadata, the
database), without the secrets a URL can carry.

A URL's userinfo (``https://user:password@host``), its query string (``?token=...``,
pre-signed S3 ``X-Amz-Signature=...``, GCS ``X-Goog-Signature=...``) and its fragment are
where credentials hide, so all three are dropped; the scheme, host, port and path remain,
which say where a file came from.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

# A URL inside free text (an exception's message); its end is the first space or quote.
URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s'\"<>]+")


def public_url(url: str) -> str:
    """``url`` without userinfo, query string and fragment (where keys hide)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def public_urls_in(text: str) -> str:
    """``text`` with every URL in it made public (``public_url``)."""
    return URL_IN_TEXT.sub(lambda match: public_url(match.group(0)), text)


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
    if isinstance(value, str) and URL_IN_TEXT.fullmatch(value):
        return public_url(value)
    return value
