"""cross-encoder: a sentence-transformers CrossEncoder scores each (query, document) pair. Its
entry is typed where a method receives it (irflow.core.settings_types.CrossEncoder)."""

from __future__ import annotations

from irflow.core.settings_types import CrossEncoder as Entry
from irflow.encoding.onnx_export import spec_problems
from irflow.retrieval.rerankers.base import RerankerType
from irflow.retrieval.scorers import CrossEncoderScorer, ScoringJob


class CrossEncoder(RerankerType):
    type = "cross-encoder"
    schema_def = "cross_encoder"
    screens = True
    filters_expansions = True
    exports_onnx = True

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        """Its own model settings (``id``, not a ``models`` key) must suit its backend."""
        return spec_problems(name, Entry.model_validate(spec), "rerankers")

    def scorer(self, spec: dict, job: ScoringJob) -> CrossEncoderScorer:
        return CrossEncoderScorer.load(Entry.model_validate(spec), job.threads)


RERANKER = CrossEncoder()
