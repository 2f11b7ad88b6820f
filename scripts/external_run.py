"""Snakemake script for rule external_run: see irflow.retrieval.external_run."""

from pathlib import Path

from _common import start_job

from irflow.core.fingerprint import file_md5
from irflow.retrieval.external_run import import_run, locate_run, log_report, recorded_settings
from irflow.retrieval.runs import write_run

manifest = start_job(snakemake, "external_run")
inp, out, wildcards, config = (
    snakemake.input,
    snakemake.output,
    snakemake.wildcards,
    snakemake.config,
)
settings = snakemake.params.settings
recorded = recorded_settings(settings)
spec = settings["retriever"]
path = locate_run(
    settings["location"],
    Path(config["download_dir"]) / "runs" / wildcards.system / wildcards.dataset,
    md5=settings["md5"],
    offline=config["offline"],
)
run, report = import_run(
    path,
    Path(inp.corpus),
    Path(inp.queries),
    Path(inp.all_queries),
    run_format=spec["format"],
    top_k=settings["top_k"],
    remove_self_matches=settings["remove_self_matches"],
    max_unknown_fraction=spec["max_unknown_fraction"],
)
log_report(report, recorded["location"])
lineage = {
    "stage": "external_run",
    "system": wildcards.system,
    "dataset": wildcards.dataset,
    "file_md5": file_md5(path),
} | recorded
write_run(run, Path(out.run), lineage, Path(out.trec), tag=wildcards.system)
manifest.add(settings=recorded, file=str(path), file_md5=lineage["file_md5"], **report)
manifest.write()
