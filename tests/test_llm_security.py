"""What an LLM endpoint cannot do to a run (issue 32): a hostile answer or error body is dropped
and counted, fast, and never replayed as a crash; the API key goes only where it is safe; the
answers of another model are refused; a job stops at ``max_requests``, loads only its model's
cache entries and cuts long documents. Against the fake server on 127.0.0.1."""

from __future__ import annotations

import time

import pyarrow.parquet as pq
import pytest
from conftest import validated
from fake_llm import FakeLLM, echo_responder, fake_llm_fixture, last_user_message  # noqa: F401
from test_llm import ask, client

from irflow.core.errors import ConfigError
from irflow.core.redaction import MAX_REDACTED_CHARS, redact
from irflow.derived.llm.client import LLMClient, LLMError
from irflow.derived.llm.messages import parse_json

# 40 KB on which the old key pattern backtracked for 67 s (a word boundary at every character).
HOSTILE_ERROR = "a-" * 20_000


def hostile_responder(body: dict) -> str:
    prompt = last_user_message(body)
    if prompt == "huge":
        return '{"a": "' + "x" * 50_000_000 + '"}'
    if prompt == "brackets":
        return "[" * 100_000
    return echo_responder(body)


# --- item 1: malformed answers --------------------------------------------------------------


def test_redact_takes_linear_time_on_a_hostile_error_body_and_a_50_mb_answer():
    started = time.perf_counter()
    short = redact(HOSTILE_ERROR + " key sk-proj-ABCDEFGH12345678")
    huge = redact("a-" * 25_000_000 + " api_key=abc123 ", ("abc123",))
    assert time.perf_counter() - started < 1.5
    assert "sk-proj" not in short and short.endswith("…")
    assert len(huge) <= MAX_REDACTED_CHARS + 2 and "abc123" not in huge
    # Still masked: a key-like run that mixes letters and digits, a named value.
    assert redact("x " + "ab12" * 10 + " password: hunter2") == "x *** password: ***"


def test_parse_json_gives_up_at_once_on_100000_brackets_and_an_unclosed_think():
    started = time.perf_counter()
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json("[" * 100_000)
    assert parse_json("<think>" * 20_000 + '{"a": 1}') == {"a": 1}
    assert time.perf_counter() - started < 1


def test_hostile_answers_are_dropped_counted_and_never_replayed_as_a_crash(tmp_path):
    with FakeLLM(responder=hostile_responder) as fake:
        with client(fake, tmp_path, reasks=0, max_dropped_share=0.5) as llm:
            huge, brackets, fine = llm.complete([ask("huge"), ask("brackets"), ask("fine")])
            summary = llm.summary()
            with pytest.raises(LLMError, match="1 malformed_json at 'llm'; 1 oversized at 'llm'"):
                llm.check_dropped()  # 2 of 3, past 50%
        assert (huge.error, brackets.error, fine.error) == ("oversized", "malformed_json", None)
        assert "50000009 characters" in huge.detail
        assert summary["dropped_by_reason"] == {"malformed_json": 1, "oversized": 1}
        # The oversized answer was not cached; the brackets were, and replay as a drop.
        assert sum(pq.read_table(p).num_rows for p in tmp_path.glob("*.parquet")) == 2
        fake.reset_counts()
        with client(fake, tmp_path, reasks=0) as llm:
            again = llm.complete([ask("brackets"), ask("fine")])
        assert [a.error for a in again] == ["malformed_json", None]
        assert fake.requests == 0


def test_a_40_kb_error_body_is_recorded_short_and_at_once(tmp_path):
    with FakeLLM(script={"leak": ["down"]}, error_message=HOSTILE_ERROR) as fake:
        with client(fake, tmp_path, max_retries=0) as llm:
            started = time.perf_counter()
            [answer] = llm.complete([ask("leak")])
            elapsed = time.perf_counter() - started
    assert answer.error == "http_500" and len(answer.detail) <= 200
    assert elapsed < 2


# --- item 2: the API key, the model -----------------------------------------------------------


def config_with(llm: dict) -> dict:
    return validated(llm=llm)


def test_a_key_needs_an_explicit_base_url_and_https_to_another_machine():
    assert "base_url" not in config_with({"model": "m"})["llm"]  # no default endpoint
    with pytest.raises(ConfigError, match=r"'llm.base_url'.*needed.*'MY_KEY'"):
        config_with({"model": "m", "api_key_env": "MY_KEY"})
    with pytest.raises(ConfigError, match=r"'llm.base_url'.*plain HTTP.*'MY_KEY'"):
        config_with({"model": "m", "api_key_env": "MY_KEY", "base_url": "http://gpu7:8000/v1"})
    for url in ("https://api.example/v1", "http://127.0.0.2:8000/v1", "http://[::1]/v1"):
        config_with({"model": "m", "api_key_env": "MY_KEY", "base_url": url})
    config_with({"model": "m", "api_key_env": "MY_KEY", "base_url": "http://localhost/v1"})
    config_with({"model": "m", "base_url": "http://gpu7:8000/v1"})  # no key: no secret to leak


def test_a_key_is_not_sent_over_plain_http_to_another_host(fake_llm, tmp_path, monkeypatch):
    """0.0.0.0 reaches this machine's fake, but is no loopback address: the client refuses
    before sending anything, as it would for another host."""
    monkeypatch.setenv("IRFLOW_TEST_KEY", "sk-secret-123")
    elsewhere = fake_llm.base_url.replace("127.0.0.1", "0.0.0.0")
    settings = {"base_url": elsewhere, "model": "m", "api_key_env": "IRFLOW_TEST_KEY"}
    with LLMClient(settings, tmp_path, progress=False) as llm:
        with pytest.raises(ConfigError, match="plain HTTP"):
            llm.complete([ask("secret")])
    assert fake_llm.requests == 0
    with LLMClient({"model": "m"}, tmp_path, progress=False) as llm:
        with pytest.raises(ConfigError, match="'llm.base_url'.*no default"):
            llm.complete([ask("anywhere")])
        assert llm.summary()["base_url"] is None


def test_answers_of_another_model_are_dropped_and_not_cached(tmp_path):
    with FakeLLM(reported_model="cheap-model") as fake:
        with client(fake, tmp_path, reasks=0) as llm:
            [answer] = llm.complete([ask("which model")])
            summary = llm.summary()
        assert answer.error == "wrong_model"
        assert "'cheap-model'" in answer.detail and "'fake-model'" in answer.detail
        assert summary["dropped_by_reason"] == {"wrong_model": 1}
        assert not list(tmp_path.glob("*.parquet"))
    # A dated snapshot of the model asked for (OpenAI's gpt-4o -> gpt-4o-2024-08-06) is it.
    with FakeLLM(reported_model="fake-model-2024-08-06") as fake:
        with client(fake, tmp_path) as llm:
            [answer] = llm.complete([ask("which model")])
    assert answer.ok


# --- item 9: cost caps --------------------------------------------------------------------------


def test_max_requests_stops_before_asking_more_and_keeps_the_answers(fake_llm, tmp_path):
    prompts = [ask(f"doc {i}") for i in range(5)]
    with client(fake_llm, tmp_path, max_requests=3, max_concurrency=1) as llm:
        with pytest.raises(LLMError, match=r"llm.max_requests \(3\)"):
            llm.complete(prompts)
        assert llm.summary()["max_requests"] == 3
    assert fake_llm.requests == 3
    fake_llm.reset_counts()
    with client(fake_llm, tmp_path, max_requests=2) as llm:  # the cached three are free
        answers = llm.complete(prompts)
    assert all(a.ok for a in answers) and fake_llm.requests == 2


def test_a_job_reads_only_the_cache_entries_of_its_model_and_requests(
    fake_llm, tmp_path, monkeypatch
):
    import irflow.derived.llm.cache

    with client(fake_llm, tmp_path, model="model-a") as llm:
        llm.complete([ask("x"), ask("y")])
    with client(fake_llm, tmp_path, model="model-b") as llm:
        assert len(llm.cache) == 0  # nothing is read at opening
        llm.complete([ask("x")])
        # Only the answer it got: model-a's answer to the same prompt was not read.
        assert [r["model"] for r in llm.cache.records.values()] == ["model-b"]
    fake_llm.reset_counts()
    monkeypatch.setattr(irflow.derived.llm.cache, "COMPACT_AT", 1)
    with client(fake_llm, tmp_path, model="model-a") as llm:  # compacts every model's rows
        [answer] = llm.complete([ask("y")])
        assert answer.cached and list(llm.cache.records) == [answer.key]  # not "x"'s
    assert fake_llm.requests == 0
    [single] = tmp_path.glob("*.parquet")
    assert pq.read_table(single).num_rows == 3
