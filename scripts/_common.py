"""Shared set-up for the thin Snakemake scripts: logging and the job's manifest."""

import json
import logging
import sys
from pathlib import Path

from irflow import contracts
from irflow.errors import UserError
from irflow.manifest import Manifest

log = logging.getLogger("irflow")


def _log_uncaught(kind, error, traceback) -> None:
    """Report a job's fatal error through logging, so it reaches the rule's log as well as
    stderr: a user error as its one-line message, anything else with its traceback."""
    if isinstance(error, UserError):
        log.error("%s", error)
    else:
        log.critical("unexpected error", exc_info=(kind, error, traceback))


def setup_logging(snakemake) -> None:
    """Send logging, Python warnings and an uncaught error to stderr and the rule's log."""
    handlers = [logging.StreamHandler(sys.stderr)]
    if snakemake.log:
        handlers.append(logging.FileHandler(snakemake.log[0], mode="w"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        handlers=handlers,
        force=True,
    )
    logging.captureWarnings(True)
    # The interpreter still exits with status 1 after the hook, so Snakemake sees the failure.
    sys.excepthook = _log_uncaught


def start_job(snakemake, stage: str) -> Manifest:
    """Set up logging and open the job's manifest with its wildcards and, when the rule reads
    the dataset's source.json, the dataset checksum."""
    setup_logging(snakemake)
    facts = {"stage": stage, **dict(snakemake.wildcards.items())}
    if hasattr(snakemake.input, "source"):
        facts["dataset_checksum"] = json.loads(Path(snakemake.input.source).read_text())["checksum"]
    return Manifest(snakemake.output.manifest, **facts)


def write_dataset_tables(tables, out) -> None:
    """The corpus, queries and qrels of ``tables`` (attributes of those names) as the
    contracts' Parquet files at the rule's outputs of the same names."""
    for name, schema in (
        ("corpus", contracts.CORPUS),
        ("queries", contracts.QUERIES),
        ("qrels", contracts.QRELS),
    ):
        contracts.write_frame(getattr(tables, name), Path(out[name]), schema)


def write_dataset_record(
    snakemake, base_name: str, base: dict, checksum: str, stats: dict, provenance: dict
) -> dict:
    """stats.json and source.json of a dataset made from dataset ``base_name`` (whose
    source.json is ``base``): a variant, a generated or a checked benchmark. Downstream jobs
    read only the checksum; ``provenance`` says how the dataset was made. Returns the stats."""
    out = snakemake.output
    stats = stats | {"base_dataset": base_name, "dataset_checksum": checksum}
    Path(out.stats).write_text(json.dumps(stats, indent=2) + "\n")
    source = {
        "dataset": snakemake.wildcards.dataset,
        "base_dataset": base_name,
        "split": base["split"],
        "checksum": checksum,
        "base_checksum": base["checksum"],
    } | provenance
    Path(out.source).write_text(json.dumps(source, indent=2) + "\n")
    return stats
