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
# Each dataset's pairs, selected once for every model (rule saliency_pairs).
pairs = {dataset: contracts.read_frame(path) for dataset, path in zip(params.datasets, inp.pairs)}
table = saliency_profile(
    encoder.model,
    {dataset: list(zip(chosen["query"], chosen["document"])) for dataset, chosen in pairs.items()},
    name=snakemake.wildcards.model,
    bins=analysis["bins"],
    query_prompt=spec["query_prompt"],
    document_prompt=spec["document_prompt"],
    resample=analysis["resample"],
)
for row in table[table["point"] == 0].itertuples():
    log.info(
        "%s: %d pairs, %d documents longer than the %d-token window (%d tokens cut)",
        row.dataset,
        row.pairs,
        row.truncated_pairs,
        encoder.provenance["max_seq_length"],
        row.cut_tokens,
    )
# Which pairs and which exact model made the profile, in the file's metadata.
lineage = encoder.provenance | {
    "datasets": params.datasets,
    "pairs_files": list(inp.pairs),
    "pairs": [
        {"dataset": dataset} | pair
        for dataset, chosen in pairs.items()
        for pair in chosen[["query_id", "doc_id"]].to_dict("records")
    ],
}
contracts.write_table(
    contracts.with_lineage(pa.Table.from_pandas(table, preserve_index=False), lineage),
    snakemake.output.profile,
)
