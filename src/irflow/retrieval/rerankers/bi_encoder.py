"""bi-encoder: the dot product of a ``models`` entry's query and document vectors, as dense
retrieval scores; it reads the vectors the workflow embedded anyway. Its entry is typed where a
method receives it (irflow.core.settings_types.BiEncoder)."""

from __future__ import annotations

from irflow.core.settings_types import BiEncoder as Entry
from irflow.retrieval.rerankers.base import RerankerType
from irflow.retrieval.scorers import BiEncoderScorer, ScoringJob, bi_encoder_scorer


class BiEncoder(RerankerType):
    type = "bi-encoder"
    schema_def = "bi_encoder"
    screens = True

    def embeddings_model(self, spec: dict) -> str | None:
        return Entry.model_validate(spec).model

    def scorer(self, spec: dict, job: ScoringJob) -> BiEncoderScorer:
        return bi_encoder_scorer(job.models[Entry.model_validate(spec).model], job)


RERANKER = BiEncoder()
