"""Snakemake script for rule cost: see irflow.evaluation.cost."""

from pathlib import Path

from _common import setup_logging

from irflow.core import contracts
from irflow.core.records import StageRecord, read_record
from irflow.evaluation.cost import CostModel
from irflow.workflow.families import family

setup_logging(snakemake)


def manifest(stage: str, *names: str) -> StageRecord:
    return read_record(Path("results/manifests", stage, *names[:-1], f"{names[-1]}.json"))


model = CostModel(snakemake.config, snakemake.params.kinds, manifest, family)
table = model.table(snakemake.params.datasets)
contracts.write_frame(table, snakemake.output.table)
