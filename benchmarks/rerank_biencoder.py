"""Bi-encoder reranking: irflow's rerank (cold and warm vector cache) vs a bare
sentence-transformers encode of each distinct candidate once.

SciFact queries with their top ``--depth`` BM25 (bm25s) candidates are reranked with
all-MiniLM-L6-v2. irflow cold: an empty vector cache, so every distinct candidate is encoded
and written to it; irflow warm: a second job reading the same cache. Bare: one
``SentenceTransformer.encode`` of the distinct candidate texts, the queries encoded one at a
time, and a dot product per query. Model loading is outside every timing. Before the fix, each
query re-encoded its own candidates: ``candidate_rows`` encodes instead of ``distinct_documents``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import bm25s
import numpy as np
import pandas as pd
import torch
from _harness import local_minilm, model_spec, report, timings

from irflow.core import contracts
from irflow.data.ingest import read_jsonl
from irflow.encoding.models import Encoder
from irflow.retrieval.rerank import rerank
from irflow.retrieval.scorers import BiEncoderScorer, VectorCache


def bm25_candidates(
    dataset: Path, queries: int, depth: int
) -> tuple[pd.DataFrame, dict[str, str], dict[str, str]]:
    """(first-stage run, query id -> text, doc id -> title + text) for the first ``queries``
    test queries."""
    corpus = [
        record
        for _, record in read_jsonl(
            dataset / "corpus.jsonl.gz", {"_id": True, "title": False, "text": True}
        )
    ]
    doc_ids = [record["_id"] for record in corpus]
    texts = contracts.document_texts([r["title"] for r in corpus], [r["text"] for r in corpus])
    tested = set(pd.read_csv(dataset / "qrels" / "test.tsv", sep="\t", dtype=str)["query-id"])
    with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        asked = [q for q in map(json.loads, lines) if q["_id"] in tested][:queries]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    rows, scores = retriever.retrieve(
        bm25s.tokenize([q["text"] for q in asked], stopwords="en", show_progress=False),
        k=min(depth, len(texts)),
        show_progress=False,
    )
    run = pd.DataFrame(
        {
            "query_id": np.repeat([q["_id"] for q in asked], rows.shape[1]),
            "doc_id": np.asarray(doc_ids)[rows.ravel()],
            "score": scores.ravel().astype(np.float64),
        }
    )
    return run, {q["_id"]: q["text"] for q in asked}, dict(zip(doc_ids, texts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--queries", type=int, default=10)
    # 10 x 100 keeps a run within minutes on 2 shared cores; QC reranks 1000 per query.
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--model", default=None, help="model folder (default: the MiniLM package)")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run, queries, documents = bm25_candidates(args.dataset, args.queries, args.depth)
    spec = model_spec(args.model or local_minilm(), 4096)
    encoder = Encoder.load(spec)
    model = encoder.model
    distinct = list(dict.fromkeys(documents[doc_id] for doc_id in run["doc_id"]))
    model.encode(distinct[:64], batch_size=64)  # warm-up
    outcome = {}

    def bare():
        vectors = model.encode(distinct, batch_size=64, normalize_embeddings=True)
        row = {text: i for i, text in enumerate(distinct)}
        outcome["bare"] = {
            query_id: vectors[[row[documents[d]] for d in rows["doc_id"]]]
            @ model.encode(queries[query_id], normalize_embeddings=True)
            for query_id, rows in run.groupby("query_id")
        }

    with tempfile.TemporaryDirectory() as tmp:
        caches = iter(range(args.repeats))

        def irflow_cold():
            # A fresh cache folder each round: nothing cached yet.
            cache = VectorCache(Path(tmp) / str(next(caches)), encoder)
            outcome["cold"] = BiEncoderScorer(encoder, cache=cache)
            outcome["run"], _ = rerank(run, queries, documents, outcome["cold"], args.depth)

        def irflow_warm():
            cache = VectorCache(Path(tmp) / "0", encoder)
            outcome["warm"] = BiEncoderScorer(encoder, cache=cache)
            rerank(run, queries, documents, outcome["warm"], args.depth)

        times = timings({"bare": bare, "irflow_cold": irflow_cold}, args.repeats)
        times |= timings({"irflow_warm": irflow_warm}, args.repeats)

    # Same scores as the bare computation, up to float noise.
    for query_id, rows in outcome["run"].groupby("query_id"):
        ordered = run[run["query_id"] == query_id].set_index("doc_id")
        position = {doc_id: i for i, doc_id in enumerate(ordered.index)}
        bare_scores = outcome["bare"][query_id][[position[d] for d in rows["doc_id"]]]
        np.testing.assert_allclose(rows["score"], bare_scores, atol=1e-5)
    best = {name: min(seconds) for name, seconds in times.items()}
    cold, warm = outcome["cold"].provenance, outcome["warm"].provenance
    report(
        "rerank_biencoder",
        {
            "queries": len(queries),
            "candidate_rows": len(run),
            "distinct_documents": len(distinct),
            "device": encoder.device,
            "torch_threads": torch.get_num_threads(),
            "cold_documents_encoded": cold["documents_encoded"],
            "warm_documents_from_cache": warm["documents_from_cache"],
            "warm_documents_encoded": warm["documents_encoded"],
            "bare_s": best["bare"],
            "irflow_cold_s": best["irflow_cold"],
            "irflow_warm_s": best["irflow_warm"],
            "irflow_cold_over_bare": best["irflow_cold"] / best["bare"],
            "irflow_warm_over_bare": best["irflow_warm"] / best["bare"],
        },
    )


if __name__ == "__main__":
    main()
