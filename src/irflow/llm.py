"""llm: any OpenAI-compatible chat endpoint, with every answer cached in Parquet.

One client for every stage that asks a language model (``generate``, and the judge of quality
control): ``LLMClient.complete(requests)`` takes a list of ``Request`` (messages and optional
parameters) and returns one ``Answer`` per request, in order. Requests run concurrently, at most
``max_concurrency`` at a time, with a progress bar showing rate and ETA.

Decisions:
- HTTP goes through the official ``openai`` client, which works with vLLM, Ollama, llama.cpp's
  server and OpenAI itself. Its own retries do the HTTP failures: a 408, 409, 429 or 5xx answer
  or a timeout is retried up to ``max_retries`` times with exponential backoff, honouring
  ``Retry-After``. A request that still fails is reported as dropped with its reason (``http_429``,
  ``http_500``, ``timeout``, ``connection``, ...) and is not cached, so a later run asks again.
- Content failures are not HTTP failures: a 200 response whose body is not a chat completion
  (``malformed_response``), an answer cut off by ``max_tokens`` (``truncated``), an empty answer
  (``empty``), an answer that is not JSON when JSON was asked for (``malformed_json``), or one
  that the request's ``check`` rejects (``invalid_answer``). Together they are asked at most
  ``reasks`` more times. An unusable answer is re-asked with the next seed (seed + 1, + 2, ...),
  so that a sampling model answers differently; a malformed body is asked again unchanged. When
  the last ask fails too, the request is dropped with that reason.
- Every chat completion received is cached, good or bad, keyed by the SHA-256 of the model name,
  the messages and every parameter that changes the answer (temperature, seed, max_tokens, JSON
  mode). The endpoint's address is not in the key, so moving a model to another server keeps its
  cache. A rerun replays the same answers and the same re-asks from the cache: it makes no
  request, unless an earlier one was dropped for an HTTP failure. The API key is never stored: the
  config names the environment variable that holds it, read only when a request must be sent,
  so a fully cached run needs no key.
- The cache is a folder of Parquet files (``cache_dir``; not a rule's output, so Snakemake never
  deletes it with a failed job's outputs). Each answer is written at once, as a part file of its
  own (atomically: a temporary name, then ``os.replace``), so a killed job loses no finished
  answer. At the end of ``complete`` this process's parts are merged into one file, and opening
  a folder of more than ``COMPACT_AT`` files compacts it into one. Several processes may share
  the folder; a file that disappears while being read (merged by another) is skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from irflow.errors import ConfigError

log = logging.getLogger(__name__)

CACHE_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("model", pa.string()),
        ("request", pa.string()),  # canonical JSON of what the key hashes
        ("content", pa.string()),
        ("finish_reason", pa.string()),
        ("response_model", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("created_at", pa.string()),
    ]
)
# Settings that change an answer: they are part of every request's cache key.
ANSWER_SETTINGS = ("model", "temperature", "seed", "max_tokens", "json_mode", "reasks")
# Opening a cache folder with more files than this compacts them all into one.
COMPACT_AT = 32
DEFAULTS = {
    "base_url": "http://127.0.0.1:8000/v1",
    "model": None,
    "api_key_env": None,
    "temperature": 0.7,
    "seed": 0,
    "max_tokens": 1024,
    "json_mode": False,
    "reasks": 2,
    "max_concurrency": 8,
    "timeout_s": 120.0,
    "max_retries": 5,
    "cache_dir": "results/llm-cache",
}


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


def parse_json(text: str) -> Any:
    """The JSON value in a model's answer: the whole text, else the content of a ```json fence,
    else the span from the first ``{`` or ``[`` to the last matching bracket. Raises ValueError
    when none parses."""
    text = text.strip()
    candidates = [text] + FENCE.findall(text)
    for opener, closer in ("{}", "[]"):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ValueError(f"no JSON value in the answer: {text[:80]!r}")


# --- the cache --------------------------------------------------------------------------------


class AnswerCache:
    """Chat completions by cache key, in a folder of Parquet files; thread-safe.

    Each answer is written at once as a part file of its own; ``merge`` turns this process's
    parts into one file, and opening a folder of more than ``COMPACT_AT`` files compacts them.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.records: dict[str, dict] = {}
        self.parts: list[Path] = []  # written by this process since the last merge
        files = self._load()
        if len(files) > COMPACT_AT:
            self._replace(files, list(self.records.values()))

    def _load(self) -> list[Path]:
        loaded = []
        for path in sorted(self.folder.glob("*.parquet")):
            try:
                table = pq.read_table(path)
            except FileNotFoundError:
                continue  # merged away by another process meanwhile; its merge has the rows
            except (pa.ArrowInvalid, OSError) as error:
                log.warning("skipping unreadable cache file %s: %s", path, error)
                continue
            for row in table.to_pylist():
                self.records[row["key"]] = row
            loaded.append(path)
        return loaded

    def __len__(self) -> int:
        return len(self.records)

    def get(self, key: str) -> dict | None:
        with self.lock:
            return self.records.get(key)

    def put(self, record: dict) -> None:
        """Keep ``record`` and write it to disk at once, as a part file of its own."""
        path = self.folder / f"part-{uuid.uuid4().hex}.parquet"
        self._write([record], path)
        with self.lock:
            self.records[record["key"]] = record
            self.parts.append(path)

    def _write(self, rows: list[dict], path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        pq.write_table(pa.Table.from_pylist(rows, CACHE_SCHEMA), tmp)
        os.replace(tmp, path)

    def _replace(self, files: list[Path], rows: list[dict]) -> None:
        """Write ``rows`` as one file, then delete ``files``: a crash in between leaves
        duplicates, never a loss."""
        self._write(rows, self.folder / f"cache-{uuid.uuid4().hex}.parquet")
        for path in files:
            path.unlink(missing_ok=True)

    def merge(self) -> None:
        """Replace the parts this process wrote by one file holding their rows."""
        with self.lock:
            parts, self.parts = self.parts, []
            if len(parts) < 2:
                return
            rows = []
            for path in parts:
                rows += pq.read_table(path).to_pylist()
            self._replace(parts, rows)


# --- the client -------------------------------------------------------------------------------


def settings_from_config(llm: dict) -> dict:
    """The ``llm`` config block with defaults filled in (the schema fills them in the workflow;
    this serves direct callers)."""
    settings = DEFAULTS | dict(llm)
    if not settings.get("model"):
        raise ConfigError("config key 'llm.model': needed to ask a language model")
    return settings


def answer_settings(llm: dict) -> dict:
    """The settings that change answers, for Snakemake params: a change to anything else
    (address, concurrency, timeout) reruns nothing."""
    settings = settings_from_config(llm)
    return {key: settings[key] for key in ANSWER_SETTINGS}


def api_key(env_name: str | None) -> str:
    if env_name is None:
        return "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any key
    value = os.environ.get(env_name)
    if not value:
        raise ConfigError(
            f"config key 'llm.api_key_env': the environment variable {env_name!r} is not set "
            "(it must hold the API key)"
        )
    return value


class LLMClient:
    """Asks an OpenAI-compatible endpoint, through the cache.

    ``llm`` is the ``llm`` config block; ``cache_dir`` overrides its ``cache_dir``. ``stats``
    counts, over the client's life: ``requests`` (answers asked of the endpoint, re-asks
    included), ``http_attempts`` (HTTP requests sent, the openai client's retries included),
    ``cache_hits`` (requests answered without asking), ``reasks`` (asks after the first, from
    the cache or not), ``dropped`` and the tokens used; ``summary()`` adds the reasons.
    """

    def __init__(self, llm: dict, cache_dir: str | Path | None = None, progress: bool = True):
        import openai

        # One INFO line per HTTP request would bury the job's log; retries are still logged.
        for name in ("httpx", "httpx2"):
            if logging.getLogger(name).level == logging.NOTSET:
                logging.getLogger(name).setLevel(logging.WARNING)
        self.settings = settings_from_config(llm)
        self.cache = AnswerCache(cache_dir or self.settings["cache_dir"])
        self.progress = progress
        self.stats: Counter = Counter()
        self.failures: Counter = Counter()  # dropped requests by reason
        self.problems: Counter = Counter()  # every failed answer by reason, re-asked or not
        self._lock = threading.Lock()
        self._openai = openai
        self._client = None
        if self.settings["api_key_env"] is not None and not os.environ.get(
            self.settings["api_key_env"]
        ):
            # Not an error yet: a run whose every answer is cached needs no key.
            log.warning(
                "environment variable %s (llm.api_key_env) is not set; only cached answers "
                "can be used",
                self.settings["api_key_env"],
            )

    @property
    def client(self):
        """The openai client, made at the first request that the cache cannot answer."""
        with self._lock:
            if self._client is None:
                openai = self._openai
                hooks = {"request": [self._count_attempt]}
                self._client = openai.OpenAI(
                    base_url=self.settings["base_url"],
                    api_key=api_key(self.settings["api_key_env"]),
                    timeout=float(self.settings["timeout_s"]),
                    max_retries=int(self.settings["max_retries"]),
                    http_client=openai.DefaultHttpxClient(event_hooks=hooks),
                )
            return self._client

    def _count_attempt(self, _request) -> None:
        with self._lock:
            self.stats["http_attempts"] += 1

    def _count(self, counter: Counter, name: str, amount: int = 1) -> None:
        with self._lock:
            counter[name] += amount

    # --- one request ----------------------------------------------------------------------

    def payload(self, request: Request, seed: int | None) -> dict:
        """The request's body (a None seed is left out when sending); the cache key hashes
        exactly this."""
        s = self.settings
        payload = {
            "model": s["model"],
            "messages": [dict(m) for m in request.messages],
            "temperature": s["temperature"] if request.temperature is None else request.temperature,
            "max_tokens": s["max_tokens"] if request.max_tokens is None else request.max_tokens,
            "seed": seed,
        }
        if request.json and s["json_mode"]:
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _ask(self, payload: dict) -> tuple[dict | None, str | None, str | None]:
        """(cache record, None, None) for a chat completion, else (None, reason, detail)."""
        openai = self._openai
        body = {k: v for k, v in payload.items() if v is not None}
        client = self.client  # a missing API key stops the run here, not as a failed answer
        self._count(self.stats, "requests")
        try:
            completion = client.chat.completions.create(**body)
        except openai.APITimeoutError as error:
            return None, "timeout", str(error)
        except openai.APIConnectionError as error:
            return None, "connection", str(error)
        except openai.APIStatusError as error:
            return None, f"http_{error.status_code}", _short(error.message)
        except (openai.APIResponseValidationError, json.JSONDecodeError) as error:
            return None, "malformed_response", _short(str(error))
        choices = getattr(completion, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            return None, "malformed_response", f"no choices in the response: {completion!r:.120}"
        usage = getattr(completion, "usage", None)
        if usage is not None:
            self._count(self.stats, "prompt_tokens", usage.prompt_tokens or 0)
            self._count(self.stats, "completion_tokens", usage.completion_tokens or 0)
        return (
            {
                "key": cache_key(payload),
                "model": payload["model"],
                "request": canonical_json(payload),
                "content": choices[0].message.content,
                "finish_reason": choices[0].finish_reason,
                "response_model": getattr(completion, "model", None),
                "prompt_tokens": getattr(usage, "prompt_tokens", None),
                "completion_tokens": getattr(usage, "completion_tokens", None),
                "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            },
            None,
            None,
        )

    @staticmethod
    def judge(request: Request, record: dict) -> Answer:
        """An answer from a cached completion; ``error`` set when its content is unusable."""
        text = record["content"]
        answer = Answer(text=text, finish_reason=record["finish_reason"], key=record["key"])
        if record["finish_reason"] == "length":
            answer.error, answer.detail = "truncated", "the answer reached max_tokens"
        elif not text or not text.strip():
            answer.error, answer.detail = "empty", "the answer is empty"
        elif request.json:
            try:
                answer.data = parse_json(text)
            except ValueError as error:
                answer.error, answer.detail = "malformed_json", str(error)
                return answer
            problem = request.check(answer.data) if request.check else None
            if problem:
                answer.error, answer.detail = "invalid_answer", problem
        return answer

    def _complete_one(self, request: Request) -> Answer:
        base_seed = self.settings["seed"] if request.seed is None else request.seed
        cached = True
        answer = Answer()
        offset = 0  # how far the seed has moved: once per unusable answer
        asks = 0
        while asks <= self.settings["reasks"]:
            asks += 1
            seed = base_seed + offset if base_seed is not None else (offset or None)
            payload = self.payload(request, seed)
            key = cache_key(payload)
            record = self.cache.get(key)
            if record is None:
                cached = False
                record, reason, detail = self._ask(payload)
                if record is None:
                    # An HTTP failure that outlived the openai client's retries ends here; a
                    # body that is no chat completion was lost in transit: the same request is
                    # asked again, so that its answer is cached under this key.
                    self._count(self.problems, reason)
                    answer = Answer(error=reason, detail=detail, key=key)
                    if reason != "malformed_response":
                        break
                    continue
                self.cache.put(record)
            answer = self.judge(request, record)
            if answer.ok:
                break
            self._count(self.problems, answer.error)
            offset += 1
        answer.cached = cached
        answer.asks = asks
        self._count(self.stats, "reasks", asks - 1)
        if cached:
            self._count(self.stats, "cache_hits")
        if not answer.ok:
            self._count(self.failures, answer.error)
            self._count(self.stats, "dropped")
        return answer

    # --- many requests --------------------------------------------------------------------

    def complete(self, requests: Sequence[Request], desc: str = "llm") -> list[Answer]:
        """One answer per request, in the order of ``requests``."""
        answers: list[Answer | None] = [None] * len(requests)
        bar = tqdm(
            total=len(requests),
            desc=desc,
            unit="req",
            disable=not self.progress,
            mininterval=1.0,
            dynamic_ncols=True,
        )
        workers = max(1, min(int(self.settings["max_concurrency"]), len(requests) or 1))
        pool = ThreadPoolExecutor(workers, thread_name_prefix="llm")
        try:
            futures = {pool.submit(self._complete_one, r): i for i, r in enumerate(requests)}
            for future in as_completed(futures):
                answers[futures[future]] = future.result()
                bar.update(1)
                stats = self.stats
                bar.set_postfix(cached=stats["cache_hits"], dropped=stats["dropped"], refresh=False)
        except BaseException:
            # An error or Ctrl-C: start nothing more; what finished is already on disk.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            pool.shutdown(wait=True)
            bar.close()
            self.cache.merge()
        return answers  # type: ignore[return-value]

    def summary(self) -> dict:
        """What a manifest records: the endpoint's model and the counts."""
        return {
            "model": self.settings["model"],
            "client": f"openai {self._openai.__version__}",
            "base_url": self.settings["base_url"],
            "temperature": self.settings["temperature"],
            "seed": self.settings["seed"],
            "max_tokens": self.settings["max_tokens"],
            "requests": self.stats["requests"],
            "http_attempts": self.stats["http_attempts"],
            "cache_hits": self.stats["cache_hits"],
            "reasks": self.stats["reasks"],
            "dropped": self.stats["dropped"],
            "dropped_by_reason": dict(sorted(self.failures.items())),
            "failed_answers_by_reason": dict(sorted(self.problems.items())),
            "prompt_tokens": self.stats["prompt_tokens"],
            "completion_tokens": self.stats["completion_tokens"],
            "cache_entries": len(self.cache),
        }

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
