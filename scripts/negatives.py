"""Snakemake script for rule negatives: see irflow.derived.negatives."""

import logging
from pathlib import Path

from _common import start_job

from irflow.derived.negatives import run_negatives

manifest = start_job(snakemake, "negatives")
inp, out, params = snakemake.input, snakemake.output, snakemake.params
settings, log = params.settings, logging.getLogger("irflow.derived.negatives")
warnings = []
if settings["split"] in ("test", params.scored_split):
    warnings.append(
        f"mining split {settings['split']!r}, which is evaluated: these training triples are "
        "test queries, and a model trained on them cannot be scored on this dataset"
    )
if params.curated_copies:
    warnings.append(
        f"mining {settings['dataset']!r}, which has curated copies "
        f"({', '.join(params.curated_copies)}): name one of them to mine the curated corpus"
    )
for warning in warnings:
    log.warning("%s", warning)
if "run" in inp.keys():
    vectors = {
        key.removeprefix("vectors_"): Path(inp[key])
        for key in inp.keys()
        if key.startswith("vectors_")
    }
    sources = {
        "run": Path(inp.run),
        "qrels": Path(inp.qrels),
        "retriever": params.retriever,
        "vectors": vectors or None,
    }
else:
    sources = {"source": Path(inp.source), "retrieval": params.retrieval}
if "bm25_index" in inp.keys():
    sources["bm25_index"] = Path(inp.bm25_index)
counts = run_negatives(
    Path(inp.queries), Path(inp.corpus), settings, Path(out.parquet), Path(out.jsonl), **sources
)
if counts["positives_not_scored"]:
    warnings.append(
        f"{counts['positives_not_scored']} positives are not in {settings['system']!r}'s run "
        "and a system that is not a bm25 or dense retriever cannot score them: "
        + (
            "they yield no triple under relative_to_positive"
            if settings["false_negative_filter"]["method"] == "relative_to_positive"
            else "their triples have no positive_score"
        )
    )
    log.warning("%s", warnings[-1])
log.info("%s", counts)
manifest.add(**counts, settings=settings, warnings=warnings)
manifest.write()
