"""Snakemake script for rule ingest: see irflow.data.ingest."""

import json
from pathlib import Path

from _common import start_job

from irflow.data.ingest import ingest

manifest = start_job(snakemake, "ingest")
out = snakemake.output
source = json.loads(Path(snakemake.input.source).read_text())
stats = ingest(
    *(Path(source[name]) for name in ("corpus", "queries", "qrels")),
    Path(out.corpus).parent,
    snakemake.params.unknown_qrels,
    source["layout"],
)
stats |= {"split": source["split"], "dataset_checksum": source["checksum"]}
Path(out.stats).write_text(json.dumps(stats, indent=2) + "\n")
manifest.add(files=source["files"], statistics=stats)
manifest.write()
