"""Shared set-up for the thin Snakemake scripts: logging to the rule's log file."""

import logging
import sys


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
