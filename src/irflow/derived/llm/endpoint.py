"""endpoint: where an API key may be sent, which model answered, and the openai client that waits
out a long ``Retry-After`` (see irflow.derived.llm.client for the design)."""

from __future__ import annotations

import logging
import os

from irflow.core.config import register_check
from irflow.core.errors import ConfigError
from irflow.core.redaction import cleartext_to_another_host, public_url
from irflow.core.settings_types import Llm2

log = logging.getLogger(__name__)


def key_endpoint_problem(llm: Llm2) -> str | None:
    """Why the API key named by ``llm.api_key_env`` must not go to ``llm.base_url`` (none set,
    or plain HTTP to another machine), or None."""
    key_env, url = llm.api_key_env, llm.base_url
    if key_env is None:
        return None
    if not url:
        return (
            f"config key 'llm.base_url': needed with llm.api_key_env ({key_env!r}); irflow has "
            "no default endpoint to send the key to"
        )
    if cleartext_to_another_host(url):
        return (
            f"config key 'llm.base_url': {public_url(url)} is plain HTTP to another machine, "
            f"so the key in llm.api_key_env ({key_env!r}) would cross the network unencrypted; "
            "use https://, or a loopback address (127.0.0.1, ::1, localhost), e.g. through an "
            "SSH tunnel"
        )
    return None


@register_check
def _endpoint_problems(config: dict) -> list[str]:
    problem = key_endpoint_problem(Llm2.model_validate(config["llm"]))
    return [problem] if problem else []


def same_model(asked: str, reported: str | None) -> bool:
    """Whether the model a response names is the one asked for: the same name, or a dated
    snapshot of it (OpenAI answers ``gpt-4o`` with ``gpt-4o-2024-08-06``). A response that
    names none is taken as the one asked for."""
    if not reported or reported == asked:
        return True
    suffix = reported.removeprefix(asked + "-")
    return suffix != reported and suffix[:1].isdigit()


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


def patient_client_class(openai, ceiling: float):
    """``openai.OpenAI`` whose retries also wait out a ``Retry-After`` above openai's own cap
    (two minutes; above it the stock client gives up at once), up to ``ceiling`` seconds. Only
    that cap changes: which answers are retried, how often and the backoff stay openai's."""
    import openai._base_client as base  # the cap, read when used

    class PatientOpenAI(openai.OpenAI):
        def _long_wait(self, headers) -> float | None:
            wait = self._parse_retry_after_header(headers)
            if wait is not None and base.MAX_RETRY_AFTER_DELAY < wait <= ceiling:
                return wait
            return None

        def _should_retry(self, response) -> bool:
            if self._long_wait(response.headers) is None:
                return super()._should_retry(response)
            # The status decides, as for any wait openai accepts.
            headers = response.headers.copy()
            for name in ("retry-after", "retry-after-ms"):
                headers.pop(name, None)
            return super()._should_retry(type(response)(response.status_code, headers=headers))

        def _calculate_retry_timeout(self, remaining_retries, options, response_headers=None):
            wait = self._long_wait(response_headers)
            if wait is None:
                return super()._calculate_retry_timeout(
                    remaining_retries, options, response_headers
                )
            log.warning("the endpoint asks to wait %.0f s (Retry-After): waiting", wait)
            return wait

    return PatientOpenAI
