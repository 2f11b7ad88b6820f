"""rerankers: the reranker types, by the ``type`` a ``rerankers`` entry names.

Each module of this package defines one type (``RERANKER``, an
irflow.retrieval.rerankers.base.RerankerType); installed packages add theirs as
``irflow.rerankers`` entry points (irflow.retrieval.rerankers.python.EntryPoint). The rules, the
config check, the memory requests and the features that score with a reranker (quality
control, positionalize's screen, expand's filter) ask the registry, never a list of types.
"""

from __future__ import annotations

from irflow.core.config import register_check
from irflow.core.plugins import Registry
from irflow.retrieval.rerankers.base import RerankerType
from irflow.retrieval.rerankers.python import EntryPoint

RERANKERS: Registry[RerankerType] = Registry(
    "reranker type",
    __name__,
    "RERANKER",
    group="irflow.rerankers",
    load=EntryPoint,
    choices=("properties", "rerankers", "additionalProperties", "oneOf"),
)
# The type a ``rerankers`` entry names (a validated config names only known ones).
reranker_type = RERANKERS.get


def with_capability(config: dict, capability: str) -> list[str]:
    """The rerankers whose type can do ``capability`` (screens, filters_expansions, ...)."""
    return sorted(
        name
        for name, spec in config["rerankers"].items()
        if getattr(reranker_type(spec["type"]), capability)
    )


def types_with(capability: str) -> str:
    """The types that can do ``capability``, for a message: "cross-encoder or bi-encoder"."""
    return " or ".join(t for t, found in RERANKERS.built_in().items() if getattr(found, capability))


def reranker_settings(
    config: dict, reranker: str, first_stage: str | None = None, k: int | None = None
) -> dict:
    """Everything that determines a reranker's scores, as the params of a job that scores
    with it (a rerank job: with its ``first_stage`` and ``k``; a QC vote: without), so that a
    change to any of it reruns the job: its entry and its type's ``settings``."""
    spec = config["rerankers"][reranker]
    settings = {"first_stage": first_stage, "reranker_name": reranker, "k": k, "reranker": spec}
    settings = {key: value for key, value in settings.items() if value is not None}
    return settings | reranker_type(spec["type"]).settings(spec, config)


@register_check
def reranker_problems(config: dict) -> list[str]:
    """Each reranker's own checks (its type's ``problems``)."""
    return [
        problem
        for name, spec in config["rerankers"].items()
        for problem in reranker_type(spec["type"]).problems(name, spec, config)
    ]
