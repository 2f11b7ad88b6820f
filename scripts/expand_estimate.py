"""Snakemake script for rule expand_estimate: see irflow.derived.expand.estimate_expansion."""

import json
from pathlib import Path

from _common import setup_logging

from irflow.core import contracts
from irflow.derived.expand import LLMQueryWriter, estimate_expansion
from irflow.derived.llm.client import LLMClient

setup_logging(snakemake)
with LLMClient(snakemake.config["llm"]) as client:
    writer = LLMQueryWriter(client, snakemake.params.spec, snakemake.wildcards.dataset)
    result = estimate_expansion(contracts.read_frame(snakemake.input.corpus), writer)
Path(snakemake.output[0]).write_text(json.dumps(result, indent=2) + "\n")
