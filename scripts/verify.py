"""Snakemake script for rule verify: see irflow.core.verify."""

import logging
from pathlib import Path

from _common import setup_logging

from irflow.core.verify import results_files, verify_files

setup_logging(snakemake)
count = verify_files(results_files(Path("results")))
logging.getLogger("irflow.core.verify").info("%d files under results/ read back whole", count)
