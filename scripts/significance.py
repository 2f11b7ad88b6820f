"""Snakemake script for rule significance: see irflow.evaluation.significance."""

import pandas as pd
from _common import setup_logging

from irflow.core import contracts
from irflow.evaluation.significance import paired_comparisons

setup_logging(snakemake)
settings = snakemake.params.settings
per_query = contracts.read_frame(snakemake.input.per_query)
per_query = per_query[per_query["metric"].isin(settings["metrics"])]
options = {
    "permutations": settings["permutations"],
    "seed": settings["seed"],
    "alpha": settings["alpha"],
}
# Two families per (dataset, metric): all pairs, and each system against the baseline.
families = [paired_comparisons(per_query, **options).assign(family="all pairs")]
if settings["baseline"] is not None:
    against = paired_comparisons(per_query, baseline=settings["baseline"], **options)
    families.append(against.assign(family=f"against {settings['baseline']}"))
table = pd.concat(families, ignore_index=True)
contracts.write_frame(table, snakemake.output.table, contracts.SIGNIFICANCE)
