"""late-interaction: exact MaxSim of a ColBERT model's query and candidate token vectors
(irflow.retrieval.maxsim_rerank.MaxSimScorer). Its entry is typed where a method receives it
(irflow.core.settings_types.LateInteractionReranker)."""

from __future__ import annotations

from irflow.core.config import torch_problems
from irflow.core.settings_types import LateInteractionReranker as Entry
from irflow.retrieval.rerankers.base import RerankerType
from irflow.retrieval.scorers import ScoringJob


class LateInteraction(RerankerType):
    type = "late-interaction"
    schema_def = "late_interaction_reranker"

    def problems(self, name: str, spec: dict, config: dict) -> list[str]:
        """Its token encoder runs on torch: a model with an ONNX backend is refused."""
        key, model = f"rerankers.{name}.model", Entry.model_validate(spec).model
        return super().problems(name, spec, config) + torch_problems(config, key, model)

    def held_bytes(self, spec: dict) -> int:
        """One batch of the candidates' token vectors."""
        from irflow.retrieval.maxsim_rerank import MAX_HELD_TOKEN_BYTES

        return MAX_HELD_TOKEN_BYTES

    def scorer(self, spec: dict, job: ScoringJob):
        from irflow.encoding.models import use_threads
        from irflow.retrieval.late_interaction import TokenEncoder
        from irflow.retrieval.maxsim_rerank import MaxSimScorer

        use_threads(job.threads)
        return MaxSimScorer(TokenEncoder.load(job.models[Entry.model_validate(spec).model]))


RERANKER = LateInteraction()
