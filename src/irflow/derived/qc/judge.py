"""judge: a language model rating (query, document) pairs on the levels of a judge's prompts file,
through an irflow.derived.llm.client.LLMClient."""

from __future__ import annotations

import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irflow.core.errors import InputError
from irflow.derived.llm.prompts import fence, read_prompts_file

JUDGE_PLACEHOLDERS = {"query", "document", "levels"}


@dataclass(frozen=True)
class JudgePrompts:
    path: str
    system: str | None
    user: str
    answer_key: str
    explanation_key: str | None
    levels: dict[int, str]
    sha256: str

    def levels_text(self) -> str:
        return "\n".join(f"{level} = {self.levels[level]}" for level in sorted(self.levels)[::-1])

    def messages(self, query: str, document: str) -> list[dict]:
        values = {"query": query, "document": fence(document), "levels": self.levels_text()}
        messages = [{"role": "system", "content": self.system}] if self.system else []
        messages.append({"role": "user", "content": self.user})
        return [
            {"role": m["role"], "content": string.Template(m["content"]).substitute(values)}
            for m in messages
        ]


def load_judge_prompts(path: str | Path) -> JudgePrompts:
    """Read and check the judge's prompts file; errors name the file and the field."""
    path = Path(path)
    data, sha256 = read_prompts_file(path, "the judge's prompts file")
    levels = data.get("levels")
    if not isinstance(levels, dict) or len(levels) < 2:
        raise InputError(path, "must map at least two level numbers to texts", field="levels")
    for level, text in levels.items():
        if not isinstance(level, int) or isinstance(level, bool) or level < 0:
            raise InputError(path, f"{level!r} is not a level number >= 0", field="levels")
        if not isinstance(text, str) or not text.strip():
            raise InputError(path, "must be a non-empty text", field=f"levels.{level}")
    for key in ("answer_key",):
        if not isinstance(data.get(key), str) or not data[key]:
            raise InputError(path, "must name the answer's JSON key", field=key)
    explanation = data.get("explanation_key")
    if explanation is not None and not isinstance(explanation, str):
        raise InputError(path, "must be a string or absent", field="explanation_key")
    for part in ("system", "user"):
        template = data.get(part)
        if part == "user" and (not isinstance(template, str) or not template.strip()):
            raise InputError(path, "must be a non-empty template", field="user")
        if template is None:
            continue
        if not isinstance(template, str):
            raise InputError(path, "must be a string", field=part)
        try:
            string.Template(template).substitute(dict.fromkeys(JUDGE_PLACEHOLDERS, ""))
        except (KeyError, ValueError) as error:
            raise InputError(
                path,
                f"bad placeholder {error}; allowed: {', '.join(sorted(JUDGE_PLACEHOLDERS))}",
                field=part,
            ) from None
    used = data["user"] + (data.get("system") or "")
    for needed in ("query", "document"):
        if f"${needed}" not in used and f"${{{needed}}}" not in used:
            raise InputError(path, f"must use ${{{needed}}}", field="user")
    return JudgePrompts(
        path=str(path),
        system=data.get("system"),
        user=data["user"],
        answer_key=data["answer_key"],
        explanation_key=explanation,
        levels={int(k): v.strip() for k, v in levels.items()},
        sha256=sha256,
    )


def parse_judgement(data: Any, prompts: JudgePrompts) -> tuple[int, str | None]:
    """(level, explanation) from a parsed JSON answer; ValueError saying what is wrong.

    The level may be a number (``2``, ``2.0``) or a string holding one (``"2"``, ``"2 - partly
    relevant"``); it must be one of the prompts' levels."""
    if not isinstance(data, dict) or prompts.answer_key not in data:
        raise ValueError(f"expected a JSON object with the key {prompts.answer_key!r}")
    value = data[prompts.answer_key]
    level = None
    if isinstance(value, bool):
        level = None
    elif isinstance(value, int):
        level = value
    elif isinstance(value, float) and value.is_integer():
        level = int(value)
    elif isinstance(value, str):
        head = value.strip().split(maxsplit=1)[0].rstrip(".:-") if value.strip() else ""
        level = int(head) if head.isdigit() else None
    if level is None or level not in prompts.levels:
        allowed = ", ".join(str(level) for level in sorted(prompts.levels))
        raise ValueError(f"{prompts.answer_key!r} is {value!r}; expected one of {allowed}")
    explanation = data.get(prompts.explanation_key) if prompts.explanation_key else None
    return level, explanation.strip() if isinstance(explanation, str) else None


def _judgement_check(prompts: JudgePrompts):
    def check(data: Any) -> str | None:
        try:
            parse_judgement(data, prompts)
        except ValueError as error:
            return str(error)
        return None

    return check


@dataclass
class Judgement:
    level: int | None = None
    explanation: str | None = None
    error: str | None = None
    detail: str | None = None


class Judge:
    """Rates (query, document) pairs through an ``irflow.derived.llm.client.LLMClient``."""

    def __init__(self, prompts: JudgePrompts, client, temperature: float = 0.0):
        self.prompts = prompts
        self.client = client
        self.temperature = temperature
        self.failures: Counter = Counter()
        self.asked = 0

    def requests(self, pairs: list[tuple[str, str]]) -> list:
        """The requests that rate ``pairs`` (query text, document text): what ``rate`` sends,
        and what the dry-run estimate (``irflow.derived.generate.estimate.estimate``) counts."""
        from irflow.derived.llm.messages import Request

        check = _judgement_check(self.prompts)
        return [
            Request(
                self.prompts.messages(q, self.client.document(d)),
                temperature=self.temperature,
                check=check,
            )
            for q, d in pairs
        ]

    def rate(self, pairs: list[tuple[str, str]], desc: str = "judge") -> list[Judgement]:
        requests = self.requests(pairs)
        self.asked += len(requests)
        judgements = []
        for answer in self.client.complete(requests, desc=desc) if requests else []:
            if answer.ok:
                level, explanation = parse_judgement(answer.data, self.prompts)
                judgements.append(Judgement(level, explanation))
            else:
                self.failures[answer.error] += 1
                judgements.append(Judgement(error=answer.error, detail=answer.detail))
        return judgements
