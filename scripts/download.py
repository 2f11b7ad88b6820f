"""Snakemake script for rule download: see irflow.download."""

import json
from pathlib import Path

from _common import setup_logging

from irflow.download import dataset_files, dataset_fingerprint, dataset_layout, locate_dataset

setup_logging(snakemake)
config, dataset = snakemake.config, snakemake.wildcards.dataset
folder = locate_dataset(
    dataset,
    snakemake.params.source,
    split=config["split"],
    data_dir=Path(config["data_dir"]) if config["data_dir"] else None,
    cache_dir=Path(config["download_dir"]),
    offline=config["offline"],
)
fingerprint = dataset_fingerprint(folder, config["split"])
corpus, queries, qrels = (str(p) for p in dataset_files(folder, config["split"]))
record = {
    "dataset": dataset,
    "split": config["split"],
    "layout": dataset_layout(folder, config["split"]),
    "corpus": corpus,
    "queries": queries,
    "qrels": qrels,
} | fingerprint
Path(snakemake.output[0]).write_text(json.dumps(record, indent=2) + "\n")
