"""Snakemake script for rules retrieve_bm25 and retrieve_dense: see irflow.retrieve."""

import logging
from pathlib import Path

import faiss
from _common import setup_logging

from irflow.manifest import Manifest
from irflow.retrieve import bm25_search, dense_search
from irflow.runs import write_run

setup_logging(snakemake)
inp, out, wildcards = snakemake.input, snakemake.output, snakemake.wildcards
settings = snakemake.params.settings
retriever, top_k = settings["retriever"], settings["top_k"]
faiss.omp_set_num_threads(snakemake.threads)
manifest = Manifest(
    out.manifest,
    stage="retrieve",
    dataset=wildcards.dataset,
    system=wildcards.system,
    settings=settings,
)
if retriever["type"] == "bm25":
    run, timing = bm25_search(
        Path(inp.corpus), Path(inp.queries), retriever, top_k, settings["remove_self_matches"]
    )
else:
    run, timing = dense_search(
        Path(inp.index),
        settings["index"],
        Path(inp.corpus),
        Path(inp.queries),
        top_k,
        settings["remove_self_matches"],
        retriever["query_batch_size"],
    )
logging.getLogger("irflow.retrieve").info(
    "%s on %s: %s", wildcards.system, wildcards.dataset, timing
)
lineage = {"stage": "retrieve", "system": wildcards.system, "dataset": wildcards.dataset} | settings
write_run(run, Path(out.run), lineage, Path(out.trec), tag=wildcards.system)
manifest.add(**timing, rows=len(run))
manifest.write()
