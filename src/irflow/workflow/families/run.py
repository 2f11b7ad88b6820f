"""run: a run made outside irflow (a TREC or Parquet run file, local or by URL), checked and
imported as a system (rules/external_run.smk; irflow.retrieval.external_run)."""

from __future__ import annotations

from irflow.workflow.families.base import CostColumns, RetrieverFamily


class ImportedCost(CostColumns):
    """Made outside irflow: neither its latency nor its index was measured here."""

    def latency(self, cost, dataset: str, system: str) -> dict[str, float]:
        return {}

    def cost_fields(self, cost, dataset: str, system: str) -> dict:
        return {}


class ExternalRun(RetrieverFamily):
    type = "run"
    schema_def = "run"
    steps = ("import",)
    search_rule = "external_run"
    run_stage = "external_run"
    cost = ImportedCost()


FAMILY = ExternalRun()
