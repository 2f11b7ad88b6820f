"""Snakemake script for rule quality_control: see irflow.derived.qc."""

import json
from pathlib import Path

from _common import start_job, write_dataset_record, write_dataset_tables

from irflow.core import contracts
from irflow.derived.generate.dataset import SPLITS, checked_splits, content_checksum, list_generated
from irflow.derived.llm.client import LLMClient
from irflow.derived.qc.control import quality_control, read_votes, split_after_control
from irflow.derived.qc.judge import Judge, load_judge_prompts

manifest = start_job(snakemake, "quality_control")
inp, out, params = snakemake.input, snakemake.output, snakemake.params
spec, judge_settings = params.spec, params.judge
base = json.loads(Path(inp.base_source).read_text())
prompts = load_judge_prompts(inp.prompts)
ranks = read_votes(dict(zip(params.rerankers, inp.votes)))
settings = {
    "thresholds": spec["thresholds"],
    "majority": params.majority,
    "relevant_level": judge_settings["relevant_level"],
    "relevant_negative": spec["relevant_negative"],
}

# Operational settings (address, key variable, concurrency, timeout, retries, cache folder)
# come from the config; params.llm holds only those that change answers.
with LLMClient(snakemake.config["llm"]) as client:
    judge = Judge(prompts, client, judge_settings["temperature"])
    try:
        controlled = quality_control(
            snakemake.wildcards.dataset,
            contracts.read_frame(inp.corpus),
            contracts.read_frame(inp.queries),
            {split: contracts.read_frame(inp[f"qrels_{split}"]) for split in checked_splits(spec)},
            contracts.read_frame(inp.negatives),
            ranks,
            judge=judge,
            settings=settings,
        )
    finally:
        manifest.add(llm=client.summary())

# AIR-Bench splits after quality control: when every split was checked, the kept queries are
# split anew at the generation's dev share (1:4 for QA; all test on Long-Doc).
generated = list_generated(snakemake.config)[spec["dataset"]]
if set(checked_splits(spec)) == set(SPLITS):
    controlled.stats["split_after_control"] = split_after_control(
        controlled, generated["dev_share"], generated["seed"]
    )
# qrels.parquet is the scored split's, as the generated dataset's; a split not checked is
# written empty.
controlled.qrels = controlled.split_qrels[base["split"]]
write_dataset_tables(controlled, out)
for split in SPLITS:
    rows = controlled.split_qrels.get(split, controlled.qrels.iloc[:0])
    contracts.write_frame(rows, Path(out[f"qrels_{split}"]), contracts.QRELS)
contracts.write_frame(controlled.audit, out.audit)
checksum = content_checksum([Path(out[name]) for name in ("corpus", "queries", "qrels")])
prompts_record = {"path": prompts.path, "sha256": prompts.sha256}
stats = write_dataset_record(
    snakemake,
    spec["dataset"],
    base,
    checksum,
    controlled.stats,
    {
        "quality_control": spec | {"rerankers": params.rerankers, "majority": params.majority},
        "judge": judge_settings,
        "llm": params.llm,
        "prompts": prompts_record,
    },
)
manifest.add(
    dataset_checksum=checksum,
    base_checksum=base["checksum"],
    prompts=prompts_record,
    statistics=stats,
)
manifest.write()
