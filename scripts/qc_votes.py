"""Snakemake script for rules qc_votes and audit_votes: one reranker's ranking of each query's
candidates (the runs' top depth, pooled; each other split's run on its own); see
irflow.derived.qc."""

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from _common import bi_encoder_vectors, start_job

from irflow.core import contracts
from irflow.derived.qc.votes import candidate_pools, rerank_pools
from irflow.retrieval.rerank import load_scorer
from irflow.retrieval.runs import read_run

manifest = start_job(snakemake, "qc_votes")
inp, out, params = snakemake.input, snakemake.output, snakemake.params
settings = params.settings

# Another split's candidates (qc_candidates), for quality control of a generated dataset.
split_runs = list(inp.split_runs) if "split_runs" in inp.keys() else []
pools = candidate_pools(
    [read_run(path) for path in inp.runs], [read_run(path) for path in split_runs], params.depth
)
# Only the pooled documents' texts are held.
corpus = contracts.read_table(inp.corpus)
wanted = pa.array(pd.unique(pd.concat([pool["doc_id"] for pool in pools])), pa.string())
corpus = corpus.filter(pc.is_in(corpus.column("doc_id"), value_set=wanted)).to_pydict()
documents = dict(zip(corpus["doc_id"], contracts.document_texts(corpus["title"], corpus["text"])))
queries = contracts.read_table(inp.queries).to_pydict()
queries = dict(zip(queries["query_id"], queries["text"]))

scorer = load_scorer(
    settings["reranker"],
    snakemake.config["models"],
    documents,
    queries=queries,
    threads=snakemake.threads,
    **bi_encoder_vectors(inp),
)
ranked = rerank_pools(pools, queries, documents, scorer)
contracts.write_frame(ranked, out.votes, contracts.RUN)
manifest.add(
    settings=settings,
    depth=params.depth,
    runs=list(inp.runs) + split_runs,
    queries=sum(int(pool["query_id"].nunique()) for pool in pools),
    pooled=sum(len(pool) for pool in pools),
    **scorer.provenance,
)
manifest.write()
