"""A fake OpenAI-compatible chat server on a loopback port, for tests.

It implements ``POST /v1/chat/completions`` only. Answers are deterministic: a ``responder``
function maps the request body to the answer text (by default an echo of the last user message
as JSON). Failures are scripted per prompt: ``script`` maps a substring of the last user message
to the behaviours of its successive arrivals, for example ``{"cats": ["429", "500", "ok"]}``.
Once a prompt's list is used up it is answered normally. Behaviours:

- ``ok``: a normal answer;
- ``429``: rate limited, with ``Retry-After`` (seconds, ``retry_after``);
- ``500``: an internal error, with ``retry-after-ms`` (``error_delay_ms``) so tests stay fast;
- ``slow``: the answer only after ``slow_seconds``, past the client's timeout;
- ``bad_body``: status 200 with a body that is not JSON;
- ``bad_json``: a well-formed response whose answer text is not JSON;
- ``truncated``: the answer cut in half, with ``finish_reason: "length"``;
- ``down``: a 500 every time (an endpoint that never recovers for this prompt);
- ``401``, ``403``, ``404``: a refused key, a forbidden model, an unknown model, every time;
- ``hold``: the answer only once the test calls ``release()`` (a request held in flight).

Error answers carry ``error_message`` (a provider's words, which may quote secrets). The
response's ``model`` is the requested one, or ``reported_model`` when set (a server serving
another model).

The server listens on 127.0.0.1 only and never contacts anything. Other test modules get the
``fake_llm`` fixture with ``from fake_llm import fake_llm_fixture``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

BEHAVIOURS = (
    "ok",
    "429",
    "500",
    "slow",
    "bad_body",
    "bad_json",
    "truncated",
    "down",
    "401",
    "403",
    "404",
    "hold",
)
LASTING = ("down", "401", "403", "404")  # behaviours that never end for their prompt


def last_user_message(body: dict) -> str:
    users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""


def prompt_words(body: dict) -> int:
    """The fake's prompt tokens: the words of every message, as an endpoint counts the whole
    prompt."""
    return sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))


def echo_responder(body: dict) -> str:
    """The default answer: the last user message and the seed, as JSON."""
    return json.dumps({"echo": last_user_message(body), "seed": body.get("seed")})


class FakeLLM:
    """Start with ``start()`` (or as a context manager); ``base_url`` is then the /v1 root."""

    def __init__(
        self,
        responder: Callable[[dict], str] = echo_responder,
        script: dict[str, list[str]] | None = None,
        retry_after: float = 1,
        error_delay_ms: int = 20,
        slow_seconds: float = 3.0,
        error_message: str = "internal error",
        reported_model: str | None = None,
    ):
        self.responder = responder
        self.script = {marker: list(steps) for marker, steps in (script or {}).items()}
        for steps in self.script.values():
            for step in steps:
                if step not in BEHAVIOURS:
                    raise ValueError(f"unknown behaviour {step!r}; known: {BEHAVIOURS}")
        self.retry_after = retry_after
        self.error_delay_ms = error_delay_ms
        self.slow_seconds = slow_seconds
        self.error_message = error_message
        self.reported_model = reported_model
        self.released = threading.Event()
        self.lock = threading.Lock()
        self.bodies: list[dict] = []
        self.headers: list[dict] = []  # each request's headers, lower-case names
        self.behaviours: Counter = Counter()
        self.arrivals: list[tuple[float, str]] = []  # (time, behaviour) in arrival order
        self.server: ThreadingHTTPServer | None = None

    # --- bookkeeping ----------------------------------------------------------------------

    @property
    def requests(self) -> int:
        """HTTP requests received so far, retries included."""
        with self.lock:
            return len(self.bodies)

    def reset_counts(self) -> None:
        with self.lock:
            self.bodies.clear()
            self.headers.clear()
            self.behaviours.clear()
            self.arrivals.clear()

    def _behaviour(self, body: dict) -> str:
        prompt = last_user_message(body)
        with self.lock:
            self.bodies.append(body)
            chosen = "ok"
            for marker, steps in self.script.items():
                if marker in prompt:
                    if steps and steps[0] in LASTING:
                        chosen = steps[0]
                    elif steps:
                        chosen = steps.pop(0)
                    break
            self.behaviours[chosen] += 1
            self.arrivals.append((time.monotonic(), chosen))
            return chosen

    # --- the answer -----------------------------------------------------------------------

    def completion(self, body: dict, content: str, finish_reason: str = "stop") -> dict:
        return {
            "id": f"chatcmpl-fake-{len(self.bodies)}",
            "object": "chat.completion",
            "created": 0,
            "model": self.reported_model or body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_words(body),
                "completion_tokens": len(content.split()),
                "total_tokens": prompt_words(body) + len(content.split()),
            },
        }

    def release(self) -> None:
        """Let every held request (``hold``) be answered."""
        self.released.set()

    def respond(self, body: dict) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body bytes) for one request."""
        behaviour = self._behaviour(body)
        if behaviour == "429":
            error = {"error": {"message": "rate limited", "type": "rate_limit_exceeded"}}
            return 429, {"Retry-After": str(self.retry_after)}, json.dumps(error).encode()
        if behaviour in ("500", "down"):
            error = {"error": {"message": self.error_message, "type": "server_error"}}
            headers = {"retry-after-ms": str(self.error_delay_ms)}
            return 500, headers, json.dumps(error).encode()
        if behaviour in ("401", "403", "404"):
            error = {"error": {"message": self.error_message, "type": "invalid_request_error"}}
            return int(behaviour), {}, json.dumps(error).encode()
        if behaviour == "slow":
            time.sleep(self.slow_seconds)
        if behaviour == "hold":
            self.released.wait(60)
        if behaviour == "bad_body":
            return 200, {}, b'{"id": "chatcmpl-broken", "choices": [{"message": '
        content = self.responder(body)
        if behaviour == "bad_json":
            content = "Sure! Here is what you asked for, but not as JSON."
        if behaviour == "truncated":
            answer = self.completion(body, content[: max(1, len(content) // 2)], "length")
        else:
            answer = self.completion(body, content)
        return 200, {}, json.dumps(answer).encode()

    # --- the server -----------------------------------------------------------------------

    def start(self) -> FakeLLM:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {}, b'{"error": {"message": "not found"}}')
                    return
                with fake.lock:
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._send(400, {}, b'{"error": {"message": "request body is not JSON"}}')
                    return
                self._send(*fake.respond(body))

            def _send(self, status: int, headers: dict, payload: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout); nothing to answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def base_url(self) -> str:
        assert self.server is not None, "start() the fake server first"
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self) -> None:
        self.released.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@pytest.fixture(name="fake_llm")
def fake_llm_fixture():
    """A running fake endpoint with the echo responder; tests may set ``script`` (a dict of
    prompt substring to behaviours), ``responder`` and the delays before asking."""
    with FakeLLM() as fake:
        yield fake
