"""Snakemake script for rules retrieve_bm25 and retrieve_dense: see irflow.retrieve."""

import logging
from pathlib import Path

import faiss
from _common import start_job

from irflow.retrieve import bm25_search, dense_search
from irflow.runs import write_run

manifest = start_job(snakemake, "retrieve")
inp, out, wildcards = snakemake.input, snakemake.output, snakemake.wildcards
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
        retriever["query_batch_size"],
        latency_queries,
        Path(inp.passages) if "passages" in inp.keys() else None,
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
    # BM25 retrieves only documents sharing a term with the query; a dense search is short
    # only when its index could not be probed to top_k (manifest: search).
    log.warning(
        "%d of %d queries got fewer than min(top_k=%d, corpus size) documents, e.g. %s",
        timing["short_queries"],
        timing["queries"],
        top_k,
        timing["short_query_examples"],
    )
lineage = {"stage": "retrieve", "system": wildcards.system, "dataset": wildcards.dataset} | settings
write_run(run, Path(out.run), lineage, Path(out.trec), tag=wildcards.system)
manifest.add(settings=settings, device="cpu", rows=len(run), **timing)
manifest.write()
