"""What ColBERT token vectors cost for a corpus, on disk (the Parquet irflow caches) and in
memory (the array exhaustive MaxSim search holds): one 128-dimension float32 vector per token
of each document, up to ColBERTv2's document length (180 tokens, PyLate's default).

The vectors come from a tiny random model (tests/tiny_models.py) on MiniLM's tokenizer, which
is ColBERTv2's (bert-base-uncased WordPiece): the token counts and sizes are a real ColBERTv2's,
except that ColBERTv2 also drops punctuation tokens from documents, so it stores a few percent
fewer. Random vectors compress about as badly as trained ones.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from _harness import local_minilm, model_spec, report, write_corpus

from irflow.encoding.encode_parts import encode_file
from irflow.retrieval.late_interaction import TokenEncoder, TokenVectors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tiny_models import build_tiny_colbert


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--document-length", type=int, default=180)
    parser.add_argument("--docs", type=int, default=None, help="the first N documents (all)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = tmp / "corpus.parquet"
        write_corpus(args.dataset, args.docs, corpus)
        folder = build_tiny_colbert(tmp / "colbert", local_minilm())
        spec = model_spec(str(folder), 1024, device="cpu") | {
            "max_seq_length": args.document_length
        }
        out = tmp / "tokens.parquet"
        encode_file(TokenEncoder.load(spec), corpus, "corpus", out)
        vectors = TokenVectors.read(out)
        report(
            "late_interaction_size",
            {
                "dataset": args.dataset.name,
                "documents": len(vectors),
                "document_length": args.document_length,
                "tokens": len(vectors.flat),
                "tokens_per_document": len(vectors.flat) / len(vectors),
                "dim": vectors.flat.shape[1],
                "disk_mb": out.stat().st_size / 1e6,
                "memory_mb": vectors.nbytes / 1e6,
            },
        )


if __name__ == "__main__":
    main()
