"""Shared set-up for the thin Snakemake scripts: logging and the job's manifest."""

import json
import logging
import sys
from pathlib import Path

from irflow.manifest import Manifest


def setup_logging(snakemake) -> None:
    handlers = [logging.StreamHandler(sys.stderr)]
    if snakemake.log:
        handlers.append(logging.FileHandler(snakemake.log[0], mode="w"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        handlers=handlers,
        force=True,
    )


def start_job(snakemake, stage: str) -> Manifest:
    """Set up logging and open the job's manifest with its wildcards and, when the rule reads
    the dataset's source.json, the dataset checksum."""
    setup_logging(snakemake)
    facts = {"stage": stage, **dict(snakemake.wildcards.items())}
    if hasattr(snakemake.input, "source"):
        facts["dataset_checksum"] = json.loads(Path(snakemake.input.source).read_text())["checksum"]
    return Manifest(snakemake.output.manifest, **facts)
