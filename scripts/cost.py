"""Snakemake script for rule cost: see irflow.cost."""

import json
from pathlib import Path

from _common import setup_logging

from irflow import contracts
from irflow.cost import CostModel

setup_logging(snakemake)


def manifest(stage: str, *names: str) -> dict:
    path = Path("results/manifests", stage, *names[:-1], f"{names[-1]}.json")
    return json.loads(path.read_text())


model = CostModel(snakemake.config, snakemake.params.kinds, manifest)
table = model.table(snakemake.params.datasets)
contracts.write_frame(table, snakemake.output.table)
