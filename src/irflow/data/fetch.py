"""fetch: one URL to one local file over HTTP(S) with httpx, retried with tenacity, resumed,
and verified against an md5 before it takes the file's name.

A ``.part`` file has a record beside it (``<name>.part.json``): a digest of the URL it came
from and the validator (strong ETag, else Last-Modified) of the file it is a prefix of. It is
resumed only from the same URL, with ``If-Range`` carrying that validator, so a file changed
on the server since, or a partial file of another host (a mirror), is fetched again from its
first byte. What is logged or raised names the public URL (irflow.core.redaction), never its
userinfo or query string.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import httpx
import tenacity

from irflow.core.errors import DownloadError
from irflow.core.fingerprint import file_md5
from irflow.core.progress import LoggedProgress
from irflow.core.redaction import PublicUrls, public_url, public_urls_in
from irflow.data.download_cache import digest

log = logging.getLogger("irflow.data.download")
# httpx logs each request's whole URL; the job's log gets it without userinfo and query.
logging.getLogger("httpx").addFilter(PublicUrls())

MAX_BACKOFF_S = 60
PART_RECORD_SUFFIX = ".json"

# Module level so tests can replace the backoff wait with a no-op.
_sleep = time.sleep


class _UnexpectedRange(OSError):
    """The server answered a Range request with another range; retried from the start."""


# --- the .part file and its record ------------------------------------------------------------


def _record_path(part: Path) -> Path:
    return part.with_name(part.name + PART_RECORD_SUFFIX)


def validator(response: httpx.Response) -> str | None:
    """What ``If-Range`` may carry for this response's file. RFC 9110, 13.1.5: "A client MUST
    NOT generate an If-Range header field containing an entity tag that is marked as weak",
    and a date only when the client has no entity tag."""
    etag = response.headers.get("ETag")
    if etag and not etag.startswith("W/"):
        return etag
    return response.headers.get("Last-Modified")


def start_part(part: Path, url: str, response: httpx.Response) -> None:
    """Record, before ``part`` gets its first byte, the URL and validator it is written from."""
    record = {"url_sha256": digest(url), "validator": validator(response)}
    _record_path(part).write_text(json.dumps(record) + "\n")


def discard_part(part: Path) -> None:
    part.unlink(missing_ok=True)
    _record_path(part).unlink(missing_ok=True)


def resume_validator(part: Path, url: str) -> str | None:
    """The validator to resume ``part`` from ``url`` with, or None when it cannot be resumed
    (then it is discarded): written from another URL, or its file had no validator."""
    if not part.exists():
        return None
    try:
        record = json.loads(_record_path(part).read_text())
    except (OSError, ValueError):
        record = {}
    if record.get("url_sha256") != digest(url):
        log.info("%s was written from another URL; downloading from the start", part.name)
    elif not record.get("validator"):
        log.info("%s cannot be checked against %s (no ETag or Last-Modified); downloading from "
                 "the start", part.name, public_url(url))  # fmt: skip
    else:
        return record["validator"]
    discard_part(part)
    return None


# --- HTTP -------------------------------------------------------------------------------------


def _transfer(client: httpx.Client, url: str, part: Path) -> None:
    """One request, appending to ``part`` when it can be resumed: written from this URL, and
    the server still has the same file (``If-Range``) and honours the Range request."""
    resume_with = resume_validator(part, url)
    offset = part.stat().st_size if resume_with else 0
    # RFC 9110, 13.1.5: with If-Range, "if the validator does not match, the server MUST
    # ignore the Range header field" and sends the whole file, new, with 200.
    headers = {"Range": f"bytes={offset}-", "If-Range": resume_with} if offset else {}
    with client.stream("GET", url, headers=headers) as response:
        if response.status_code == 416:  # the .part is no prefix of this file: start over
            discard_part(part)
        response.raise_for_status()
        resuming = offset > 0 and response.status_code == 206
        content_range = response.headers.get("Content-Range", "")
        if resuming and not content_range.startswith(f"bytes {offset}-"):
            discard_part(part)
            raise _UnexpectedRange(f"server sent {content_range!r} for bytes={offset}-")
        if resuming:
            log.info("resuming %s at byte %d", public_url(url), offset)
        else:
            if offset:
                log.info(
                    "%s sent the whole file (changed since, or no Range support); downloading "
                    "from the start",
                    public_url(url),
                )
                offset = 0
            start_part(part, url, response)
        length = response.headers.get("Content-Length")
        with (
            part.open("ab" if resuming else "wb") as out,
            LoggedProgress(
                desc=f"download {part.name.removesuffix('.part')}",
                total=offset + int(length) if length is not None else None,
                initial=offset,
                unit="B",
            ) as progress,
        ):
            # Each piece as it arrives, so a killed job keeps every byte it received. httpx
            # raises if the body ends short of Content-Length, and the retry resumes.
            for chunk in response.iter_raw():
                out.write(chunk)
                progress.update(len(chunk))


def _worth_retrying(error: BaseException) -> bool:
    """Network failures, server errors and a range the .part made invalid; other client errors,
    and a URL scheme httpx cannot fetch (``file://``), will not change on retry."""
    if isinstance(error, httpx.HTTPStatusError):
        code = error.response.status_code
        return code >= 500 or code in (408, 416, 429)
    if isinstance(error, httpx.UnsupportedProtocol):
        return False
    return isinstance(error, (httpx.TransportError, _UnexpectedRange))


def _reason(error: Exception) -> str:
    """Why a request failed, in one line without a URL's secrets (httpx names the URL)."""
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code} {error.response.reason_phrase}"
    return public_urls_in(str(error)) or type(error).__name__


def _log_retry(url: str):
    """tenacity's before_sleep: one warning per retry, naming the public URL (tenacity's own
    ``before_sleep_log`` writes the exception's text, which holds the whole URL)."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        log.warning(
            "%s: %s; retrying in %.1f s (attempt %d failed)",
            public_url(url),
            _reason(state.outcome.exception()),
            state.next_action.sleep,
            state.attempt_number,
        )

    return before_sleep


def fetch_url(
    url: str,
    dest: Path,
    *,
    md5: str | None = None,
    retries: int = 4,
    backoff_s: float = 1.0,
    timeout_s: float = 60,
) -> Path:
    """Download ``url`` to ``dest``, resuming and retrying; only a verified file reaches dest."""
    if dest.is_file():
        if md5 is None or file_md5(dest) == md5:
            return dest
        log.warning("%s does not match md5 %s; downloading it again", dest, md5)
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(retries + 1),
        wait=tenacity.wait_exponential(multiplier=backoff_s, max=MAX_BACKOFF_S),
        retry=tenacity.retry_if_exception(_worth_retrying),
        sleep=_sleep,
        before_sleep=_log_retry(url),
        reraise=True,
    )
    # identity: the bytes on disk are the file's bytes, so a Range request can resume them.
    client = httpx.Client(
        timeout=timeout_s, follow_redirects=True, headers={"Accept-Encoding": "identity"}
    )
    try:
        with client:
            retrying(_transfer, client, url, part)
    except (httpx.HTTPError, _UnexpectedRange) as exc:
        attempts = retrying.statistics.get("attempt_number", 1)
        tries = f"{attempts} attempts" if attempts > 1 else "1 attempt"
        raise DownloadError(f"{public_url(url)}: {_reason(exc)} (after {tries})") from exc
    if md5 is not None:
        actual = file_md5(part)
        if actual != md5:
            discard_part(part)
            raise DownloadError(
                f"{public_url(url)}: checksum mismatch: expected md5 {md5}, got {actual}"
            )
    os.replace(part, dest)
    discard_part(part)  # its record
    return dest
