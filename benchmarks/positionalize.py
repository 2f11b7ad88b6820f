"""Positionalize: building one SciFact variant vs tokenizing SciFact's corpus once.

Both use the same loaded tokenizer in this process. The bare call tokenizes every document
(title + " " + text) without special tokens. The irflow side builds one (length, position)
variant from scratch: choosing queries and fillers, tokenizing the relevant documents and the
filler streams, cutting at word boundaries and assembling the corpus, queries and qrels tables.
Peak memory is what Python and numpy allocate while each runs (tracemalloc, in a separate
untimed run), and the process's peak resident size at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import tracemalloc
from pathlib import Path

import pandas as pd
from _harness import best_of, local_minilm, report

from irflow.core import contracts
from irflow.data.ingest import ingest
from irflow.data.tokens import encode
from irflow.derived.positionalize import Positionalizer
from irflow.encoding.models import load_tokenizer


def peak_mib(function) -> float:
    tracemalloc.start()
    function()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--position", type=float, default=0.5)
    parser.add_argument("--fillers", choices=["random", "bm25"], default="random")
    parser.add_argument("--tokenizer", default=None, help="folder or id (default: MiniLM)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.tokenizer is None:
        args.tokenizer = local_minilm()
    tokenizer = load_tokenizer({"id": args.tokenizer, "revision": None})

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus_file = next(args.dataset.glob("corpus.jsonl*"))
        ingest(corpus_file, args.dataset / "queries.jsonl", args.dataset / "qrels/test.tsv", tmp)
        corpus, queries, qrels = (
            pd.read_parquet(tmp / f"{name}.parquet") for name in ("corpus", "queries", "qrels")
        )
    texts = contracts.document_texts(corpus["title"].tolist(), corpus["text"].tolist())

    def bare():
        encode(tokenizer, texts)

    def pipeline():
        maker = Positionalizer(corpus, queries, qrels, tokenizer, args.fillers)
        return maker.variant(args.length, args.position)

    seconds = best_of({"bare": bare, "irflow": pipeline}, args.repeats)
    bare_mib, pipeline_mib = peak_mib(bare), peak_mib(pipeline)
    stats = pipeline().stats
    report(
        f"positionalize_{args.fillers}",
        {
            "dataset": args.dataset.name,
            "documents": len(corpus),
            "length": args.length,
            "position": args.position,
            "fillers": args.fillers,
            "queries_kept": stats["queries_kept"],
            "haystacks": stats["haystacks"],
            "bare_seconds": seconds["bare"],
            "irflow_seconds": seconds["irflow"],
            "irflow_time_over_bare": seconds["irflow"] / seconds["bare"],
            "bare_peak_mib": bare_mib,
            "irflow_peak_mib": pipeline_mib,
            "process_max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        },
    )


if __name__ == "__main__":
    main()
