"""Snakemake script for rule ingest: see irflow.ingest."""

import json
from pathlib import Path

from _common import setup_logging

from irflow.ingest import ingest
from irflow.manifest import Manifest

setup_logging(snakemake)
out = snakemake.output
source = json.loads(Path(snakemake.input[0]).read_text())
manifest = Manifest(
    out.manifest,
    stage="ingest",
    dataset=source["dataset"],
    dataset_checksum=source["checksum"],
    files=source["files"],
)
stats = ingest(
    *(Path(source[name]) for name in ("corpus", "queries", "qrels")),
    Path(out.corpus).parent,
    snakemake.params.unknown_qrels,
)
stats |= {"split": source["split"], "dataset_checksum": source["checksum"]}
Path(out.stats).write_text(json.dumps(stats, indent=2) + "\n")
manifest.add(statistics=stats)
manifest.write()
