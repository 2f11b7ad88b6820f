"""Shared set-up for the thin Snakemake scripts: logging and the job's manifest."""

import json
import logging
import sys
from pathlib import Path

from irflow.core import contracts
from irflow.core.errors import UserError
from irflow.core.manifest import Manifest
from irflow.core.offline import go_offline
from irflow.workflow.stamps import stamp_path, text_md5

log = logging.getLogger("irflow")


def _log_uncaught(kind, error, traceback) -> None:
    """Report a job's fatal error through logging, so it reaches the rule's log as well as
    stderr: a user error as its one-line message, anything else with its traceback."""
    if isinstance(error, UserError):
        log.error("%s", error)
    else:
        log.critical("unexpected error", exc_info=(kind, error, traceback))


def setup_logging(snakemake) -> None:
    """Send logging, Python warnings and an uncaught error to stderr and the rule's log; and,
    with ``offline: true``, keep the job off the network for models and tokenizers too."""
    if getattr(snakemake, "config", {}).get("offline"):  # tests stand in without a config
        go_offline()
    handlers = [logging.StreamHandler(sys.stderr)]
    if snakemake.log:
        handlers.append(logging.FileHandler(snakemake.log[0], mode="w"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        handlers=handlers,
        force=True,
    )
    logging.captureWarnings(True)
    # The interpreter still exits with status 1 after the hook, so Snakemake sees the failure.
    sys.excepthook = _log_uncaught


def start_job(snakemake, stage: str) -> Manifest:
    """Set up logging and open the job's manifest with its wildcards and, when the rule reads
    the dataset's source.json, the dataset checksum; and the md5 of its settings stamp, which
    planning compares with the stamp (irflow.workflow.stamps)."""
    setup_logging(snakemake)
    facts = {"stage": stage, **dict(snakemake.wildcards.items())}
    if hasattr(snakemake.input, "source"):
        facts["dataset_checksum"] = json.loads(Path(snakemake.input.source).read_text())["checksum"]
    stamp = stamp_path(snakemake.rule, snakemake.wildcards)
    if stamp.is_file():
        facts["settings_md5"] = text_md5(stamp.read_text(encoding="utf-8"))
    return Manifest(snakemake.output.manifest, **facts)


def start_encode_job(snakemake, stage: str) -> tuple[Manifest, dict, tuple[int, int]]:
    """Start an encoding job (``stage``, or ``<stage>_shard`` for a shard) on the rule's threads:
    its manifest, its model's ``models`` entry and its shard (index, count)."""
    import torch

    wildcards = snakemake.wildcards
    sharded = "shard" in wildcards.keys()
    manifest = start_job(snakemake, f"{stage}_shard" if sharded else stage)
    torch.set_num_threads(snakemake.threads)
    shard = (int(wildcards.shard), int(wildcards.shards)) if sharded else (0, 1)
    return manifest, snakemake.config["models"][wildcards.model], shard


def encode_sides(snakemake, manifest: Manifest, output: str, provenance: dict, encode, latency):
    """Encode the job's side (params.side) and, where the rule has ``query_<output>``, the
    queries too, each side with its own manifest. ``encode(side, prefix, texts, target)``
    encodes the texts input ``<prefix>texts`` into ``target`` and returns its facts;
    ``latency(texts, count)`` times the first queries one at a time."""
    inp, out = snakemake.input, snakemake.output
    spec = snakemake.config["models"][snakemake.wildcards.model]
    facts = dict(manifest.facts)
    sides = [(snakemake.params.side, "")]
    if f"query_{output}" in out.keys():
        sides.append(("queries", "query_"))
    for side, prefix in sides:
        if prefix:  # the second side's manifest times that side only
            manifest = Manifest(getattr(out, f"{prefix}manifest"), **facts)
        manifest.add(side=side, settings=spec, **provenance)
        texts = Path(getattr(inp, f"{prefix}texts"))
        manifest.add(**encode(side, prefix, texts, Path(getattr(out, f"{prefix}{output}"))))
        if side == "queries" and snakemake.params.latency_queries:
            manifest.add(latency=latency(texts, snakemake.params.latency_queries))
        manifest.write()


def write_dataset_tables(tables, out) -> None:
    """The corpus, queries and qrels of ``tables`` (attributes of those names) as the
    contracts' Parquet files at the rule's outputs of the same names."""
    for name, schema in (
        ("corpus", contracts.CORPUS),
        ("queries", contracts.QUERIES),
        ("qrels", contracts.QRELS),
    ):
        contracts.write_frame(getattr(tables, name), Path(out[name]), schema)


def write_dataset_record(
    snakemake, base_name: str, base: dict, checksum: str, stats: dict, provenance: dict
) -> dict:
    """stats.json and source.json of a dataset made from dataset ``base_name`` (whose
    source.json is ``base``): a variant, a generated or a checked benchmark. Downstream jobs
    read only the checksum; ``provenance`` says how the dataset was made. Returns the stats."""
    out = snakemake.output
    stats = stats | {"base_dataset": base_name, "dataset_checksum": checksum}
    Path(out.stats).write_text(json.dumps(stats, indent=2) + "\n")
    source = {
        "dataset": snakemake.wildcards.dataset,
        "base_dataset": base_name,
        "split": base["split"],
        "checksum": checksum,
        "base_checksum": base["checksum"],
    } | provenance
    Path(out.source).write_text(json.dumps(source, indent=2) + "\n")
    return stats


def input_paths(inputs) -> dict[str, Path]:
    """A job's named inputs that are one file or folder each, by name: what a retriever
    family's searcher opens, without Snakemake's input object."""
    return {name: Path(value) for name, value in inputs.items() if isinstance(value, str)}


def finish_retrieval(snakemake, manifest: Manifest, run, timing: dict) -> None:
    """Log a first-stage run's timing and short queries, write the run (Parquet and TREC)
    with its lineage, and the job's manifest."""
    from irflow.retrieval.runs import report_short_queries, write_run

    wildcards, settings = snakemake.wildcards, snakemake.params.settings
    retrieve_log = logging.getLogger("irflow.retrieval.retrieve")
    retrieve_log.info(
        "%s on %s: %d queries in %.2f s",
        wildcards.system,
        wildcards.dataset,
        timing["queries"],
        timing["search_seconds"],
    )
    report_short_queries(timing, settings["top_k"])
    lineage = {"stage": "retrieve", "system": wildcards.system, "dataset": wildcards.dataset}
    out = snakemake.output
    write_run(run, Path(out.run), lineage | settings, Path(out.trec), tag=wildcards.system)
    manifest.add(settings=settings, device="cpu", rows=len(run), **timing)
    manifest.write()


def bi_encoder_vectors(inputs) -> dict[str, Path | None]:
    """The ``embeddings``, ``query_embeddings`` and ``query_manifest`` a bi-encoder reranker's
    job may take as input (irflow.workflow.run_inputs.Plan.reranker_embeddings), as
    irflow.retrieval.rerank.load_scorer's arguments."""
    names = ("embeddings", "query_embeddings", "query_manifest")
    return {name: Path(getattr(inputs, name)) if hasattr(inputs, name) else None for name in names}
