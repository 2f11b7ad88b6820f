"""Snakemake script for rule onnx_export: see irflow.encoding.onnx_export."""

from pathlib import Path

import torch
from _common import start_job

from irflow.encoding.models import load_sentence_transformer
from irflow.encoding.onnx_export import export, export_key

manifest = start_job(snakemake, "onnx_export")
torch.set_num_threads(snakemake.threads)
spec = snakemake.config["models"][snakemake.wildcards.model]
model, provenance = load_sentence_transformer(spec)
key = export_key(spec, provenance)
manifest.add(settings=spec, **provenance)
manifest.add(**export(model, Path(snakemake.output.graph), spec["backend"], key))
manifest.write()
