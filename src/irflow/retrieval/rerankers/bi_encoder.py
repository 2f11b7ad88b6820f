"""bi-encoder: the dot product of a ``models`` entry's query and document vectors, as dense
retrieval scores; it reads the vectors the workflow embedded anyway."""

from __future__ import annotations

from irflow.retrieval.rerankers.base import RerankerType
from irflow.retrieval.scorers import BiEncoderScorer, ScoringJob, bi_encoder_scorer


class BiEncoder(RerankerType):
    type = "bi-encoder"
    schema_def = "bi_encoder"
    screens = True

    def embeddings_model(self, spec: dict) -> str | None:
        return spec["model"]

    def scorer(self, spec: dict, job: ScoringJob) -> BiEncoderScorer:
        return bi_encoder_scorer(job.models[spec["model"]], job)


RERANKER = BiEncoder()
