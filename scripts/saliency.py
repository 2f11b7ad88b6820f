"""Snakemake script for rule saliency: see irflow.analyses.saliency."""

import logging

import pyarrow as pa
import torch
from _common import setup_logging

from irflow.analyses.saliency import saliency_profile
from irflow.core import contracts
from irflow.encoding.models import Encoder

setup_logging(snakemake)
log = logging.getLogger("irflow.analyses.saliency")
torch.set_num_threads(snakemake.threads)
inp, params = snakemake.input, snakemake.params
spec = snakemake.config["models"][snakemake.wildcards.model]
analysis = params.analysis

encoder = Encoder.load(spec)
# The pairs are the dataset's, selected once for every model (rule saliency_pairs).
pairs = contracts.read_frame(inp.pairs)
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
    "pairs_file": inp.pairs,
    "pairs": pairs[["query_id", "doc_id"]].to_dict("records"),
}
contracts.write_table(
    contracts.with_lineage(pa.Table.from_pandas(table, preserve_index=False), lineage),
    snakemake.output.profile,
)
