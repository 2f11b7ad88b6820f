"""Snakemake script for rule position: see irflow.analyses.position."""

from pathlib import Path

import pandas as pd
from _common import setup_logging

from irflow.analyses.position import analyse, span_positions
from irflow.analyses.query_types import by_query_type, query_type
from irflow.core import contracts
from irflow.encoding.models import load_tokenizer

setup_logging(snakemake)
inp, out, params = snakemake.input, snakemake.output, snakemake.params
analysis = params.analysis
score_files = iter(inp.scores)  # dataset-major, as the rule lists them
tokenizers = {}  # loaded once per source, shared by the datasets that count with it
rows = []
inputs = zip(params.datasets, inp.qrels, inp.corpus, inp.queries)
for dataset, qrels_path, corpus_path, queries_path in inputs:
    group = params.groups[dataset]
    source = group["tokenizer"]
    key = (source["id"], source["revision"])
    if key not in tokenizers:
        tokenizers[key] = load_tokenizer(source)
    qrels = contracts.read_frame(qrels_path)
    relevant = qrels.loc[qrels["relevance"] > 0, "doc_id"].unique().tolist()
    documents = contracts.read_frame(
        corpus_path, columns=["doc_id", "text"], filters=[("doc_id", "in", relevant)]
    )
    positions = span_positions(qrels, documents, tokenizers[key])
    # Each query's type by PosIR's Table 6 heuristic (irflow.analyses.query_types).
    queries = contracts.read_frame(queries_path, columns=["query_id", "text"])
    types = queries.assign(query_type=queries["text"].map(query_type))[["query_id", "query_type"]]
    if analysis["position"] == "target" and group["position"] is not None:
        positions["relpos"] = group["position"]
    for system in params.systems:
        per_query = contracts.read_frame(next(score_files))
        per_query = per_query[per_query["metric"] == analysis["metric"]]
        # Every scored query: one that no span places still counts in the overall score.
        rows.append(
            per_query.merge(positions, on="query_id", how="left")
            .merge(types, on="query_id", how="left")
            .assign(dataset=group["group"], system=system)
        )

rows = pd.concat(rows, ignore_index=True)
settings = {
    key: analysis[key] for key in ("bins", "bucket_tokens", "buckets", "min_count", "flat_below")
}
position_bins, psi = analyse(
    rows.drop(columns="query_type"), **settings, interval=analysis["bootstrap"]
)
contracts.write_frame(position_bins, Path(out.bins))
contracts.write_frame(psi, Path(out.psi))
contracts.write_frame(
    by_query_type(rows, **settings, interval=analysis["bootstrap"]), Path(out.types)
)
