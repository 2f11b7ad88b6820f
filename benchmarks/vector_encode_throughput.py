"""Sparse (SPLADE) and late-interaction (ColBERT) encoding throughput: irflow's encode stage
(irflow.encoding.encode_parts) against the bare sentence-transformers call on the same loaded model.

No SPLADE or ColBERT weights can be downloaded here, so both models are built locally
(tests/tiny_models.py) on MiniLM's tokenizer: by default tiny, with random weights, where the
ratio is mostly irflow's fixed overhead (Parquet in and out, chunked parts, the sparse or token
layout, the duplicate-id check), largest against so fast a model; with ``--backbone minilm``,
MiniLM's six trained layers under the family's random head, a model of realistic cost, where
the encoding dominates and the ratio moves towards 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import torch
from _harness import best_of, local_minilm, model_spec, report, write_corpus

from irflow.encoding.encode_parts import encode_file
from irflow.retrieval.late_interaction import TokenEncoder
from irflow.retrieval.sparse import SparseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tiny_models import build_tiny_colbert, build_tiny_splade

BACKBONES = {
    "tiny": "tiny random (2 layers, hidden 32)",
    "minilm": "MiniLM-L6 layers (6, hidden 384), random head",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--backbone",
        choices=["tiny", "minilm"],
        default="tiny",
        help="a random two-layer BERT, or MiniLM's six trained layers under random heads",
    )
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = tmp / "corpus.parquet"
        texts = write_corpus(args.dataset, args.docs, corpus)
        weights = local_minilm() if args.backbone == "minilm" else None
        splade = build_tiny_splade(tmp / "splade", local_minilm(), weights)
        colbert = build_tiny_colbert(tmp / "colbert", local_minilm(), weights)
        for name, family, folder in (
            ("sparse", SparseModel, splade),
            ("late_interaction", TokenEncoder, colbert),
        ):
            measure(
                name,
                family.load(model_spec(str(folder), 256, device="cpu")),
                corpus,
                texts,
                args.repeats,
                BACKBONES[args.backbone],
            )


def measure(name: str, model, corpus: Path, texts: list[str], repeats: int, backbone: str) -> None:
    """irflow's encode_file against the bare encode_document call on the same loaded model."""
    out = corpus.with_name(f"{name}.parquet")
    model.model.max_seq_length = 256
    options = (
        {"convert_to_sparse_tensor": True}
        if isinstance(model, SparseModel)
        else {"convert_to_numpy": True}
    )
    model.encode(texts[:64], "corpus")  # warm-up

    def bare():
        model.model.encode_document(texts, batch_size=model.spec.batch_size, **options)

    def pipeline():
        out.unlink(missing_ok=True)
        encode_file(model, corpus, "corpus", out)

    seconds = best_of({"bare": bare, "irflow": pipeline}, repeats)
    assert pq.read_metadata(out).num_rows == len(texts)
    report(
        f"{name}_encode_throughput",
        {
            "documents": len(texts),
            "model": f"{backbone}, MiniLM tokenizer, 256 tokens",
            "torch_threads": torch.get_num_threads(),
            "bare_docs_per_s": len(texts) / seconds["bare"],
            "irflow_docs_per_s": len(texts) / seconds["irflow"],
            "irflow_time_over_bare": seconds["irflow"] / seconds["bare"],
        },
    )


if __name__ == "__main__":
    main()
