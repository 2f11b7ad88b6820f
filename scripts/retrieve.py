"""Snakemake script for the rules that make first-stage runs (retrieve_bm25, retrieve_dense,
retrieve_sparse, retrieve_late_interaction, retrieve_python): the retriever's family searches
(irflow.workflow.families)."""

from _common import finish_retrieval, input_paths, start_job

from irflow.workflow.families import family

manifest = start_job(snakemake, "retrieve")
settings = snakemake.params.settings
retriever = family(settings["retriever"]["type"])
run, timing = retriever.search(input_paths(snakemake.input), settings, snakemake.threads)
finish_retrieval(snakemake, manifest, run, timing)
