"""Snakemake script for rule generate_estimate: see irflow.derived.generate.estimate.estimate."""

import json
from pathlib import Path

from _common import setup_logging

from irflow.core import contracts
from irflow.derived.generate.dataset import judged_positives
from irflow.derived.generate.estimate import estimate
from irflow.derived.generate.prompts import load_prompts
from irflow.derived.llm.client import LLMClient
from irflow.derived.qc.judge import Judge, load_judge_prompts
from irflow.derived.qc.settings import majority_needed

setup_logging(snakemake)
inp, params = snakemake.input, snakemake.params
spec = params.spec
positives = judged_positives(inp.qrels) if spec["sample_from"] == "positives" else None
tokenizer = None
if params.tokenizer:  # samples as generate does (lengths in its tokens)
    from irflow.encoding.models import load_tokenizer

    tokenizer = load_tokenizer(params.tokenizer)

# Tokens are counted as characters / 4: the served model's tokenizer is not known here.
with LLMClient(snakemake.config["llm"]) as client:
    quality_control = {}
    if params.quality_control:  # the judge of each QC'd copy, as quality_control asks it
        judge = Judge(load_judge_prompts(inp.judge_prompts), client, params.judge["temperature"])
        needed = majority_needed(params.rerankers, params.majority)
        quality_control = {
            name: {"judge": judge, "rerankers": params.rerankers, "needed": needed} | qc
            for name, qc in params.quality_control.items()
        }
    result = estimate(
        contracts.read_frame(inp.corpus),
        spec,
        load_prompts(inp.prompts),
        client,
        tokenizer=tokenizer,
        positives=positives,
        quality_control=quality_control,
    )
Path(snakemake.output[0]).write_text(json.dumps(result, indent=2) + "\n")
