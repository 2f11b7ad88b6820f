"""Snakemake script for rule derive: a derived dataset that its kind makes from its base's
tables (irflow.workflow.kinds: the kind's ``make``)."""

import json
from pathlib import Path
from types import SimpleNamespace

from _common import start_job, write_dataset_record, write_dataset_tables

from irflow.core import contracts
from irflow.core.fingerprint import value_md5
from irflow.workflow.kinds import KINDS

manifest = start_job(snakemake, "derive")
inp, params = snakemake.input, snakemake.params
base = json.loads(Path(inp.base_source).read_text())
names = ("corpus", "queries", "qrels")
tables = SimpleNamespace(**{name: contracts.read_frame(inp[name]) for name in names})
made, stats = KINDS.get(params.kind).make(tables, params.spec)
write_dataset_tables(made, snakemake.output)
# What its content depends on: its base's, its kind and its settings.
checksum = value_md5([base["checksum"], params.kind, params.spec])
provenance = {"kind": params.kind}
stats = write_dataset_record(snakemake, params.spec["dataset"], base, checksum, stats, provenance)
manifest.add(kind=params.kind, dataset_checksum=checksum, base_checksum=base["checksum"])
manifest.add(statistics=stats)
manifest.write()
