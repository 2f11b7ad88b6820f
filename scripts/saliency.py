"""Snakemake script for rule saliency: see irflow.analyses.saliency."""

import logging

import pandas as pd
import pyarrow as pa
import torch
from _common import setup_logging

from irflow.analyses.saliency import saliency_profile, sample_pairs
from irflow.core import contracts
from irflow.encoding.models import Encoder

setup_logging(snakemake)
log = logging.getLogger("irflow.analyses.saliency")
torch.set_num_threads(snakemake.threads)
inp, params = snakemake.input, snakemake.params
spec = snakemake.config["models"][snakemake.wildcards.model]
analysis = params.analysis

encoder = Encoder.load(spec)
pairs = sample_pairs(
    pd.read_parquet(inp.queries),
    pd.read_parquet(inp.corpus),
    pd.read_parquet(inp.qrels),
    count=analysis["queries"],
    seed=analysis["seed"],
    select=analysis["select"],
    tokenizer=encoder.model.tokenizer,
    min_tokens=analysis["min_tokens"],
    centre=tuple(analysis["centre"]),
    dataset=params.dataset,
)
log.info("%s: %d pairs selected (%s)", params.dataset, len(pairs), analysis["select"])
if analysis["queries"] is not None and len(pairs) < analysis["queries"]:
    log.warning("%s: only %d pairs qualify; using all of them", params.dataset, len(pairs))
table = saliency_profile(
    encoder.model,
    list(zip(pairs["query"], pairs["document"])),
    name=snakemake.wildcards.model,
    bins=analysis["bins"],
    query_prompt=spec["query_prompt"],
    document_prompt=spec["document_prompt"],
    resample=analysis["resample"],
)
log.info(
    "%d pairs, %d documents longer than the %d-token window (%d tokens cut)",
    len(pairs),
    table["truncated_pairs"].iloc[0],
    encoder.provenance["max_seq_length"],
    table["cut_tokens"].iloc[0],
)
# Which pairs and which exact model made the profile, in the file's metadata.
lineage = encoder.provenance | {
    "dataset": params.dataset,
    "pairs": pairs[["query_id", "doc_id"]].to_dict("records"),
}
contracts.write_table(
    contracts.with_lineage(pa.Table.from_pandas(table, preserve_index=False), lineage),
    snakemake.output.profile,
)
