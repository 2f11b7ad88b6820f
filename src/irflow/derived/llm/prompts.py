"""prompts: a YAML prompts file read with errors that name it, and a text fenced so that nothing in
it can speak to the model as the prompt."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml

from irflow.core.errors import InputError


def fence(text: str, mark: str = '"') -> str:
    """``text`` between lines of ``mark`` (double quotes, or backquotes as a Markdown code
    fence), one more than its longest run of them (at least three), so that nothing in it can
    close the quote and speak to the model as the prompt."""
    longest = max((len(run) for run in re.findall(f"{re.escape(mark)}+", text)), default=0)
    line = mark * max(3, longest + 1)
    return f"{line}\n{text}\n{line}"


def read_prompts_file(path: str | Path, what: str) -> tuple[dict, str]:
    """The mapping in a YAML prompts file and the SHA-256 of its bytes; errors name the file
    (``what`` it is) and, for bad YAML, the line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, f"{what} does not exist") from None
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(path, f"not valid YAML: {error}", line=line) from None
    if not isinstance(data, dict):
        raise InputError(path, "must be a mapping")
    return data, hashlib.sha256(raw).hexdigest()
