"""Snakemake script for rule download: see irflow.data.download."""

import json
from pathlib import Path

from _common import setup_logging

from irflow.core.config import scored_split
from irflow.data.download import (
    IR_DATASETS_RECORD,
    dataset_files,
    dataset_fingerprint,
    dataset_layout,
    locate_dataset,
)

setup_logging(snakemake)
config, dataset = snakemake.config, snakemake.wildcards.dataset
split = scored_split(config, dataset)
folder = locate_dataset(
    dataset,
    snakemake.params.source,
    split=split,
    data_dir=Path(config["data_dir"]) if config["data_dir"] else None,
    cache_dir=Path(config["download_dir"]),
    offline=config["offline"],
)
fingerprint = dataset_fingerprint(folder, split)
corpus, queries, qrels = (str(p) for p in dataset_files(folder, split))
record = {
    "dataset": dataset,
    "split": split,
    "layout": dataset_layout(folder, split),
    "corpus": corpus,
    "queries": queries,
    "qrels": qrels,
} | fingerprint
if (folder / IR_DATASETS_RECORD).is_file():  # read through ir_datasets: which files, which md5s
    record["ir_datasets"] = json.loads((folder / IR_DATASETS_RECORD).read_text())
Path(snakemake.output[0]).write_text(json.dumps(record, indent=2) + "\n")
