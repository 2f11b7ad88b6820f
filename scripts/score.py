"""Snakemake script for rule score: see irflow.score."""

from pathlib import Path

import pandas as pd
import pyarrow as pa
from _common import setup_logging

from irflow import contracts
from irflow.manifest import Manifest
from irflow.score import score_run

setup_logging(snakemake)
inp, out, wildcards = snakemake.input, snakemake.output, snakemake.wildcards
manifest = Manifest(
    out.manifest,
    stage="score",
    dataset=wildcards.dataset,
    system=wildcards.system,
    measures=snakemake.params.measures,
)
per_query = score_run(
    pd.read_parquet(inp.run), pd.read_parquet(inp.qrels), snakemake.params.measures
)
table = pa.Table.from_pandas(per_query, schema=contracts.PER_QUERY, preserve_index=False)
contracts.write_table(table, Path(out.scores))
manifest.add(queries=per_query["query_id"].nunique(), lineage=contracts.read_lineage(inp.run))
manifest.write()
