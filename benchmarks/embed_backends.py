"""Encoding throughput of irflow's ONNX backends (irflow.encoding.onnx_export) against bare
sentence-transformers.

The baseline is the library itself, ``SentenceTransformer(model, device="cpu").encode`` with
batch 64 and normalised vectors, not irflow's torch path, so that a slow irflow path cannot
inflate the ratios. Each ONNX backend runs in irflow's ``Encoder`` (its graph exported in this
process) with the same settings. With ``--fastembed``, Qdrant's fastembed encodes the same
documents too: its ``TextEmbedding`` for all-MiniLM-L6-v2 loaded offline from a folder holding
irflow's float32 graph (backend onnx; fastembed's own Qdrant/all-MiniLM-L6-v2-onnx, a float32
export as well, cannot be downloaded here) and the model's tokenizer, cut at the model's
max_seq_length as sentence-transformers cuts.

All run in this process in turns (``_harness.timings``: a change in machine load falls on all
alike). Reported: docs/s of each, each one's throughput over bare sentence-transformers' (the
median over rounds of the paired ratios, and best against best), the least cosine similarity
between its vector of a document and bare sentence-transformers', the load average, and the
command.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from _harness import local_minilm, median_paired_ratio, model_spec, report, timings

from irflow.core import contracts
from irflow.data.rows import read_jsonl
from irflow.encoding.models import Encoder, load_sentence_transformer
from irflow.encoding.onnx_export import ONNX_BACKENDS, export, export_key

BATCH = 64
BASELINE = "sentence-transformers"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def first_documents(dataset: Path, count: int) -> list[str]:
    titles, texts = [], []
    fields = {"_id": True, "title": False, "text": True}
    for _, record in read_jsonl(dataset / "corpus.jsonl.gz", fields):
        titles.append(record["title"])
        texts.append(record["text"])
        if len(texts) == count:
            break
    return contracts.document_texts(titles, texts)


def fastembed_encoder(model_folder: str, folder: Path, threads: int):
    """fastembed's all-MiniLM-L6-v2 on irflow's float32 graph and the model's tokenizer."""
    from fastembed import TextEmbedding

    spec = model_spec(model_folder, 1024) | {"backend": "onnx"}
    model, provenance = load_sentence_transformer(spec)
    export(model, folder / "model.onnx", "onnx", export_key(spec, provenance))
    for name in TOKENIZER_FILES:
        if (Path(model_folder) / name).exists():
            shutil.copy(Path(model_folder) / name, folder / name)
    # fastembed cuts at the tokenizer's model_max_length; sentence-transformers at the
    # model's max_seq_length (256 for MiniLM): the same cut for both.
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["model_max_length"] = model.max_seq_length
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    embedding = TextEmbedding(
        "sentence-transformers/all-MiniLM-L6-v2", specific_model_path=str(folder), threads=threads
    )
    return lambda documents: np.stack(list(embedding.embed(documents, batch_size=BATCH)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--model", default=None, help="model folder (default: the MiniLM package)")
    parser.add_argument("--backends", nargs="+", choices=ONNX_BACKENDS, default=ONNX_BACKENDS)
    parser.add_argument("--fastembed", action="store_true", help="also time fastembed")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.model is None:
        args.model = local_minilm()
    torch.set_num_threads(args.threads)  # ONNX Runtime's sessions take the same count
    documents = first_documents(args.dataset, args.docs)

    from sentence_transformers import SentenceTransformer

    bare = SentenceTransformer(args.model, device="cpu")
    encoders = {
        BASELINE: lambda texts: bare.encode(
            texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False
        )
    }
    for backend in args.backends:
        encoder = Encoder.load(model_spec(args.model, 1024) | {"backend": backend})
        encoders[backend] = lambda texts, encoder=encoder: encoder.encode(texts, "")
    scratch = tempfile.TemporaryDirectory(prefix="fastembed-")
    if args.fastembed:
        encoders["fastembed"] = fastembed_encoder(args.model, Path(scratch.name), args.threads)

    vectors = {}
    for encode in encoders.values():
        encode(documents[:BATCH])  # warm-up
    runs = {
        name: lambda name=name, encode=encode: vectors.__setitem__(name, encode(documents))
        for name, encode in encoders.items()
    }
    load_before = os.getloadavg()
    times = timings(runs, args.repeats)
    measurements = {
        "documents": len(documents),
        "threads": args.threads,
        "repeats": args.repeats,
        "load_average_1min_before": load_before[0],
        "load_average_1min_after": os.getloadavg()[0],
    }
    for name in encoders:
        measurements[f"{name}_docs_per_s"] = len(documents) / min(times[name])
    for name in list(encoders)[1:]:
        # Throughput ratio: the baseline's time over this one's.
        measurements[f"{name}_over_bare_median_paired"] = 1 / median_paired_ratio(
            times, name, BASELINE
        )
        measurements[f"{name}_over_bare_best"] = min(times[BASELINE]) / min(times[name])
        cosine = np.sum(vectors[name] * vectors[BASELINE], axis=1)
        measurements[f"{name}_min_cosine_to_bare"] = float(cosine.min())
    measurements["command"] = " ".join(["python", *sys.argv])
    scratch.cleanup()
    report("embed_backends", measurements)


if __name__ == "__main__":
    main()
