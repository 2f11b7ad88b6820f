"""Snakemake script for rule positionalize: see irflow.positionalize."""

import json
from pathlib import Path

import pandas as pd
from _common import start_job

from irflow import contracts
from irflow.positionalize import (
    Positionalizer,
    load_tokenizer,
    tokenizer_fingerprint,
    variant_checksum,
)

manifest = start_job(snakemake, "positionalize")
inp, out, params = snakemake.input, snakemake.output, snakemake.params
spec = params.variant
tokenizer = load_tokenizer(params.tokenizer)
tokenizer_record = params.tokenizer | {"sha256": tokenizer_fingerprint(tokenizer)}
base = json.loads(Path(inp.base_source).read_text())
settings = {key: spec[key] for key in ("length", "position", "fillers", "seed")}
checksum = variant_checksum(base["checksum"], settings, tokenizer_record["sha256"])

maker = Positionalizer(
    *(pd.read_parquet(inp[name]) for name in ("corpus", "queries", "qrels")),
    tokenizer,
    spec["fillers"],
    spec["seed"],
)
variant = maker.variant(spec["length"], spec["position"])
for name, schema in (
    ("corpus", contracts.CORPUS),
    ("queries", contracts.QUERIES),
    ("qrels", contracts.QRELS),
):
    contracts.write_frame(getattr(variant, name), Path(out[name]), schema)

stats = variant.stats | {"base_dataset": spec["dataset"], "dataset_checksum": checksum}
Path(out.stats).write_text(json.dumps(stats, indent=2) + "\n")
# Downstream jobs read only the checksum; the rest says where the variant comes from.
source = {
    "dataset": snakemake.wildcards.dataset,
    "base_dataset": spec["dataset"],
    "split": base["split"],
    "checksum": checksum,
    "base_checksum": base["checksum"],
    "positionalize": spec,
    "tokenizer": tokenizer_record,
}
Path(out.source).write_text(json.dumps(source, indent=2) + "\n")
manifest.add(
    dataset_checksum=checksum,
    base_checksum=base["checksum"],
    tokenizer=tokenizer_record,
    statistics=stats,
)
manifest.write()
