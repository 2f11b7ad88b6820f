"""Snakemake script for rule expand: see irflow.derived.expand (and irflow.derived.llm for the llm
writer)."""

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import torch
from _common import start_job, write_dataset_record, write_dataset_tables

from irflow.core import contracts
from irflow.core.fingerprint import value_md5
from irflow.derived.expand import SAMPLING, LLMQueryWriter, QueryGenerator, expand_corpus
from irflow.derived.llm.client import LLMClient
from irflow.retrieval.rerank import CrossEncoderScorer

manifest = start_job(snakemake, "expand")
inp, out, settings = snakemake.input, snakemake.output, snakemake.params.settings
spec = settings["expand"]
torch.set_num_threads(snakemake.threads)
base = json.loads(Path(inp.base_source).read_text())
IDENTITY = ("revision", "files_md5")
# What made the corpus goes into its checksum; where it ran (a device, a scorer's batch size,
# the endpoint's address) does not. The seq2seq batch size orders the sampling, so it counts.
made_of, record = [base["checksum"]], {"expand": spec}
scorer, drop_share = None, 0.0
if "filter" in spec:
    scorer = CrossEncoderScorer.load(settings["filter_model"])
    drop_share = spec["filter"]["drop_share"]
    ignored = ("device", "batch_size")
    record["filter_model"] = {
        k: v for k, v in settings["filter_model"].items() if k not in ignored
    } | {k: v for k, v in scorer.provenance.items() if k in IDENTITY}
    manifest.add(filter_model=scorer.provenance)
corpus = contracts.read_frame(inp.corpus)
# Finished batches of a killed seq2seq expansion (not an output: Snakemake keeps it).
parts_dir = Path(out.corpus).with_name(Path(out.corpus).name + ".parts")
if "model" in spec:
    generator = QueryGenerator.load(spec["model"])
    identity = {k: v for k, v in generator.provenance.items() if k in IDENTITY}
    made_of += [{k: v for k, v in spec["model"].items() if k != "device"}, identity, SAMPLING]
    record["model"] = identity
    manifest.add(**generator.provenance)
    generated = generator.generate_file(Path(inp.corpus), parts_dir)
    corpus, stats = expand_corpus(corpus, generator, scorer, drop_share, generated)
else:
    made_of += [spec["llm"], settings["llm"]]
    record["llm"] = settings["llm"]
    with LLMClient(snakemake.config["llm"]) as client:
        try:
            writer = LLMQueryWriter(client, spec["llm"], snakemake.wildcards.dataset)
            corpus, stats = expand_corpus(corpus, writer, scorer, drop_share)
        finally:
            manifest.add(llm=client.summary())
if scorer is not None:
    made_of += [drop_share, record["filter_model"]]
tables = SimpleNamespace(
    corpus=corpus, queries=contracts.read_frame(inp.queries), qrels=contracts.read_frame(inp.qrels)
)
write_dataset_tables(tables, out)
shutil.rmtree(parts_dir, ignore_errors=True)
checksum = value_md5(made_of)
stats = write_dataset_record(snakemake, spec["dataset"], base, checksum, stats, record)
manifest.add(dataset_checksum=checksum, base_checksum=base["checksum"], statistics=stats)
manifest.write()
