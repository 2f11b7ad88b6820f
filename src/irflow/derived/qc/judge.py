"""judge: a language model rating (query, document) pairs on the levels of a judge's prompts file,
through an irflow.derived.llm.client.LLMClient.

A prompts file without ``answer_key`` asks for the level as the whole answer, as AIR-Bench's
labeler does: "Your output must be a single number" (shared/references/airbench.txt, lines
289-290). The request is sent without JSON mode and the answer's text is the level. With
``answer_key`` the answer is a JSON object holding it (irflow's own prompts)."""

from __future__ import annotations

import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irflow.core.errors import InputError
from irflow.derived.llm.messages import Request, without_thinking
from irflow.derived.llm.prompts import fence, read_prompts_file

JUDGE_PLACEHOLDERS = {"query", "fenced_query", "document", "levels"}
# The marks a prompts file may fence the texts with: double quotes, or backquotes (a Markdown
# code fence, as AIR-Bench's Table 8).
FENCE_MARKS = ('"', "`")
LEVEL_ORDERS = ("descending", "ascending")


@dataclass(frozen=True)
class JudgePrompts:
    path: str
    system: str | None
    user: str
    answer_key: str | None
    explanation_key: str | None
    levels: dict[int, str]
    sha256: str
    fence_mark: str = '"'
    level_format: str = "${level} = ${text}"
    level_order: str = "descending"

    def levels_text(self) -> str:
        order = sorted(self.levels, reverse=self.level_order == "descending")
        line = string.Template(self.level_format)
        return "\n".join(line.substitute(level=n, text=self.levels[n]) for n in order)

    def messages(self, query: str, document: str) -> list[dict]:
        values = {
            "query": query,
            "fenced_query": fence(query, self.fence_mark),
            "document": fence(document, self.fence_mark),
            "levels": self.levels_text(),
        }
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
    answer_key = data.get("answer_key")
    if answer_key is not None and (not isinstance(answer_key, str) or not answer_key):
        raise InputError(
            path, "must name the answer's JSON key, or be absent (a bare level)", field="answer_key"
        )
    explanation = data.get("explanation_key")
    if explanation is not None and (not isinstance(explanation, str) or answer_key is None):
        raise InputError(
            path, "must be a string, and needs answer_key (a JSON answer)", field="explanation_key"
        )
    mark = data.get("fence", '"')
    if mark not in FENCE_MARKS:
        raise InputError(path, f"must be one of {FENCE_MARKS}", field="fence")
    level_format = data.get("level_format", "${level} = ${text}")
    try:
        string.Template(level_format).substitute(level=0, text="")
    except (KeyError, ValueError, TypeError) as error:
        raise InputError(
            path, f"bad placeholder {error}; allowed: level, text", field="level_format"
        ) from None
    level_order = data.get("level_order", "descending")
    if level_order not in LEVEL_ORDERS:
        raise InputError(path, f"must be one of {LEVEL_ORDERS}", field="level_order")
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
        names = (needed, f"fenced_{needed}")
        if not any(f"${name}" in used or f"${{{name}}}" in used for name in names):
            raise InputError(path, f"must use ${{{needed}}}", field="user")
    return JudgePrompts(
        path=str(path),
        system=data.get("system"),
        user=data["user"],
        answer_key=answer_key,
        explanation_key=explanation,
        levels={int(k): v.strip() for k, v in levels.items()},
        sha256=sha256,
        fence_mark=mark,
        level_format=level_format,
        level_order=level_order,
    )


def parse_judgement(data: Any, prompts: JudgePrompts) -> tuple[int, str | None]:
    """(level, explanation) from an answer; ValueError saying what is wrong. ``data`` is the
    parsed JSON answer, or, for prompts without ``answer_key``, the answer's text (after any
    ``<think>`` block).

    The level may be a number (``2``, ``2.0``) or a string holding one (``"2"``, ``"2 - partly
    relevant"``); it must be one of the prompts' levels."""
    if prompts.answer_key is None:
        return _level(without_thinking(data) if isinstance(data, str) else data, prompts), None
    if not isinstance(data, dict) or prompts.answer_key not in data:
        raise ValueError(f"expected a JSON object with the key {prompts.answer_key!r}")
    explanation = data.get(prompts.explanation_key) if prompts.explanation_key else None
    level = _level(data[prompts.answer_key], prompts)
    return level, explanation.strip() if isinstance(explanation, str) else None


def _level(value: Any, prompts: JudgePrompts) -> int:
    """The level ``value`` holds, one of the prompts' levels; ValueError otherwise."""
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
        what = "the answer" if prompts.answer_key is None else repr(prompts.answer_key)
        raise ValueError(f"{what} is {value!r}; expected one of {allowed}")
    return level


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
        check = _judgement_check(self.prompts)
        return [
            Request(
                self.prompts.messages(q, self.client.document(d)),
                json=self.prompts.answer_key is not None,
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
                data = answer.data if self.prompts.answer_key else answer.text
                level, explanation = parse_judgement(data, self.prompts)
                judgements.append(Judgement(level, explanation))
            else:
                self.failures[answer.error] += 1
                judgements.append(Judgement(error=answer.error, detail=answer.detail))
        return judgements
