"""Snakemake script for rule label_audit: see irflow.derived.label_audit."""

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from _common import start_job

from irflow.core import contracts
from irflow.derived.label_audit import (
    audit_candidates,
    hole_before_after,
    proposed_qrels,
    review_table,
    summarize,
    write_trec_qrels,
)
from irflow.derived.llm.client import LLMClient
from irflow.derived.qc.control import read_votes
from irflow.derived.qc.judge import Judge, load_judge_prompts
from irflow.derived.qc.settings import majority_needed
from irflow.derived.qc.votes import pool_runs
from irflow.retrieval.runs import read_run

manifest = start_job(snakemake, "label_audit")
inp, out, params = snakemake.input, snakemake.output, snakemake.params
audit, dataset = params.audit, snakemake.wildcards.dataset
runs = {system: read_run(path) for system, path in zip(params.systems, inp.runs)}
pool = pool_runs(list(runs.values()), audit["depth"])
qrels = contracts.read_frame(inp.qrels)
ranks = read_votes(dict(zip(params.rerankers, inp.votes)))
queries = contracts.read_table(inp.queries).to_pandas()
query_texts = dict(zip(queries["query_id"], queries["text"]))
# Only the pooled documents' texts are held.
corpus = contracts.read_table(inp.corpus)
wanted = pa.array(pool["doc_id"].unique(), pa.string())
corpus = corpus.filter(pc.is_in(corpus.column("doc_id"), value_set=wanted)).to_pandas()
documents = dict(zip(corpus["doc_id"], contracts.document_texts(corpus["title"], corpus["text"])))


def candidates_with(judge):
    return audit_candidates(
        dataset,
        pool,
        qrels,
        ranks,
        audit["threshold"],
        majority_needed(len(ranks), params.majority),
        relevant_level=params.judge["relevant_level"],
        judge=judge,
        texts=(query_texts, documents),
    )


if audit["judge"]:
    with LLMClient(snakemake.config["llm"]) as client:
        judge = Judge(load_judge_prompts(inp.prompts[0]), client, params.judge["temperature"])
        try:
            candidates = candidates_with(judge)
        finally:
            manifest.add(llm=client.summary(), judge_failures=dict(judge.failures))
else:
    candidates = candidates_with(None)

contracts.write_frame(candidates, out.candidates)
added = proposed_qrels(candidates)
write_trec_qrels(added, out.trec)
review_table(candidates, query_texts, corpus).to_csv(out.csv, index=False)
hole = hole_before_after(dataset, runs, qrels, added, audit["hole_k"])
contracts.write_frame(hole, out.hole)
summary = summarize(
    dataset,
    candidates,
    pool,
    qrels,
    len(queries),
    hole,
    systems=len(runs),
    depth=audit["depth"],
    k=audit["hole_k"],
)
contracts.write_frame(pd.DataFrame([summary]), out.summary)
manifest.add(settings=audit, systems=params.systems, statistics=summary)
manifest.write()
