"""Snakemake script for rule unigrams: a corpus's unigram counts for corpus similarity."""

import pyarrow as pa
from _common import setup_logging

from irflow.analyses.correlate import similarity_stopwords, unigram_counts
from irflow.core import contracts

setup_logging(snakemake)
corpus = contracts.ParquetFile(snakemake.input.corpus)
texts = (
    text
    for batch in corpus.iter_batches(50_000, columns=["title", "text"])
    for text in contracts.document_texts(
        batch.column("title").to_pylist(), batch.column("text").to_pylist()
    )
)
counts = unigram_counts(texts, similarity_stopwords(snakemake.params.words))
table = pa.table({"token": list(counts), "count": list(counts.values())})
contracts.write_table(table, snakemake.output[0])
