"""Snakemake script for the rules that make first-stage runs (retrieve_bm25, retrieve_dense,
retrieve_sparse, retrieve_late_interaction, retrieve_lucene, retrieve_python): the retriever's
family searches (irflow.workflow.families)."""

from _common import finish_retrieval, start_job

from irflow.workflow.families import family
from irflow.workflow.families.base import named_paths

manifest = start_job(snakemake, "retrieve")
settings = snakemake.params.settings
job = family(settings["retriever"]["type"]).job
run, timing = job.search(named_paths(snakemake.input), settings, snakemake.threads)
finish_retrieval(snakemake, manifest, run, timing)
