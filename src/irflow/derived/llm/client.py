"""llm: any OpenAI-compatible chat endpoint, with every answer cached in Parquet.

One client for every stage that asks a language model (``generate``, and the judge of quality
control): ``LLMClient.complete(requests)`` takes a list of ``Request`` (messages and optional
parameters) and returns one ``Answer`` per request, in order. Requests run concurrently, at most
``max_concurrency`` at a time, their progress logged with rate and ETA (irflow.core.progress).

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
- Checked before it is cached: an answer longer than ``MAX_ANSWER_CHARS`` (``oversized``) or
  from another model than the one asked for (``wrong_model``; a dated snapshot of it, as OpenAI
  answers ``gpt-4o`` with ``gpt-4o-2024-08-06``, is the same model) is dropped unread and not
  cached. Whatever else an answer holds, judging it cannot raise: JSON nested too deeply is
  ``malformed_json``, so a cached bad answer replays as the same drop, never as a crash.
- Where the key may go: no default ``base_url``; with ``api_key_env`` set, a ``base_url`` is
  needed and plain ``http://`` only to this machine (127.0.0.0/8, ::1, localhost), checked
  with the config and again before the first request. A redirect elsewhere loses the key
  (httpx drops ``Authorization`` when a redirect leaves the origin).
- Cost: ``max_requests`` stops a job before it sends more requests than that (re-asks
  included; cached answers are free), with its answers so far cached; documents put into a
  prompt pass ``document``, which cuts them to ``max_document_tokens`` (counted as characters
  / 4) and counts them (``documents_cut``); a job reads from the cache only the answers its
  requests may use (their keys, of its model), not the whole folder.
- Loud failures. A 401, 403 or 404 means a wrong key, model or address: every other request
  would fail alike, so the first one stops the run (``LLMError``, with the endpoint's words).
  ``check_dropped`` fails a stage whose share of dropped answers passes
  ``max_dropped_share``, naming the counts by step and reason.
- ``Retry-After``: openai gives up at once when a server asks to wait more than two minutes;
  ``max_retry_after_s`` makes the client wait that long instead (a subclass of ``openai.OpenAI``
  that changes only that cap, so the retry loop stays openai's).
- What is recorded (manifests, ``dropped`` tables) never holds a secret: URLs lose their
  userinfo and query string, and key-like strings in provider errors are masked
  (``irflow.core.redaction.redact``, in time linear in the text, on its first 10,000
  characters).
- Identical requests in one batch are asked once. Requests run on daemon threads, so Ctrl-C (or
  a fatal error) returns at once instead of waiting for every request in flight; what finished
  is on disk already.
- Tokens are counted from the answers used, cached or not (``prompt_tokens``,
  ``completion_tokens``), and apart for what was asked of the endpoint in this run
  (``requested_prompt_tokens``, ``requested_completion_tokens``).
- The cache is a folder of Parquet files (``cache_dir``; not a rule's output, so Snakemake never
  deletes it with a failed job's outputs). Each answer is written at once, as a part file of its
  own (atomically: a temporary name, then ``os.replace``), so a killed job loses no finished
  answer. At the end of ``complete`` this process's parts are merged into one file, and opening
  a folder of more than ``COMPACT_AT`` files compacts it into one. Several processes may share
  the folder: loading, merging and compacting hold a file lock (``.lock``), and a merge writes
  its rows from memory, because another process's compaction may have folded this one's part
  files into its own file (and deleted them) meanwhile. A file is only deleted after a file
  holding its rows was written, so no answer is lost.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from irflow.core.errors import ConfigError, UserError
from irflow.core.progress import LoggedProgress
from irflow.core.redaction import public_url, redact
from irflow.core.settings_types import Llm2
from irflow.derived.llm.cache import AnswerCache
from irflow.derived.llm.endpoint import (
    api_key,
    key_endpoint_problem,
    patient_client_class,
    same_model,
)
from irflow.derived.llm.messages import Answer, Request, cache_key, canonical_json, parse_json

log = logging.getLogger(__name__)


# Settings that change an answer: they are part of every request's cache key.
ANSWER_SETTINGS = (
    "model",
    "temperature",
    "seed",
    "max_tokens",
    "json_mode",
    "reasks",
    "max_document_tokens",
)
# An answer longer than this is refused unread (``oversized``): no honest answer within
# max_tokens comes near it, and parsing or storing a hostile one would cost minutes and memory.
MAX_ANSWER_CHARS = 1_000_000
# Tokens of a document, counted without the served model's tokenizer: characters / 4, OpenAI's
# rule of thumb for English (as the dry-run estimate counts).
CHARS_PER_TOKEN = 4
# Answers that say the key, the model or the address is wrong: every request would fail alike.
FATAL_STATUSES = {
    401: "the API key was refused",
    403: "access was denied",
    404: "not found: check llm.base_url and llm.model",
}


class LLMError(UserError, RuntimeError):
    """The endpoint cannot serve this run (a refused key, an unknown model or address), or a
    stage lost more answers than ``max_dropped_share`` allows."""


# --- the client -------------------------------------------------------------------------------


def next_result(results: queue.SimpleQueue):
    """The next item of ``results``, waking every 0.2 s: the kernel may deliver Ctrl-C's SIGINT
    to a thread blocked on a request, and Python runs its handler only in the main thread, so
    a main thread asleep in one long wait would ignore it until a request finished."""
    while True:
        try:
            return results.get(timeout=0.2)
        except queue.Empty:
            continue


def settings_from_config(llm: dict) -> Llm2:
    """The ``llm`` config block, typed (irflow.core.settings_types.Llm2: the schema's defaults
    filled in, a key or value the schema refuses refused, naming it). No default endpoint: a
    key must never go to whatever happens to listen on a default port."""
    settings = Llm2.model_validate(llm)
    if not settings.model:
        raise ConfigError("config key 'llm.model': needed to ask a language model")
    return settings


def answer_settings(llm: dict) -> dict:
    """The settings that change answers, for Snakemake params: a change to anything else
    (address, concurrency, timeout) reruns nothing. The values are the config's as written
    (a param's text is what Snakemake compares), the schema's defaults where it has none."""
    return as_written(llm, settings_from_config(llm), ANSWER_SETTINGS)


def as_written(llm: dict, settings: Llm2, keys: Sequence[str]) -> dict:
    """``keys`` of the ``llm`` block as the config writes them (an int temperature stays an
    int, where the typed ``settings`` hold a float), ``settings``' defaults where it has none:
    what params, cache keys and manifests hold, as they always did."""
    return {key: llm.get(key, getattr(settings, key)) for key in keys}


class LLMClient:
    """Asks an OpenAI-compatible endpoint, through the cache.

    ``llm`` is the ``llm`` config block, typed once here (``settings``, an
    irflow.core.settings_types.Llm2); ``cache_dir`` overrides its ``cache_dir``. ``stats``
    counts, over the client's life: ``requests`` (answers asked of the endpoint, re-asks
    included), ``http_attempts`` (HTTP requests sent, the openai client's retries included),
    ``cache_hits`` (requests answered without asking), ``reasks`` (asks after the first, from
    the cache or not), ``dropped``, ``duplicates`` (identical requests of a batch, asked once)
    and the tokens; ``summary()`` adds the reasons. ``answered`` and ``dropped_by_step`` count
    requests by the ``desc`` of their ``complete`` call (the step), for ``check_dropped``.
    """

    def __init__(self, llm: dict, cache_dir: str | Path | None = None, progress: bool = True):
        import openai

        # One INFO line per HTTP request would bury the job's log; retries are still logged.
        for name in ("httpx", "httpx2"):
            if logging.getLogger(name).level == logging.NOTSET:
                logging.getLogger(name).setLevel(logging.WARNING)
        self.settings = settings_from_config(llm)
        # The temperature as the config writes it: each answer's cache key hashes it, and
        # the manifest records it (a float would change both for ``temperature: 1``).
        self.temperature = as_written(llm, self.settings, ["temperature"])["temperature"]
        self.cache = AnswerCache(cache_dir or self.settings.cache_dir, self.settings.model)
        self.progress = progress
        self.stats: Counter = Counter()
        self.failures: Counter = Counter()  # dropped requests by reason
        self.problems: Counter = Counter()  # every failed answer by reason, re-asked or not
        self.answered: Counter = Counter()  # requests by step
        self.dropped_by_step: Counter = Counter()  # dropped requests by (step, reason)
        self.cut_documents: set[str] = set()  # digests of the documents cut to the budget
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._openai = openai
        self._client = None
        self._secrets: tuple[str, ...] = ()
        if self.settings.api_key_env is not None and not os.environ.get(self.settings.api_key_env):
            # Not an error yet: a run whose every answer is cached needs no key.
            log.warning(
                "environment variable %s (llm.api_key_env) is not set; only cached answers "
                "can be used",
                self.settings.api_key_env,
            )

    @property
    def client(self):
        """The openai client, made at the first request that the cache cannot answer."""
        with self._lock:
            if self._client is None:
                openai = self._openai
                hooks = {"request": [self._count_attempt]}
                if not self.settings.base_url:
                    raise ConfigError(
                        "config key 'llm.base_url': needed to send a request (irflow has no "
                        "default endpoint)"
                    )
                problem = key_endpoint_problem(self.settings)
                if problem:
                    raise ConfigError(problem)
                key = api_key(self.settings.api_key_env)
                self._secrets = (key,) if self.settings.api_key_env else ()
                patient = patient_client_class(openai, self.settings.max_retry_after_s)
                self._client = patient(
                    base_url=self.settings.base_url,
                    api_key=key,
                    timeout=float(self.settings.timeout_s),
                    max_retries=self.settings.max_retries,
                    http_client=openai.DefaultHttpxClient(event_hooks=hooks),
                )
            return self._client

    def _count_attempt(self, _request) -> None:
        with self._lock:
            self.stats["http_attempts"] += 1

    def _count(self, counter: Counter, name, amount: int = 1) -> None:
        with self._lock:
            counter[name] += amount

    def _redact(self, text: str) -> str:
        return _short(redact(str(text), self._secrets))

    def document(self, text: str) -> str:
        """``text`` cut to ``max_document_tokens`` (counted as characters / 4), at a space where
        there is one; every document put into a prompt passes here, and the distinct documents
        cut are counted (``documents_cut``)."""
        budget = self.settings.max_document_tokens
        if budget is None or len(text) <= budget * CHARS_PER_TOKEN:
            return text
        limit = budget * CHARS_PER_TOKEN
        head = text[: limit + 1].rsplit(maxsplit=1)
        with self._lock:
            self.cut_documents.add(hashlib.sha256(text.encode()).hexdigest())
        return head[0] if len(head) == 2 else text[:limit]

    # --- one request ----------------------------------------------------------------------

    def payload(self, request: Request, seed: int | None) -> dict:
        """The request's body (a None seed is left out when sending); the cache key hashes
        exactly this."""
        s = self.settings
        payload = {
            "model": s.model,
            "messages": [dict(m) for m in request.messages],
            "temperature": self.temperature if request.temperature is None else request.temperature,
            "max_tokens": s.max_tokens if request.max_tokens is None else request.max_tokens,
            "seed": seed,
        }
        if request.json and s.json_mode:
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _base_seed(self, request: Request) -> int | None:
        return self.settings.seed if request.seed is None else request.seed

    @staticmethod
    def _seed(base_seed: int | None, offset: int) -> int | None:
        return base_seed + offset if base_seed is not None else (offset or None)

    def preload(self, requests: Sequence[Request]) -> None:
        """Read from the cache folder every answer ``requests`` may use: each one's first ask
        and its re-asks (the next seeds); only these are read."""
        keys = []
        for request in requests:
            base_seed = self._base_seed(request)
            for offset in range(self.settings.reasks + 1):
                keys.append(cache_key(self.payload(request, self._seed(base_seed, offset))))
        self.cache.load(keys)

    def cached_record(self, request: Request) -> dict | None:
        """The cached completion of the request's first ask, or None; sends nothing (for dry
        runs that estimate what a run would ask; ``preload`` the requests first)."""
        return self.cache.get(cache_key(self.payload(request, self._base_seed(request))))

    def _ask(self, payload: dict) -> tuple[dict | None, str | None, str | None]:
        """(cache record, None, None) for a chat completion, else (None, reason, detail).
        Raises LLMError when the endpoint refuses the key, the model or the address."""
        openai = self._openai
        body = {k: v for k, v in payload.items() if v is not None}
        client = self.client  # a missing API key stops the run here, not as a failed answer
        with self._lock:  # checked and counted at once, so concurrent asks cannot overshoot
            limit = self.settings.max_requests
            if limit is not None and self.stats["requests"] >= limit:
                raise LLMError(
                    f"llm.max_requests ({limit}) reached: {self.stats['requests']} requests were "
                    f"sent to {payload['model']!r} in this job, and more are needed; stopped "
                    "before sending more. The answers so far are cached: raise or unset "
                    "llm.max_requests (the dry-run estimate says how many a job needs) and run "
                    "again, which asks only what is missing"
                )
            self.stats["requests"] += 1
        try:
            completion = client.chat.completions.create(**body)
        except openai.APITimeoutError as error:
            return None, "timeout", self._redact(error)
        except openai.APIConnectionError as error:
            return None, "connection", self._redact(error)
        except openai.APIStatusError as error:
            if error.status_code in FATAL_STATUSES:
                raise LLMError(
                    f"{public_url(self.settings.base_url)} answered HTTP {error.status_code} "
                    f"for model {payload['model']!r} ({FATAL_STATUSES[error.status_code]}): "
                    f"{self._redact(error.message)}"
                ) from None
            return None, f"http_{error.status_code}", self._redact(error.message)
        except (openai.APIResponseValidationError, json.JSONDecodeError) as error:
            return None, "malformed_response", self._redact(error)
        choices = getattr(completion, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            detail = self._redact(f"no choices in the response: {completion!r:.120}")
            return None, "malformed_response", detail
        usage = getattr(completion, "usage", None)
        if usage is not None:  # paid for, whether the answer is kept or refused
            self._count(self.stats, "requested_prompt_tokens", usage.prompt_tokens or 0)
            self._count(self.stats, "requested_completion_tokens", usage.completion_tokens or 0)
        content, reported = choices[0].message.content, getattr(completion, "model", None)
        if content is not None and len(content) > MAX_ANSWER_CHARS:
            return None, "oversized", oversized(content)
        if not same_model(payload["model"], reported):
            detail = f"the endpoint answered with model {reported!r}, not {payload['model']!r}"
            return None, "wrong_model", self._redact(detail)
        return (
            {
                "key": cache_key(payload),
                "model": payload["model"],
                "request": canonical_json(payload),
                "content": content,
                "finish_reason": choices[0].finish_reason,
                "response_model": reported,
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
        if text is not None and len(text) > MAX_ANSWER_CHARS:  # cached before irflow refused them
            answer.error, answer.detail = "oversized", oversized(text)
        elif record["finish_reason"] == "length":
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
        elif request.check and (problem := request.check(text)):
            answer.error, answer.detail = "invalid_answer", problem
        return answer

    def _complete_one(self, request: Request) -> Answer:
        base_seed = self._base_seed(request)
        cached = True
        answer = Answer()
        offset = 0  # how far the seed has moved: once per unusable answer
        asks = 0
        while asks <= self.settings.reasks:
            if self._stop.is_set():  # interrupted: ask nothing more
                answer = Answer(error="interrupted", detail="the run was stopped")
                break
            asks += 1
            seed = self._seed(base_seed, offset)
            payload = self.payload(request, seed)
            key = cache_key(payload)
            record = self.cache.get(key)
            if record is None:
                cached = False
                record, reason, detail = self._ask(payload)
                if record is None:
                    # An HTTP failure that outlived the openai client's retries ends here, and
                    # so does an answer refused unread (oversized, another model's): none is
                    # cached, so a later run asks again. A body that is no chat completion was
                    # lost in transit: the same request is asked again, so that its answer is
                    # cached under this key.
                    self._count(self.problems, reason)
                    answer = Answer(error=reason, detail=detail, key=key)
                    if reason != "malformed_response":
                        break
                    continue
                self.cache.put(record)
            # Tokens of every answer used, from the cache or not.
            self._count(self.stats, "prompt_tokens", record["prompt_tokens"] or 0)
            self._count(self.stats, "completion_tokens", record["completion_tokens"] or 0)
            answer = self.judge(request, record)
            if answer.ok:
                break
            self._count(self.problems, answer.error)
            offset += 1
        answer.cached = cached
        answer.asks = asks
        self._count(self.stats, "reasks", max(asks - 1, 0))
        if cached:
            self._count(self.stats, "cache_hits")
        if not answer.ok:
            self._count(self.failures, answer.error)
            self._count(self.stats, "dropped")
        return answer

    # --- many requests --------------------------------------------------------------------

    def identity(self, request: Request) -> tuple:
        """What makes two requests the same: their first ask's cache key, JSON or not, and
        their check."""
        payload = self.payload(request, self._base_seed(request))
        return cache_key(payload), request.json, request.check

    def complete(self, requests: Sequence[Request], desc: str = "llm") -> list[Answer]:
        """One answer per request, in the order of ``requests``. ``desc`` names the step in
        the progress bar and in ``check_dropped``'s counts."""
        groups: dict[tuple, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(self.identity(request), []).append(i)
        positions = list(groups.values())
        self._count(self.stats, "duplicates", len(requests) - len(positions))
        self.preload([requests[group[0]] for group in positions])
        answers: list[Answer | None] = [None] * len(requests)
        bar = LoggedProgress(total=len(requests), desc=desc, unit="req", disable=not self.progress)
        results: queue.SimpleQueue = queue.SimpleQueue()

        def work(slot: int) -> None:
            try:
                results.put((slot, self._complete_one(requests[positions[slot][0]]), None))
            except BaseException as error:  # handed to the caller's thread
                results.put((slot, None, error))

        workers = max(1, min(self.settings.max_concurrency, len(positions) or 1))
        todo = iter(range(len(positions)))
        running = 0
        try:
            for _ in range(len(positions)):
                while running < workers and (slot := next(todo, None)) is not None:
                    # Daemon threads: Ctrl-C or a fatal error returns at once instead of
                    # waiting for the requests in flight.
                    threading.Thread(target=work, args=(slot,), daemon=True).start()
                    running += 1
                slot, answer, error = next_result(results)
                running -= 1
                if error is not None:
                    raise error
                for n, i in enumerate(positions[slot]):
                    answers[i] = answer if n == 0 else replace(answer)
                self._count(self.answered, desc, len(positions[slot]))
                if not answer.ok:
                    self._count(self.dropped_by_step, (desc, answer.error), len(positions[slot]))
                bar.update(len(positions[slot]))
                stats = self.stats
                bar.set_postfix(cached=stats["cache_hits"], dropped=stats["dropped"], refresh=False)
        except BaseException:
            self._stop.set()  # the threads still running ask nothing more
            raise
        finally:
            bar.close()
            self.cache.merge()
        return answers  # type: ignore[return-value]

    def check_dropped(self) -> None:
        """Raise LLMError when more than ``max_dropped_share`` of the requests answered so far
        were dropped; the message counts them by step and reason."""
        total = sum(self.answered.values())
        dropped = sum(self.dropped_by_step.values())
        limit = self.settings.max_dropped_share
        if not total or dropped / total <= limit:
            return
        counts = "; ".join(
            f"{n} {reason} at {step!r}"
            for (step, reason), n in sorted(self.dropped_by_step.items())
        )
        raise LLMError(
            f"{dropped} of {total} requests to {self.settings.model!r} were dropped "
            f"({dropped / total:.1%}), more than llm.max_dropped_share allows ({limit:.1%}): "
            f"{counts}"
        )

    def summary(self) -> dict:
        """What a manifest records: the endpoint's model and the counts."""
        return {
            "model": self.settings.model,
            "client": f"openai {self._openai.__version__}",
            "base_url": self.settings.base_url and public_url(self.settings.base_url),
            "temperature": self.temperature,
            "seed": self.settings.seed,
            "max_tokens": self.settings.max_tokens,
            "max_requests": self.settings.max_requests,
            "max_document_tokens": self.settings.max_document_tokens,
            "documents_cut": len(self.cut_documents),
            "requests": self.stats["requests"],
            "http_attempts": self.stats["http_attempts"],
            "cache_hits": self.stats["cache_hits"],
            "duplicates": self.stats["duplicates"],
            "reasks": self.stats["reasks"],
            "dropped": self.stats["dropped"],
            "dropped_by_reason": dict(sorted(self.failures.items())),
            "dropped_by_step": {
                f"{step}/{reason}": n for (step, reason), n in sorted(self.dropped_by_step.items())
            },
            "failed_answers_by_reason": dict(sorted(self.problems.items())),
            "prompt_tokens": self.stats["prompt_tokens"],
            "completion_tokens": self.stats["completion_tokens"],
            "requested_prompt_tokens": self.stats["requested_prompt_tokens"],
            "requested_completion_tokens": self.stats["requested_completion_tokens"],
            "cache_entries_loaded": len(self.cache),
        }

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def oversized(content: str) -> str:
    return (
        f"the answer has {len(content)} characters, more than {MAX_ANSWER_CHARS} (refused unread)"
    )


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
