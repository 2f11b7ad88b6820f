"""Snakemake script for rules embed, embed_passages, embed_queries and embed_shard: see
irflow.encoding.embed. A job embeds one side (params.side) and, where the rule has query outputs,
the queries too, with the model loaded once; each side has its own manifest."""

from functools import partial
from pathlib import Path

from _common import encode_sides, start_encode_job

from irflow.encoding.embed import Reuse, embed_file, query_latency
from irflow.encoding.models import Encoder
from irflow.encoding.vector_store import stored_or_made

inp = snakemake.input
manifest, spec, shard = start_encode_job(snakemake, "embed")
# The exported graph, for a model with an ONNX backend (rules/onnx_export.smk).
encoder = Encoder.load(spec, Path(inp.onnx) if inp.get("onnx") else None)


def embed_side(side: str, prefix: str, texts: Path, embeddings: Path) -> dict:
    reuse = (
        Reuse(
            Path(getattr(inp, f"reuse_{prefix}texts")),
            Path(getattr(inp, f"reuse_{prefix}embeddings")),
            side,
        )
        if f"reuse_{prefix}embeddings" in inp.keys()
        else None
    )
    made = partial(embed_file, encoder, texts, side, embeddings, reuse, shard)
    if shard[1] > 1:  # a shard's file is temporary: the gathered one would be stored
        return made()
    config = snakemake.config["vector_store"]
    return stored_or_made(config, encoder.spec, encoder.provenance, texts, side, embeddings, made)


encode_sides(
    snakemake,
    manifest,
    "embeddings",
    encoder.provenance,
    embed_side,
    partial(query_latency, encoder),
)
