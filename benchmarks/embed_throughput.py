"""Embedding throughput: irflow's embed stage vs a bare SentenceTransformer.encode.

Both encode the same documents (title + " " + text) with the same loaded model in this process.
The irflow side includes everything the stage does: reading Parquet, chunking, writing parts
and concatenating them into the final file.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import torch
from _harness import best_of, local_minilm, model_spec, report, write_corpus

from irflow.encoding.embed import embed_file
from irflow.encoding.models import Encoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--model", default=None, help="model folder (default: the MiniLM package)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.model is None:
        args.model = local_minilm()

    spec = model_spec(args.model, 1024)
    encoder = Encoder.load(spec)
    model = encoder.model

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.parquet"
        texts = write_corpus(args.dataset, args.docs, corpus)
        out = Path(tmp) / "embeddings.parquet"
        model.encode(texts[:64], batch_size=64)  # warm-up

        def bare():
            model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)

        def pipeline():
            out.unlink(missing_ok=True)
            embed_file(encoder, corpus, "corpus", out)

        seconds = best_of({"bare": bare, "irflow": pipeline}, args.repeats)
        bare_s, pipeline_s = seconds["bare"], seconds["irflow"]
        assert pq.read_metadata(out).num_rows == len(texts)

    report(
        "embed_throughput",
        {
            "documents": len(texts),
            "device": encoder.device,
            "torch_threads": torch.get_num_threads(),
            "bare_docs_per_s": len(texts) / bare_s,
            "irflow_docs_per_s": len(texts) / pipeline_s,
            "irflow_time_over_bare": pipeline_s / bare_s,
        },
    )


if __name__ == "__main__":
    main()
