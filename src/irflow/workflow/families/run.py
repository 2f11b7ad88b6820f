"""run: a run made outside irflow (a TREC or Parquet run file, local or by URL), checked and
imported as a system (rules/external_run.smk; irflow.retrieval.external_run)."""

from __future__ import annotations

from irflow.evaluation.cost import CostModel
from irflow.workflow.families.base import RetrieverFamily


class ExternalRun(RetrieverFamily):
    type = "run"
    schema_def = "run"
    steps = ("import",)
    search_rule = "external_run"
    run_stage = "external_run"

    def latency(self, cost: CostModel, dataset: str, system: str) -> dict[str, float]:
        """Made outside irflow: its latency was not measured here."""
        return {}

    def cost_fields(self, cost: CostModel, dataset: str, system: str) -> dict:
        return {}


FAMILY = ExternalRun()
