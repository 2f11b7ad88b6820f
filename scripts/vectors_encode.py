"""Snakemake script for rules encode_vectors, encode_vectors_queries and encode_vectors_shard:
see irflow.encoding.encode_parts. A job encodes one side (params.side) and, where the rule has query
outputs, the queries too, with the model loaded once; each side has its own manifest."""

from functools import partial

from _common import encode_sides, start_encode_job

from irflow.encoding.encode_parts import encode_file, query_latency
from irflow.retrieval.late_interaction import TokenEncoder
from irflow.retrieval.sparse import SparseModel

manifest, spec, shard = start_encode_job(snakemake, "encode_vectors")
model = (SparseModel if snakemake.wildcards.family == "sparse" else TokenEncoder).load(spec)


def encode(side: str, prefix: str, texts, vectors) -> dict:
    """Encode one side; a ColBERT's manifest also counts the texts cut to its lengths."""
    facts = encode_file(model, texts, side, vectors, shard)
    if isinstance(model, TokenEncoder):
        facts |= model.truncation(texts, side, shard)
    return facts


encode_sides(
    snakemake, manifest, "vectors", model.provenance, encode, partial(query_latency, model)
)
