"""Shared set-up for the thin Snakemake scripts: logging and the job's manifest."""

import json
import logging
import sys
from pathlib import Path

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
