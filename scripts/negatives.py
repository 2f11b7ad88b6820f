"""Snakemake script for rule negatives: see irflow.derived.negatives."""

import logging
from pathlib import Path

from _common import start_job

from irflow.core import contracts
from irflow.derived.negatives import SEARCHER_FILES, PositiveScores, Teacher, run_negatives
from irflow.retrieval.runs import SearchRequest
from irflow.workflow.families import family
from irflow.workflow.families.base import named_paths

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
queries = contracts.read_table(inp.queries)
if "run" in inp.keys():  # the scored split: the system's run, and its stored scores
    vectors = {
        key.removeprefix("vectors_"): Path(inp[key])
        for key in inp.keys()
        if key.startswith("vectors_")
    }
    stored = {"bm25_index": Path(inp.bm25_index)} if "bm25_index" in inp.keys() else vectors
    scorer = PositiveScores.of(params.retriever, queries, stored)
    teacher = Teacher(contracts.read_table(inp.run), contracts.read_table(inp.qrels), scorer)
else:  # another split: the system's searcher retrieves its judged queries
    retrieval = params.retrieval
    files = {
        name.removeprefix(SEARCHER_FILES): path
        for name, path in named_paths(inp).items()
        if name.startswith(SEARCHER_FILES)
    }
    searcher = family(retrieval["retriever"]["type"]).open_searcher(
        files, retrieval, snakemake.threads, models=snakemake.config["models"]
    )
    request = SearchRequest.of(retrieval)
    teacher = Teacher.searching(queries, inp.source, settings["split"], searcher, request)
outputs = (Path(out.parquet), Path(out.jsonl))
counts = run_negatives(queries, Path(inp.corpus), settings, teacher, outputs)
if counts["positives_not_scored"]:
    warnings.append(
        f"{counts['positives_not_scored']} positives are not in {settings['system']!r}'s run "
        "and the system cannot score them: "
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
