"""irflow's Voyager index for late interaction (``irflow.retrieval.late_interaction.VoyagerIndex``)
against the bare voyager calls that PyLate makes, on the same token vectors: the build (one
``Index`` and ``add_items``), and the search (one ``query`` of every query token, each query's
candidate documents, and sentence-transformers' ``maxsim`` of the query against them).

irflow adds to the bare search the padding of each query to its batch's width (so that a
candidate scores bit for bit what the exact search gives it) and the ties at the cut; in
batches of one query nothing is padded. The tiny model's queries vary in length; a real
ColBERT's are all expanded to 32 tokens, so padding them costs nothing. The token
vectors are a tiny random ColBERT's (tests/tiny_models.py) of the first SciFact documents and
queries: the graph's cost depends on the token count and dimension, not on the weights. The
exact search's time and the index's recall against it are reported beside.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
from _harness import local_minilm, model_spec, report, timings, write_corpus

from irflow.core import contracts
from irflow.data.rows import read_jsonl
from irflow.encoding.encode_parts import encode_file
from irflow.retrieval.late_interaction import (
    TokenEncoder,
    TokenVectors,
    VoyagerIndex,
    exhaustive_search,
    maxsim_scores,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tiny_models import build_tiny_colbert

# PyLate's defaults, as the schema fills them in (single-thread build: a reproducible graph).
SPEC = {
    "type": "voyager",
    "M": 64,
    "ef_construction": 200,
    "ef_search": 200,
    "k_token": 100,
    "seed": 1,
    "build_threads": 1,
}


def bare_build(documents: TokenVectors):
    from voyager import Index, Space

    index = Index(Space.Cosine, num_dimensions=documents.flat.shape[1], M=SPEC["M"],
                  ef_construction=SPEC["ef_construction"], random_seed=SPEC["seed"])  # fmt: skip
    index.add_items(documents.flat, num_threads=1)
    return index


def bare_search(index, token_documents, documents: TokenVectors, queries: TokenVectors, k: int):
    """PyLate's retrieve.ColBERT over a Voyager index: each query token's k nearest tokens, the
    union of their documents, ranked by MaxSim; the top k per query."""
    tokens, _ = index.query(queries.flat, k=k, num_threads=1, query_ef=max(SPEC["ef_search"], k))
    owners = token_documents[tokens.astype(np.int64)]
    hits = []
    for query, start, end in zip(
        queries.rows(0, len(queries)), queries.offsets, queries.offsets[1:]
    ):
        rows = np.unique(owners[start:end])
        scores = maxsim_scores([query], documents.select(rows))[0]
        hits.append(rows[np.argsort(-scores)[:k]])
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--docs", type=int, default=60)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_corpus(args.dataset, args.docs, tmp / "corpus.parquet")
        records = read_jsonl(args.dataset / "queries.jsonl", {"_id": True, "text": True})
        rows = [{"query_id": r["_id"], "text": r["text"]} for _, r in records]
        contracts.write_table(
            pa.Table.from_pylist(rows[: args.queries], contracts.QUERIES), tmp / "queries.parquet"
        )
        folder = build_tiny_colbert(tmp / "colbert", local_minilm())
        spec = model_spec(str(folder), 1024, device="cpu") | {"max_seq_length": 180}
        encoder = TokenEncoder.load(spec)  # ColBERTv2's document length, as PyLate's default
        encode_file(encoder, tmp / "corpus.parquet", "corpus", tmp / "docs.parquet")
        encode_file(encoder, tmp / "queries.parquet", "queries", tmp / "qv.parquet")
        documents, queries = (
            TokenVectors.read(tmp / "docs.parquet"),
            TokenVectors.read(tmp / "qv.parquet"),
        )

    graph = VoyagerIndex.build(documents, SPEC)
    index = bare_build(documents)
    k = graph.settings(args.top_k)["k_token"]
    build = timings(
        {
            "irflow": lambda: VoyagerIndex.build(documents, SPEC),
            "bare": lambda: bare_build(documents),
        },
        args.repeats,
    )
    search = timings(
        {
            "irflow": lambda: graph.search(documents, queries, args.top_k, 64),
            # Batches of one: no query is padded (nor are real ColBERT queries, all 32 tokens).
            "irflow_batch_1": lambda: graph.search(documents, queries, args.top_k, 1),
            "bare": lambda: bare_search(index, graph.token_documents, documents, queries, k),
            "exact": lambda: exhaustive_search(documents, queries, args.top_k, 64),
        },
        args.repeats,
    )
    hits, counts = graph.search(documents, queries, args.top_k, 64)
    exact = exhaustive_search(documents, queries, args.top_k, 64)
    found = sum(len(np.intersect1d(mine, theirs)) for (mine, _), (theirs, _) in zip(hits, exact))
    report(
        "late_interaction_voyager",
        {
            "dataset": args.dataset.name,
            "documents": len(documents),
            "tokens": len(documents.flat),
            "queries": len(queries),
            "top_k": args.top_k,
            "k_token": k,
            "build_seconds_bare": min(build["bare"]),
            "build_seconds_irflow": min(build["irflow"]),
            "build_irflow_over_bare": min(build["irflow"]) / min(build["bare"]),
            "search_seconds_bare": min(search["bare"]),
            "search_seconds_irflow": min(search["irflow"]),
            "search_irflow_over_bare": min(search["irflow"]) / min(search["bare"]),
            "search_irflow_batch_1_over_bare": min(search["irflow_batch_1"]) / min(search["bare"]),
            "search_seconds_exact": min(search["exact"]),
            "candidates_mean": float(np.mean(counts)),
            "recall_against_exact": found / sum(len(rows) for rows, _ in exact),
            "graph_bytes": graph.nbytes,
            "token_vectors_bytes": documents.nbytes,
        },
    )


if __name__ == "__main__":
    main()
