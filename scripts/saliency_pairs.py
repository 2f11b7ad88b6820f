"""Snakemake script for rule saliency_pairs: see irflow.analyses.saliency (sample_pairs)."""

import logging

import pyarrow as pa
from _common import setup_logging

from irflow.analyses.saliency import sample_pairs
from irflow.core import contracts

setup_logging(snakemake)
log = logging.getLogger("irflow.analyses.saliency")
inp, params = snakemake.input, snakemake.params
dataset = snakemake.wildcards.dataset
selection = params.selection

tokenizer, tokenizer_record = None, None
if params.tokenizer:  # PosIR's selection counts the documents' tokens with this one tokenizer
    from irflow.data.tokens import tokenizer_fingerprint
    from irflow.encoding.models import load_tokenizer

    tokenizer = load_tokenizer(params.tokenizer)
    tokenizer_record = params.tokenizer | {"sha256": tokenizer_fingerprint(tokenizer)}
pairs = sample_pairs(
    contracts.read_frame(inp.queries),
    contracts.read_frame(inp.corpus),
    contracts.read_frame(inp.qrels),
    count=selection["queries"],
    seed=selection["seed"],
    select=selection["select"],
    tokenizer=tokenizer,
    min_tokens=selection["min_tokens"],
    centre=tuple(selection["centre"]),
    dataset=dataset,
)
log.info("%s: %d pairs selected (%s)", dataset, len(pairs), selection["select"])
if selection["queries"] is not None and len(pairs) < selection["queries"]:
    log.warning("%s: only %d pairs qualify; using all of them", dataset, len(pairs))
# How the pairs were chosen, in the file's metadata: every model's profile reads these.
lineage = {"dataset": dataset, "selection": selection, "tokenizer": tokenizer_record}
contracts.write_table(
    contracts.with_lineage(pa.Table.from_pandas(pairs, preserve_index=False), lineage),
    snakemake.output.pairs,
)
