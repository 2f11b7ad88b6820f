"""Snakemake script for rule passages: see irflow.data.passages."""

from pathlib import Path

from _common import start_job

from irflow.data.passages import model_window, split_corpus
from irflow.data.tokens import tokenizer_fingerprint
from irflow.encoding.models import load_tokenizer

manifest = start_job(snakemake, "passages")
params = snakemake.params
tokenizer = load_tokenizer(params.tokenizer)
stats = split_corpus(
    Path(snakemake.input.corpus),
    tokenizer,
    params.long_documents,
    Path(snakemake.output.passages),
    prompt=params.prompt,
    window=model_window(params.tokenizer["id"], params.max_seq_length, tokenizer),
)
manifest.add(
    settings=params.long_documents,
    tokenizer=params.tokenizer | {"sha256": tokenizer_fingerprint(tokenizer)},
    **stats,
)
manifest.write()
