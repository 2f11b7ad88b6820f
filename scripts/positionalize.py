"""Snakemake script for rule positionalize: see irflow.positionalize."""

import json
from pathlib import Path

import pandas as pd
from _common import start_job, write_dataset_record, write_dataset_tables

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
write_dataset_tables(variant, out)
stats = write_dataset_record(
    snakemake,
    spec["dataset"],
    base,
    checksum,
    variant.stats,
    {"positionalize": spec, "tokenizer": tokenizer_record},
)
manifest.add(
    dataset_checksum=checksum,
    base_checksum=base["checksum"],
    tokenizer=tokenizer_record,
    statistics=stats,
)
manifest.write()
