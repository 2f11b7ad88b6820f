"""Snakemake script for rule generate: see irflow.derived.generate and irflow.derived.llm."""

import json
from pathlib import Path

from _common import start_job, write_dataset_record

from irflow.core import contracts
from irflow.derived.generate.dataset import (
    content_checksum,
    generate_dataset,
    judged_positives,
    write_generated,
)
from irflow.derived.generate.prompts import load_prompts
from irflow.derived.llm.client import LLMClient

manifest = start_job(snakemake, "generate")
inp, out, params = snakemake.input, snakemake.output, snakemake.params
spec = params.spec
base = json.loads(Path(inp.base_source).read_text())
prompts = load_prompts(inp.prompts)
positives = judged_positives(inp.qrels) if spec["sample_from"] == "positives" else None
tokenizer, tokenizer_record = None, None
if params.tokenizer:  # counts the tokens of chunk_tokens, min_words and max_words
    from irflow.data.tokens import tokenizer_fingerprint
    from irflow.encoding.models import load_tokenizer

    tokenizer = load_tokenizer(params.tokenizer)
    tokenizer_record = params.tokenizer | {"sha256": tokenizer_fingerprint(tokenizer)}

# Operational settings (address, key variable, concurrency, timeout, retries, cache folder)
# come from the config; params.llm holds only those that change answers.
with LLMClient(snakemake.config["llm"]) as client:
    try:
        generated = generate_dataset(
            contracts.read_frame(inp.corpus),
            spec,
            prompts,
            client,
            tokenizer=tokenizer,
            corpus_path=inp.corpus,
            positives=positives,
        )
    finally:
        manifest.add(llm=client.summary())

paths = write_generated(generated, Path(out.corpus).parent, spec["split"])
checksum = content_checksum([paths[name] for name in ("corpus", "queries", "qrels")])
prompts_record = {"path": prompts.path, "sha256": prompts.sha256}
stats = write_dataset_record(
    snakemake,
    spec["dataset"],
    base,
    checksum,
    generated.stats,
    {
        "split": spec["split"],  # the generated split scored, not the source's
        "generate": spec,
        "llm": params.llm,
        "prompts": prompts_record,
        "tokenizer": tokenizer_record,
    },
)
manifest.add(
    dataset_checksum=checksum,
    base_checksum=base["checksum"],
    prompts=prompts_record,
    tokenizer=tokenizer_record,
    statistics=stats,
)
manifest.write()
