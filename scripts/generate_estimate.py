"""Snakemake script for rule generate_estimate: see irflow.generate.estimate."""

import json
from pathlib import Path

import pandas as pd
from _common import setup_logging

from irflow.generate import estimate, judged_positives, load_prompts
from irflow.llm import LLMClient

setup_logging(snakemake)
inp, params = snakemake.input, snakemake.params
spec = params.spec
positives = judged_positives(inp.qrels) if spec["sample_from"] == "positives" else None
tokenizer = None
if params.tokenizer:  # samples as generate does (lengths in its tokens)
    from irflow.positionalize import load_tokenizer

    tokenizer = load_tokenizer(params.tokenizer)

# Tokens are counted as characters / 4: the served model's tokenizer is not known here.
with LLMClient(snakemake.config["llm"]) as client:
    result = estimate(
        pd.read_parquet(inp.corpus),
        spec,
        load_prompts(inp.prompts),
        client,
        tokenizer=tokenizer,
        positives=positives,
    )
Path(snakemake.output[0]).write_text(json.dumps(result, indent=2) + "\n")
