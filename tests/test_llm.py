"""The LLM client against a fake OpenAI-compatible server on a loopback port: answers in order,
the cache (a rerun makes no request, a killed run keeps its finished answers), the openai
client's retries (429 with Retry-After, 500, timeouts) and the re-ask policy for unusable
answers (malformed body, malformed JSON, truncated, rejected by a check)."""

from __future__ import annotations

import ctypes
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_llm import FakeLLM, fake_llm_fixture  # noqa: F401 (the fake_llm fixture)
from pydantic import ValidationError

from irflow.core.errors import ConfigError
from irflow.core.progress import SECONDS_VARIABLE
from irflow.core.redaction import public_url
from irflow.derived.llm.client import LLMClient, LLMError, answer_settings
from irflow.derived.llm.messages import Request, cache_key, parse_json

TESTS = Path(__file__).resolve().parent


def settings(fake: FakeLLM, **overrides) -> dict:
    return {
        "base_url": fake.base_url,
        "model": "fake-model",
        "timeout_s": 5,
        "max_retries": 3,
        "max_concurrency": 4,
    } | overrides


def ask(text: str, **kwargs) -> Request:
    return Request([{"role": "user", "content": text}], **kwargs)


def client(fake: FakeLLM, cache: Path, **overrides) -> LLMClient:
    return LLMClient(settings(fake, **overrides), cache, progress=False)


def test_answers_come_in_order_and_a_rerun_makes_no_request(fake_llm, tmp_path):
    prompts = [f"prompt {i}" for i in range(20)]
    with client(fake_llm, tmp_path) as llm:
        answers = llm.complete([ask(p) for p in prompts])
        summary = llm.summary()
    assert [a.data["echo"] for a in answers] == prompts
    assert all(a.ok and not a.cached and a.asks == 1 for a in answers)
    assert fake_llm.requests == 20
    assert summary["requests"] == 20 and summary["http_attempts"] == 20
    assert summary["cache_hits"] == 0 and summary["dropped"] == 0
    assert summary["model"] == "fake-model" and summary["completion_tokens"] > 0
    # Each answer was written as its own part, then merged into one file.
    assert len(list(tmp_path.glob("*.parquet"))) == 1
    assert pq.read_table(next(tmp_path.glob("*.parquet"))).num_rows == 20

    fake_llm.reset_counts()
    with client(fake_llm, tmp_path, max_concurrency=1, base_url=fake_llm.base_url) as llm:
        again = llm.complete([ask(p) for p in reversed(prompts)])
        summary = llm.summary()
    assert fake_llm.requests == 0
    assert [a.data["echo"] for a in again] == prompts[::-1]
    assert all(a.cached for a in again)
    assert summary["cache_hits"] == 20 and summary["requests"] == 0


def test_the_key_holds_model_messages_and_answer_parameters(fake_llm, tmp_path):
    with client(fake_llm, tmp_path, max_concurrency=1) as llm:  # requests arrive in order
        llm.complete([ask("same")])
        llm.complete([ask("same", temperature=0.0), ask("same", max_tokens=7), ask("same")])
    assert fake_llm.requests == 3  # the plain repeat came from the cache
    sent = fake_llm.bodies
    assert [b.get("temperature") for b in sent] == [0.7, 0.0, 0.7]
    assert [b.get("max_tokens") for b in sent] == [1024, 1024, 7]
    assert all(b["seed"] == 0 and b["model"] == "fake-model" for b in sent)
    with client(fake_llm, tmp_path, model="another-model") as llm:
        llm.complete([ask("same")])
    assert fake_llm.requests == 4
    base = {"model": "m", "messages": [], "temperature": 0.7, "max_tokens": 9, "seed": 0}
    assert cache_key(base) == cache_key(dict(reversed(base.items())))
    assert cache_key(base) != cache_key(base | {"seed": 1})


def test_a_429_is_retried_after_its_retry_after(tmp_path):
    with FakeLLM(script={"limited": ["429", "ok"]}, retry_after=1) as fake:
        with client(fake, tmp_path) as llm:
            [answer] = llm.complete([ask("limited")])
            summary = llm.summary()
        arrivals = list(fake.arrivals)
    assert answer.ok and answer.data["echo"] == "limited"
    assert [b for _, b in arrivals] == ["429", "ok"]
    assert arrivals[1][0] - arrivals[0][0] >= 0.9  # Retry-After: 1 was honoured
    assert summary["requests"] == 1 and summary["http_attempts"] == 2
    assert summary["dropped"] == 0


def test_server_errors_are_retried_and_a_lasting_one_is_dropped_uncached(tmp_path):
    script = {"flaky": ["500", "500", "ok"], "broken": ["down"]}
    with FakeLLM(script=script) as fake:
        with client(fake, tmp_path, max_retries=3) as llm:
            flaky, broken, fine = llm.complete([ask("flaky"), ask("broken"), ask("fine")])
            summary = llm.summary()
        assert fake.behaviours == {"500": 2, "ok": 2, "down": 4}
        assert flaky.ok and fine.ok
        assert (broken.ok, broken.error) == (False, "http_500")
        assert "internal error" in broken.detail
        assert summary["dropped_by_reason"] == {"http_500": 1}
        assert summary["http_attempts"] == 3 + 4 + 1 and summary["requests"] == 3

        # A rerun asks only the dropped request again; the endpoint still fails it.
        fake.reset_counts()
        with client(fake, tmp_path, max_retries=1) as llm:
            again = llm.complete([ask("flaky"), ask("broken"), ask("fine")])
        assert fake.requests == 2 and fake.behaviours == {"down": 2}
        assert [a.error for a in again] == [None, "http_500", None]


def test_a_timeout_is_retried_and_a_lasting_one_is_dropped(tmp_path):
    script = {"slow once": ["slow", "ok"], "always slow": ["slow", "slow"]}
    with FakeLLM(script=script, slow_seconds=2.5) as fake:
        with client(fake, tmp_path, timeout_s=1.0, max_retries=1) as llm:
            once, always = llm.complete([ask("slow once"), ask("always slow")])
            summary = llm.summary()
    assert once.ok and once.data["echo"] == "slow once"
    assert (always.error, always.ok) == ("timeout", False)
    assert summary["dropped_by_reason"] == {"timeout": 1}
    assert summary["http_attempts"] == 4


def test_a_malformed_body_is_asked_again_unchanged_and_cached_under_its_key(tmp_path):
    with FakeLLM(script={"garbled": ["bad_body", "ok"]}) as fake:
        with client(fake, tmp_path) as llm:
            [answer] = llm.complete([ask("garbled")])
            summary = llm.summary()
        assert answer.ok and answer.asks == 2
        assert answer.data == {"echo": "garbled", "seed": 0}  # the same seed: the same request
        assert summary["failed_answers_by_reason"] == {"malformed_response": 1}
        fake.reset_counts()
        with client(fake, tmp_path) as llm:
            [again] = llm.complete([ask("garbled")])
        assert fake.requests == 0 and again.data == answer.data


def test_unusable_answers_are_re_asked_with_the_next_seed_and_replayed_from_cache(tmp_path):
    script = {
        "prose": ["bad_json", "ok"],
        "cut": ["truncated", "truncated", "truncated"],
    }
    with FakeLLM(script=script) as fake:
        with client(fake, tmp_path, reasks=2) as llm:
            prose, cut = llm.complete([ask("prose"), ask("cut")])
            summary = llm.summary()
        assert prose.ok and prose.asks == 2 and prose.data["seed"] == 1
        assert (cut.ok, cut.error, cut.asks) == (False, "truncated", 3)
        assert [b["seed"] for b in fake.bodies if "cut" in b["messages"][0]["content"]] == [0, 1, 2]
        assert summary["dropped_by_reason"] == {"truncated": 1}
        assert summary["failed_answers_by_reason"] == {"malformed_json": 1, "truncated": 3}
        assert summary["requests"] == 5

        # Every answer was cached, the bad ones too: a rerun replays the same outcome for free.
        fake.reset_counts()
        with client(fake, tmp_path, reasks=2) as llm:
            prose2, cut2 = llm.complete([ask("prose"), ask("cut")])
            summary = llm.summary()
        assert fake.requests == 0
        assert prose2.data == prose.data and cut2.error == "truncated"
        assert summary["dropped_by_reason"] == {"truncated": 1} and summary["cache_hits"] == 2


def test_a_check_rejects_an_answer_and_plain_text_needs_no_json(fake_llm, tmp_path):
    def needs_answer_key(data):
        return None if "answer" in data else "no 'answer' key"

    with client(fake_llm, tmp_path, reasks=1) as llm:
        rejected, text = llm.complete(
            [ask("check me", check=needs_answer_key), ask("free text", json=False)]
        )
    assert (rejected.error, rejected.detail, rejected.asks) == (
        "invalid_answer",
        "no 'answer' key",
        2,
    )
    assert text.ok and text.data is None and json.loads(text.text)["echo"] == "free text"


def test_json_mode_asks_for_a_json_object(fake_llm, tmp_path):
    with client(fake_llm, tmp_path, json_mode=True) as llm:
        llm.complete([ask("structured"), ask("loose", json=False)])
    formats = {b["messages"][0]["content"]: b.get("response_format") for b in fake_llm.bodies}
    assert formats == {"structured": {"type": "json_object"}, "loose": None}


def test_the_api_key_comes_from_the_named_variable_and_is_never_cached(
    fake_llm, tmp_path, monkeypatch
):
    monkeypatch.delenv("IRFLOW_TEST_KEY", raising=False)
    with client(fake_llm, tmp_path, api_key_env="IRFLOW_TEST_KEY") as llm:
        with pytest.raises(ConfigError, match="'llm.api_key_env'.*IRFLOW_TEST_KEY"):
            llm.complete([ask("keyed"), ask("other")])
    assert fake_llm.requests == 0
    monkeypatch.setenv("IRFLOW_TEST_KEY", "sk-secret-123")
    with client(fake_llm, tmp_path, api_key_env="IRFLOW_TEST_KEY") as llm:
        llm.complete([ask("keyed")])
    assert fake_llm.headers[0]["authorization"] == "Bearer sk-secret-123"
    for path in tmp_path.iterdir():
        assert b"sk-secret-123" not in path.read_bytes()
    # A run whose answers are all cached needs no key.
    monkeypatch.delenv("IRFLOW_TEST_KEY")
    with client(fake_llm, tmp_path, api_key_env="IRFLOW_TEST_KEY") as llm:
        [answer] = llm.complete([ask("keyed")])
    assert answer.ok and answer.cached and fake_llm.requests == 1


def test_a_model_is_required():
    with pytest.raises(ConfigError, match="'llm.model'"):
        LLMClient({"base_url": "http://127.0.0.1:9/v1"})
    assert answer_settings({"model": "m"}) == {
        "model": "m",
        "temperature": 0.7,
        "seed": 0,
        "max_tokens": 1024,
        "json_mode": False,
        "reasks": 2,
        "max_document_tokens": 2048,
    }


def test_the_llm_block_is_typed_once_where_the_client_receives_it(fake_llm, tmp_path):
    """LLMClient types the ``llm`` block once (irflow.core.settings_types.Llm2): a value or a
    key the schema refuses is refused, named (on main the block was read as a dict with
    hand-written defaults: a temperature of 3 was sent, a misspelt key ignored). Params,
    cache keys and the manifest keep the block's values as written: an int temperature."""
    with pytest.raises(ValidationError, match="temperature"):
        LLMClient({"model": "m", "temperature": 3}, tmp_path)
    with pytest.raises(ValidationError, match="max_token\\b"):
        LLMClient({"model": "m", "max_token": 10}, tmp_path)
    with pytest.raises(ValidationError, match="max_concurrency"):
        answer_settings({"model": "m", "max_concurrency": 0})
    assert answer_settings({"model": "m", "temperature": 1})["temperature"] == 1
    assert isinstance(answer_settings({"model": "m", "temperature": 1})["temperature"], int)
    with client(fake_llm, tmp_path, temperature=1) as llm:
        assert llm.settings.temperature == 1.0 and llm.settings.reasks == 2  # the default
        [answer] = llm.complete([ask("int temperature")])
        summary = llm.summary()
    cached = pq.read_table(next(tmp_path.glob("*.parquet")))
    request = json.loads(cached.column("request")[0].as_py())
    assert answer.ok and request["temperature"] == 1 and isinstance(request["temperature"], int)
    assert isinstance(summary["temperature"], int)


def test_the_progress_is_logged_with_rate(fake_llm, tmp_path, caplog, monkeypatch):
    """As log lines, which reach the job's log (on main, a tqdm bar on stderr: no line)."""
    monkeypatch.setenv(SECONDS_VARIABLE, "0")
    with caplog.at_level(logging.INFO, logger="irflow.progress"):
        with LLMClient(settings(fake_llm), tmp_path, progress=True) as llm:
            llm.complete([ask("a"), ask("b"), ask("c")], desc="judge")
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0].startswith("judge: 0/3 req (0 %) in ")
    assert re.fullmatch(r"judge: 3/3 req \(100 %\) in \S+, +[\d.]+req/s, 00:00 left", lines[-1])


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        ('Here it is: {"a": "x"} Hope this helps.', {"a": "x"}),
        ("[1, 2, 3]", [1, 2, 3]),
    ],
)
def test_parse_json_finds_the_value(text, value):
    assert parse_json(text) == value


def test_parse_json_rejects_prose():
    with pytest.raises(ValueError, match="no JSON value"):
        parse_json("Sorry, I cannot help with that {")


CRASHING_RUN = textwrap.dedent(
    """
    import sys
    from irflow.derived.llm.client import LLMClient
    from irflow.derived.llm.messages import Request
    base_url, cache = sys.argv[1], sys.argv[2]
    llm = LLMClient(
        {"base_url": base_url, "model": "fake-model", "max_concurrency": 1, "timeout_s": 60,
         "max_retries": 0},
        cache,
        progress=False,
    )
    llm.complete([Request([{"role": "user", "content": f"item {i}"}]) for i in range(10)])
    """
)


def test_a_killed_run_keeps_every_finished_answer(tmp_path):
    """The first five answers arrive, the sixth hangs, the process is killed: a rerun asks
    exactly the five it never got."""
    cache = tmp_path / "cache"
    script = {f"item {i}": ["slow"] for i in range(5, 10)}
    with FakeLLM(script=script, slow_seconds=5) as fake:
        process = subprocess.Popen(
            [sys.executable, "-c", CRASHING_RUN, fake.base_url, str(cache)],
            cwd=TESTS,
            env=os.environ | {"PYTHONPATH": str(TESTS.parent / "src")},
        )
        try:
            deadline = time.monotonic() + 60
            while fake.requests < 6 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert fake.requests == 6, "the client never reached the hanging request"
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
        assert len(list(cache.glob("part-*.parquet"))) == 5
        fake.script.clear()
        fake.reset_counts()
        with LLMClient(settings(fake), cache, progress=False) as llm:
            answers = llm.complete([ask(f"item {i}") for i in range(10)])
        assert fake.requests == 5
        assert sorted(b["messages"][0]["content"] for b in fake.bodies) == [
            f"item {i}" for i in range(5, 10)
        ]
        assert [a.cached for a in answers] == [True] * 5 + [False] * 5


def test_many_cache_files_are_compacted_on_opening(fake_llm, tmp_path, monkeypatch):
    import irflow.derived.llm.cache

    monkeypatch.setattr(irflow.derived.llm.cache, "COMPACT_AT", 3)
    for run in range(4):
        with client(fake_llm, tmp_path) as llm:
            llm.complete([ask(f"run {run} a"), ask(f"run {run} b")])
    assert len(list(tmp_path.glob("cache-*.parquet"))) == 4  # one merged file per call
    fake_llm.reset_counts()
    with client(fake_llm, tmp_path) as llm:
        llm.complete([ask(f"run {run} {x}") for run in range(4) for x in "ab"])
        assert len(llm.cache) == 8
    [single] = list(tmp_path.glob("*.parquet"))
    assert pq.read_table(single).num_rows == 8 and fake_llm.requests == 0


# --- loud failures ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "words"), [("401", "refused"), ("403", "denied"), ("404", "not found")]
)
def test_a_refused_key_model_or_address_stops_the_run_at_once(tmp_path, status, words):
    with FakeLLM(script={"item": [status]}, error_message="The model `x` does not exist") as fake:
        with client(fake, tmp_path, max_concurrency=1) as llm:
            with pytest.raises(LLMError) as error:
                llm.complete([ask(f"item {i}") for i in range(20)])
        assert fake.requests == 1  # neither retried nor asked for the other 19
        assert str(error.value).startswith(f"{fake.base_url} answered HTTP {status}")
    assert words in str(error.value) and "The model `x` does not exist" in str(error.value)


def test_check_dropped_fails_past_the_share_and_names_step_and_reason(tmp_path):
    with FakeLLM(script={"broken": ["down"]}) as fake:
        with client(fake, tmp_path, max_retries=0, max_dropped_share=0.25) as llm:
            llm.complete([ask("broken 1"), ask("fine 1"), ask("fine 2")], desc="step one")
            llm.complete([ask("fine 3")], desc="step two")
            llm.check_dropped()  # 1 of 4: within 25%
            llm.complete([ask("broken 2")], desc="step two")
            with pytest.raises(LLMError) as error:
                llm.check_dropped()  # 2 of 5
    assert str(error.value) == (
        "2 of 5 requests to 'fake-model' were dropped (40.0%), more than "
        "llm.max_dropped_share allows (25.0%): 1 http_500 at 'step one'; "
        "1 http_500 at 'step two'"
    )


def test_a_retry_after_past_openais_cap_is_waited_for_up_to_the_ceiling(tmp_path, monkeypatch):
    """openai gives up at once on a Retry-After above 120 s. The cap is lowered to 0.3 s here so
    that a 1 s Retry-After stands for a long one."""
    import openai._base_client

    monkeypatch.setattr(openai._base_client, "MAX_RETRY_AFTER_DELAY", 0.3)
    with FakeLLM(script={"limited": ["429", "ok"]}, retry_after=1) as fake:
        with client(fake, tmp_path / "a", max_retry_after_s=5) as llm:
            [answer] = llm.complete([ask("limited")])
        arrivals = list(fake.arrivals)
        assert answer.ok and [b for _, b in arrivals] == ["429", "ok"]
        assert arrivals[1][0] - arrivals[0][0] >= 0.9
        # Past the ceiling the request is dropped at once, as openai does.
        fake.script = {"limited": ["429", "ok"]}
        fake.reset_counts()
        with client(fake, tmp_path / "b", max_retry_after_s=0.5) as llm:
            [answer] = llm.complete([ask("limited")])
        assert answer.error == "http_429" and fake.requests == 1


def test_what_is_recorded_holds_no_secret(tmp_path, monkeypatch):
    leaky = (
        "upstream https://admin:hunter2@proxy.example/v1?api_key=abc123 said: bad key "
        "sk-proj-ABCDEFGH12345678, Authorization: Bearer tok3n-xyz, token=t0k3n-secret"
    )
    monkeypatch.setenv("IRFLOW_TEST_KEY", "plain-words-key")
    with FakeLLM(script={"leak": ["down"]}, error_message=leaky + " plain-words-key") as fake:
        with client(fake, tmp_path, max_retries=0, api_key_env="IRFLOW_TEST_KEY") as llm:
            [answer] = llm.complete([ask("leak")])
    detail = answer.detail
    for secret in ("hunter2", "admin", "abc123", "ABCDEFGH", "tok3n", "t0k3n", "plain-words-key"):
        assert secret not in detail
    assert "https://proxy.example/v1 said: bad key ***" in detail
    assert "Bearer ***" in detail and "token=***" in detail
    assert public_url("https://u:p@host:8000/v1?key=1#x") == "https://host:8000/v1"
    llm = LLMClient({"base_url": "https://u:p@host/v1?key=1", "model": "m"}, tmp_path)
    assert llm.summary()["base_url"] == "https://host/v1"


# --- answers, batches, tokens -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('<think>Maybe {"a": 0}? No.</think>\n{"a": 1}', {"a": 1}),
        ('{"a": 1}\n{"a": 2}', {"a": 1}),
        ('Sure: {"a": {"b": [1]}} and also {"c": 3}.', {"a": {"b": [1]}}),
        ('[note] {"a": 1}', {"a": 1}),
    ],
)
def test_parse_json_skips_thinking_and_takes_the_first_object(text, value):
    assert parse_json(text) == value


def test_identical_requests_of_a_batch_are_asked_once(fake_llm, tmp_path):
    with client(fake_llm, tmp_path) as llm:
        answers = llm.complete([ask("same"), ask("other"), ask("same"), ask("same", seed=4)])
        summary = llm.summary()
    assert fake_llm.requests == 3 and summary["duplicates"] == 1
    assert [a.data for a in answers[:3]] == [
        {"echo": "same", "seed": 0},
        {"echo": "other", "seed": 0},
        {"echo": "same", "seed": 0},
    ]
    assert answers[0] is not answers[2] and answers[3].data["seed"] == 4


def test_a_cached_rerun_counts_the_tokens_of_its_answers(fake_llm, tmp_path):
    prompts = [ask(f"count these {i} words") for i in range(3)]
    with client(fake_llm, tmp_path) as llm:
        llm.complete(prompts)
        first = llm.summary()
    with client(fake_llm, tmp_path) as llm:
        llm.complete(prompts)
        again = llm.summary()
    assert first["prompt_tokens"] == first["requested_prompt_tokens"] == 3 * 4
    assert again["prompt_tokens"] == 12 and again["completion_tokens"] == first["completion_tokens"]
    assert again["requested_prompt_tokens"] == 0 and again["requested_completion_tokens"] == 0


# --- processes ----------------------------------------------------------------------------------

HELD_RUN = textwrap.dedent(
    """
    import signal, sys
    # A user's Ctrl-C reaches a foreground process with Python's handler; a process started
    # in the background by a non-interactive shell (a CI runner's) inherits SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from irflow.derived.llm.client import LLMClient
    from irflow.derived.llm.messages import Request
    base_url, cache, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    llm = LLMClient(
        {"base_url": base_url, "model": "fake-model", "max_concurrency": concurrency,
         "timeout_s": 60, "max_retries": 0},
        cache,
        progress=False,
    )
    llm.complete([Request([{"role": "user", "content": f"b {i}"}]) for i in range(6)])
    """
)


def start_held_run(fake: FakeLLM, cache: Path, concurrency: int) -> subprocess.Popen:
    """A process asking 'b 0'..'b 5'; returns once all six requests arrived (the held ones
    stay in flight)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HELD_RUN, fake.base_url, str(cache), str(concurrency)],
        cwd=TESTS,
        env=os.environ | {"PYTHONPATH": str(TESTS.parent / "src")},
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while fake.requests < 6 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert fake.requests == 6, "the requests never arrived"
    return process


def test_two_processes_share_the_cache_while_one_compacts(tmp_path, monkeypatch):
    """B has written five part files and waits for its sixth answer when A opens the folder
    and compacts it (deleting B's parts); B's merge must still succeed and lose nothing."""
    import irflow.derived.llm.cache

    cache = tmp_path / "cache"
    with FakeLLM(script={"b 5": ["hold"]}) as fake:
        process = start_held_run(fake, cache, concurrency=1)
        try:
            assert len(list(cache.glob("part-*.parquet"))) == 5
            monkeypatch.setattr(irflow.derived.llm.cache, "COMPACT_AT", 3)
            with client(fake, cache) as llm:  # process A: compacts B's five parts
                assert len(list(cache.glob("*.parquet"))) == 1
                llm.complete([ask("a 0"), ask("a 1")])
            assert not list(cache.glob("part-*.parquet"))
            fake.release()
            _, stderr = process.communicate(timeout=60)
        finally:
            process.kill()
        assert process.returncode == 0, stderr
        fake.reset_counts()
        with client(fake, cache) as llm:
            answers = llm.complete([ask(f"b {i}") for i in range(6)] + [ask("a 0"), ask("a 1")])
        assert fake.requests == 0 and all(a.ok and a.cached for a in answers)


def interrupt_a_worker_thread(process: subprocess.Popen) -> None:
    """SIGINT to one of the process's other threads (tgkill), as the kernel may deliver a
    Ctrl-C: Python runs the handler only when the main thread next runs."""
    threads = [int(t) for t in os.listdir(f"/proc/{process.pid}/task") if int(t) != process.pid]
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(234, process.pid, threads[-1], signal.SIGINT) == 0  # SYS_tgkill


@pytest.mark.parametrize("delivered_to", ["process", "a worker thread"])
def test_ctrl_c_returns_without_waiting_for_requests_in_flight(tmp_path, delivered_to):
    cache = tmp_path / "cache"
    with FakeLLM(script={"b 4": ["hold"], "b 5": ["hold"]}) as fake:
        process = start_held_run(fake, cache, concurrency=2)
        try:
            started = time.monotonic()
            if delivered_to == "process":
                process.send_signal(signal.SIGINT)
            else:
                interrupt_a_worker_thread(process)
            _, stderr = process.communicate(timeout=30)
            stopped = time.monotonic() - started
        finally:
            process.kill()
        assert "KeyboardInterrupt" in stderr
        assert stopped < 10  # the held requests would keep it 60 s
        # The four finished answers were merged into one file before the process ended.
        [merged] = cache.glob("*.parquet")
        requests = [json.loads(r) for r in pq.read_table(merged).column("request").to_pylist()]
        assert sorted(r["messages"][0]["content"] for r in requests) == [f"b {i}" for i in range(4)]
