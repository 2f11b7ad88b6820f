"""Snakemake script for rule positionalize: see irflow.derived.positionalize."""

import json
from pathlib import Path

from _common import start_job, write_dataset_record, write_dataset_tables

from irflow.core import contracts
from irflow.core.config import load_schema, schema_defaults
from irflow.data.tokens import tokenizer_fingerprint
from irflow.derived.positionalize import Positionalizer, Screen, variant_checksum
from irflow.encoding.models import load_tokenizer

manifest = start_job(snakemake, "positionalize")
inp, out, params = snakemake.input, snakemake.output, snakemake.params
spec = params.variant
tokenizer = load_tokenizer(params.tokenizer)
tokenizer_record = params.tokenizer | {"sha256": tokenizer_fingerprint(tokenizer)}
base = json.loads(Path(inp.base_source).read_text())
# A screen only where configured, so that the checksums of variants without one stay as they were.
keys = ("length", "position", "fillers", "seed", "screen")
settings = {key: spec[key] for key in keys if key in spec}
checksum = variant_checksum(base["checksum"], settings, tokenizer_record["sha256"])

screen = None
if "screen" in spec:
    from irflow.retrieval.rerank import load_scorer

    # No document vectors to reuse: a bi-encoder's come from the shared vector cache or are
    # encoded.
    scorer = load_scorer(spec["screen"]["spec"], snakemake.config["models"], {})
    screen = Screen(scorer, spec["screen"]["margin"])
# bm25 fillers: the near-misses are ranked by the workflow's default BM25, as the schema gives it.
schema = load_schema(Path(snakemake.scriptdir).parent / "config" / "config.schema.yaml")
bm25 = schema_defaults(schema, "bm25", {"type": "bm25"})
maker = Positionalizer(
    *(contracts.read_frame(inp[name]) for name in ("corpus", "queries", "qrels")),
    tokenizer,
    spec["fillers"],
    spec["seed"],
    screen=screen,
    bm25=bm25,
)
variant = maker.variant(spec["length"], spec["position"])
write_dataset_tables(variant, out)
stats = write_dataset_record(
    snakemake,
    spec["dataset"],
    base,
    checksum,
    variant.stats,
    {"positionalize": spec, "tokenizer": tokenizer_record},
)
manifest.add(
    dataset_checksum=checksum,
    base_checksum=base["checksum"],
    tokenizer=tokenizer_record,
    statistics=stats,
    **({"screen": scorer.provenance} if screen else {}),
    **({"near_miss_bm25": bm25} if spec["fillers"] == "bm25" else {}),
)
manifest.write()
