"""Snakemake script for rules qc_votes and audit_votes: one reranker's ranking of each query's
candidates (the runs' top depth, pooled); see irflow.qc."""

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
from _common import bi_encoder_vectors, start_job

from irflow import contracts
from irflow.qc import pool_runs, rerank_pool
from irflow.rerank import load_scorer
from irflow.runs import read_run

manifest = start_job(snakemake, "qc_votes")
torch.set_num_threads(snakemake.threads)
inp, out, params = snakemake.input, snakemake.output, snakemake.params
settings = params.settings

pool = pool_runs([read_run(path) for path in inp.runs], params.depth)
# Only the pooled documents' texts are held.
corpus = pq.read_table(inp.corpus)
wanted = pa.array(pool["doc_id"].unique(), pa.string())
corpus = corpus.filter(pc.is_in(corpus.column("doc_id"), value_set=wanted)).to_pydict()
documents = dict(zip(corpus["doc_id"], contracts.document_texts(corpus["title"], corpus["text"])))
queries = pq.read_table(inp.queries).to_pydict()
queries = dict(zip(queries["query_id"], queries["text"]))

scorer = load_scorer(
    settings["reranker"],
    snakemake.config["models"],
    documents,
    queries=queries,
    **bi_encoder_vectors(inp),
)
ranked = rerank_pool(pool, queries, documents, scorer)
contracts.write_frame(ranked, out.votes, contracts.RUN)
manifest.add(
    settings=settings,
    depth=params.depth,
    runs=list(inp.runs),
    queries=int(pool["query_id"].nunique()),
    pooled=len(pool),
    **scorer.provenance,
)
manifest.write()
