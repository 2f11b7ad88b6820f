"""Encoding throughput of the embed backends: torch, onnx and onnx-int8
(irflow.encoding.onnx_export).

The same documents (title + " " + text) are encoded by each backend's Encoder in this process,
in turns (``_harness.timings``), with the settings the workflow uses (batch 64, normalised,
no prompt). Reported: docs/s of each, the ratio of each ONNX backend's throughput to torch's
(median over rounds of the paired time ratios, and best against best), and the least cosine
similarity between each ONNX backend's vector of a document and torch's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from _harness import local_minilm, median_paired_ratio, model_spec, report, timings

from irflow.core import contracts
from irflow.data.ingest import read_jsonl
from irflow.encoding.models import Encoder

BACKENDS = ("torch", "onnx", "onnx-int8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--model", default=None, help="model folder (default: the MiniLM package)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.model is None:
        args.model = local_minilm()
    torch.set_num_threads(args.threads)  # ONNX Runtime's session takes the same count

    titles, texts = [], []
    fields = {"_id": True, "title": False, "text": True}
    for _, record in read_jsonl(args.dataset / "corpus.jsonl.gz", fields):
        titles.append(record["title"])
        texts.append(record["text"])
        if len(texts) == args.docs:
            break
    documents = contracts.document_texts(titles, texts)

    encoders = {
        backend: Encoder.load(model_spec(args.model, 1024) | {"backend": backend})
        for backend in BACKENDS
    }
    vectors, runs = {}, {}
    for backend, encoder in encoders.items():
        encoder.encode(documents[:64], "")  # warm-up

        def run(encoder=encoder, backend=backend):
            vectors[backend] = encoder.encode(documents, "")

        runs[backend] = run
    times = timings(runs, args.repeats)

    measurements = {
        "documents": len(documents),
        "threads": args.threads,
        "repeats": args.repeats,
    }
    for backend in BACKENDS:
        measurements[f"{backend}_docs_per_s"] = len(documents) / min(times[backend])
    for backend in BACKENDS[1:]:
        # Throughput ratio: torch's time over this backend's.
        measurements[f"{backend}_over_torch_median_paired"] = 1 / median_paired_ratio(
            times, backend, "torch"
        )
        measurements[f"{backend}_over_torch_best"] = min(times["torch"]) / min(times[backend])
        cosine = np.sum(vectors[backend] * vectors["torch"], axis=1)
        measurements[f"{backend}_min_cosine_to_torch"] = float(cosine.min())
        measurements[f"{backend}_mean_cosine_to_torch"] = float(cosine.mean())
    report("embed_backends", measurements)


if __name__ == "__main__":
    main()
