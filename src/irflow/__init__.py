"""irflow: reproducible evaluation of text-retrieval systems.

The package is layered by phase, each layer importing only from those below it (CONTRIBUTING.md,
"Package layers"): ``core`` (contracts, errors, config), ``data``, ``encoding``, ``retrieval``,
``evaluation``, ``derived`` (datasets made from datasets), ``analyses``, and ``workflow`` (what the
Snakemake rules read). ``core.contracts`` documents the Parquet files that pass between stages.
"""

__version__ = "0.1.0"
