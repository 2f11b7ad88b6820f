"""Snakemake script for rules retrieve_sparse and retrieve_late_interaction: see irflow.sparse
and irflow.late_interaction."""

import logging
from pathlib import Path

import torch
from _common import start_job

from irflow.late_interaction import late_interaction_search
from irflow.runs import write_run
from irflow.sparse import sparse_search

manifest = start_job(snakemake, "retrieve")
inp, out, wildcards = snakemake.input, snakemake.output, snakemake.wildcards
settings = snakemake.params.settings
retriever = settings["retriever"]
torch.set_num_threads(snakemake.threads)
search = sparse_search if retriever["type"] == "sparse" else late_interaction_search
run, timing = search(
    Path(inp.corpus),
    Path(inp.queries),
    settings["top_k"],
    settings["remove_self_matches"],
    retriever["query_batch_size"],
    settings["latency_queries"],
)
log = logging.getLogger("irflow.retrieve")
log.info(
    "%s on %s: %d queries in %.2f s",
    wildcards.system,
    wildcards.dataset,
    timing["queries"],
    timing["search_seconds"],
)
if timing["short_queries"]:
    # A sparse search retrieves only documents sharing a term with the query.
    log.warning(
        "%d of %d queries got fewer than min(top_k=%d, corpus size) documents, e.g. %s",
        timing["short_queries"],
        timing["queries"],
        settings["top_k"],
        timing["short_query_examples"],
    )
lineage = {"stage": "retrieve", "system": wildcards.system, "dataset": wildcards.dataset} | settings
write_run(run, Path(out.run), lineage, Path(out.trec), tag=wildcards.system)
manifest.add(settings=settings, device="cpu", rows=len(run), **timing)
manifest.write()
