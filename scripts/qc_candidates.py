"""Snakemake script for rule qc_candidates: the QC retriever's run of a checked split that the
workflow's retrieve jobs do not cover; see irflow.retrieval.retrieve.retrieve_judged."""

import logging

from _common import start_job

from irflow.core import contracts
from irflow.retrieval.retrieve import retrieve_judged
from irflow.retrieval.runs import SearchRequest
from irflow.workflow.families import family
from irflow.workflow.families.base import named_paths

manifest = start_job(snakemake, "qc_candidates")
inp, out, retrieval = snakemake.input, snakemake.output, snakemake.params.retrieval
searcher = family(retrieval["retriever"]["type"]).open_searcher(
    named_paths(inp), retrieval, snakemake.threads, models=snakemake.config["models"]
)
queries, qrels = contracts.read_table(inp.queries), contracts.read_table(inp.qrels)
run = retrieve_judged(queries, qrels, searcher, SearchRequest.of(retrieval))
# A model that encoded the split's queries (a dense retriever's), as its embed job does.
encoder = getattr(searcher, "encode", None)
if getattr(encoder, "provenance", None):
    manifest.add(model=encoder.provenance)
contracts.write_table(run, out.run, contracts.RUN)
judged = len(
    set(qrels.column("query_id").to_pylist()) & set(queries.column("query_id").to_pylist())
)
retrieved = len(set(run.column("query_id").to_pylist()))
logging.getLogger("irflow.derived.qc").info(
    "%s, split %s: %d judged queries, %d with candidates (%d rows, depth %d)",
    snakemake.wildcards.dataset,
    snakemake.wildcards.split,
    judged,
    retrieved,
    run.num_rows,
    retrieval["top_k"],
)
manifest.add(
    split=snakemake.wildcards.split,
    retrieval=retrieval,
    queries=judged,
    queries_with_candidates=retrieved,
    rows=run.num_rows,
)
manifest.write()
