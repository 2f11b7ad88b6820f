"""Snakemake script for rules encode_vectors, encode_vectors_queries and encode_vectors_shard:
see irflow.encoding.encode_parts. A job encodes one side (params.side) and, where the rule has query
outputs, the queries too, with the model loaded once; each side has its own manifest. The
family whose vectors go to results/<family>/ loads the model (irflow.workflow.families)."""

from functools import partial

from _common import encode_sides, start_encode_job

from irflow.encoding.encode_parts import encode_file, query_latency
from irflow.workflow.families import by_encoder

manifest, spec, shard = start_encode_job(snakemake, "encode_vectors")
vectors = by_encoder(snakemake.wildcards.family)
model = vectors.load_encoder(spec)


def encode(side: str, prefix: str, texts, vectors_path) -> dict:
    """Encode one side, with the family's own facts (a ColBERT's texts cut to its lengths)."""
    facts = encode_file(model, texts, side, vectors_path, shard)
    return facts | vectors.encode_facts(model, texts, side, shard)


encode_sides(
    snakemake, manifest, "vectors", model.provenance, encode, partial(query_latency, model)
)
