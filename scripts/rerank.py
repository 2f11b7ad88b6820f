"""Snakemake script for rule rerank: see irflow.retrieval.rerank."""

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from _common import bi_encoder_vectors, start_job

from irflow.core import contracts
from irflow.retrieval.rerank import load_scorer, rerank, top_candidates
from irflow.retrieval.runs import read_run, write_run

manifest = start_job(snakemake, "rerank")
inp, out, wildcards = snakemake.input, snakemake.output, snakemake.wildcards
settings = snakemake.params.settings
spec, k = settings["reranker"], settings["k"]

first_stage = read_run(inp.run)
candidates = pa.array(top_candidates(first_stage, k)["doc_id"].unique())
# Only the candidates' rows are kept, batch by batch, as the corpus file is scanned.
corpus = contracts.read_table(inp.corpus, filters=pc.field("doc_id").isin(candidates)).to_pydict()
documents = dict(zip(corpus["doc_id"], contracts.document_texts(corpus["title"], corpus["text"])))
queries = contracts.read_table(inp.queries).to_pydict()
queries = dict(zip(queries["query_id"], queries["text"]))

scorer = load_scorer(
    spec,
    snakemake.config["models"],
    documents,
    queries=queries,
    threads=snakemake.threads,
    **bi_encoder_vectors(inp),
)

run, latency = rerank(first_stage, queries, documents, scorer, k, snakemake.params.latency_queries)
lineage = {
    "stage": "rerank",
    "system": wildcards.system,
    "dataset": wildcards.dataset,
    "first_stage": settings["first_stage"],
    "k": k,
    "reranker": settings["reranker_name"],
    "first_stage_lineage": contracts.read_lineage(inp.run),
}
write_run(run, Path(out.run), lineage, Path(out.trec), tag=wildcards.system)
manifest.add(
    settings=settings,
    first_stage=settings["first_stage"],
    k=k,
    latency=latency,
    rows=len(run),
    **scorer.provenance,
)
manifest.write()
