"""Snakemake script for rule qc_candidates: the QC retriever's run of a checked split that the
workflow's retrieve jobs do not cover; see irflow.retrieval.retrieve.retrieve_judged."""

import logging
from pathlib import Path

import faiss
import torch
from _common import start_job

from irflow.core import contracts
from irflow.retrieval.retrieve import retrieve_judged

manifest = start_job(snakemake, "qc_candidates")
torch.set_num_threads(snakemake.threads)
faiss.omp_set_num_threads(snakemake.threads)
inp, out, retrieval = snakemake.input, snakemake.output, snakemake.params.retrieval
retriever = retrieval["retriever"]
files = {
    name: Path(inp[name])
    for name in ("bm25_index", "index", "rows", "passages")
    if name in inp.keys()
}
encoder = None
if retriever["type"] == "dense":
    from irflow.encoding.models import Encoder

    # The retriever's own model and settings, as its embed job encoded the scored split's queries.
    model = snakemake.config["models"][retriever["model"]]
    encoder = Encoder.load(model, Path(inp.onnx) if inp.get("onnx") else None)
    manifest.add(model=encoder.provenance)
queries, qrels = contracts.read_table(inp.queries), contracts.read_table(inp.qrels)
run = retrieve_judged(queries, qrels, retrieval, files, encoder)
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
