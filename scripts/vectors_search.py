"""Snakemake script for rules retrieve_sparse and retrieve_late_interaction: see
irflow.retrieval.sparse and irflow.retrieval.late_interaction."""

from functools import partial
from pathlib import Path

import torch
from _common import finish_retrieval, start_job

from irflow.retrieval.late_interaction import late_interaction_search
from irflow.retrieval.sparse import sparse_search

manifest = start_job(snakemake, "retrieve")
inp = snakemake.input
settings = snakemake.params.settings
retriever = settings["retriever"]
torch.set_num_threads(snakemake.threads)
if retriever["type"] == "sparse":
    search = sparse_search
else:
    search = partial(late_interaction_search, index=retriever["index"])
run, timing = search(
    Path(inp.corpus),
    Path(inp.queries),
    settings["top_k"],
    settings["remove_self_matches"],
    retriever["query_batch_size"],
    settings["latency_queries"],
)
finish_retrieval(snakemake, manifest, run, timing)
