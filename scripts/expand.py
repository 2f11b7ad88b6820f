"""Snakemake script for rule expand: see irflow.expand."""

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import torch
from _common import start_job, write_dataset_record, write_dataset_tables

from irflow.expand import QueryGenerator, expand_corpus
from irflow.fingerprint import value_md5

manifest = start_job(snakemake, "expand")
inp, out, spec = snakemake.input, snakemake.output, snakemake.params.spec
torch.set_num_threads(snakemake.threads)
base = json.loads(Path(inp.base_source).read_text())
generator = QueryGenerator.load(spec["model"])
corpus, stats = expand_corpus(pd.read_parquet(inp.corpus), generator)
tables = SimpleNamespace(
    corpus=corpus, queries=pd.read_parquet(inp.queries), qrels=pd.read_parquet(inp.qrels)
)
write_dataset_tables(tables, out)
# The batch size orders the sampling, so it is part of what made the corpus; the device is not.
settings = {key: value for key, value in spec["model"].items() if key != "device"}
identity = {k: v for k, v in generator.provenance.items() if k in ("revision", "files_md5")}
checksum = value_md5([base["checksum"], settings, identity])
stats = write_dataset_record(
    snakemake, spec["dataset"], base, checksum, stats, {"expand": spec, "model": identity}
)
manifest.add(dataset_checksum=checksum, base_checksum=base["checksum"], statistics=stats)
manifest.add(**generator.provenance)
manifest.write()
