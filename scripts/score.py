"""Snakemake script for rule score: see irflow.evaluation.score."""

from pathlib import Path

from _common import start_job

from irflow.core import contracts
from irflow.evaluation.score import score_run
from irflow.retrieval.runs import read_run

manifest = start_job(snakemake, "score")
inp, measures = snakemake.input, snakemake.params.measures
per_query = score_run(read_run(inp.run), contracts.read_frame(inp.qrels), measures)
contracts.write_frame(per_query, Path(snakemake.output.scores), contracts.PER_QUERY)
manifest.add(
    measures=measures,
    queries=per_query["query_id"].nunique(),
    lineage=contracts.read_lineage(inp.run),
)
manifest.write()
