"""Snakemake script for the rules that make first-stage runs (retrieve_bm25, retrieve_dense,
retrieve_sparse, retrieve_late_interaction, retrieve_lucene, retrieve_python): the retriever's
family searches (irflow.workflow.families)."""

from _common import finish_retrieval, start_job

from irflow.workflow.families import family

manifest = start_job(snakemake, "retrieve")
settings = snakemake.params.settings
searcher = family(settings["retriever"]["type"])
run, timing = searcher.search(snakemake.input, settings, snakemake.threads)
finish_retrieval(snakemake, manifest, run, timing)
