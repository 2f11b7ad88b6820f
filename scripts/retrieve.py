"""Snakemake script for rules retrieve_bm25 and retrieve_dense: see irflow.retrieval.retrieve."""

from pathlib import Path

import faiss
from _common import finish_retrieval, start_job

from irflow.retrieval.retrieve import bm25_search, dense_search

manifest = start_job(snakemake, "retrieve")
inp = snakemake.input
settings = snakemake.params.settings
retriever, top_k = settings["retriever"], settings["top_k"]
remove_self, latency_queries = settings["remove_self_matches"], settings["latency_queries"]
faiss.omp_set_num_threads(snakemake.threads)
if retriever["type"] == "bm25":
    run, timing = bm25_search(
        Path(inp.corpus), Path(inp.queries), retriever, top_k, remove_self, latency_queries
    )
else:
    run, timing = dense_search(
        Path(inp.index),
        settings["index"],
        Path(inp.corpus),
        Path(inp.queries),
        top_k,
        remove_self,
        batch_size=retriever["query_batch_size"],
        latency_queries=latency_queries,
        passages=Path(inp.passages) if "passages" in inp.keys() else None,
    )
finish_retrieval(snakemake, manifest, run, timing)
