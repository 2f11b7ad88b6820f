"""Approximate indexes against flat: overlap@k, nDCG@10 and search time, from one embeddings set.

Reads the corpus and query embeddings and the qrels a workflow run wrote, builds each index
type with irflow's defaults (as a user who writes only ``type:`` gets them, plus variants named
below), searches it through irflow's dense search (runs of ``--top-k``, full runs enforced),
and reports, against the flat index's run of the same queries:

- ``overlap@k``: share of flat's top k that the index's top k holds, averaged over queries;
- ``ndcg@10`` and its difference from flat's;
- the recall@k against exact search that the retrieve job itself measured on its sample of
  queries (``recall_queries``, default 100) and the search setting it searched with
  (raised by ``target_recall`` where set);
- build and search seconds, index size, and what the search had to do to return full runs
  (queries probed wider, deepest k).

    # SciFact with all-MiniLM-L6-v2 (embeddings from any workflow run, e.g. config/offline.yaml)
    python benchmarks/index_quality.py --results results --dataset scifact \
        --model all-MiniLM-L6-v2
    # the 1 M-document scale corpus (benchmarks/scale/measure.py's work folder)
    python benchmarks/index_quality.py --results /data/scale-run/results \
        --dataset synthetic-1m --model minilm-static --queries 200

Writes benchmarks/out/index_quality-<dataset>.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from _harness import OUT

from irflow.core import contracts
from irflow.evaluation.score import score_run
from irflow.retrieval.index import index_file
from irflow.retrieval.retrieve import dense_search
from irflow.workflow.config import load_schema, validate_config

SCHEMA = Path(__file__).resolve().parents[1] / "config" / "config.schema.yaml"

# Each index as a config entry; the defaults first (approximate ones raise nprobe / ef_search
# until their sampled recall reaches target_recall, 0.99), then what a user tunes.
INDEXES = {
    "flat": {"type": "flat"},
    "hnsw": {"type": "hnsw"},
    "ivf": {"type": "ivf"},
    "ivfpq (refine x4)": {"type": "ivfpq"},
    "ivf, no target (nprobe 32)": {"type": "ivf", "target_recall": None},
    "ivfpq (refine x4), no target": {"type": "ivfpq", "target_recall": None},
    "ivfpq, no refine": {"type": "ivfpq", "refine": False},
    "ivfpq 64 B, no refine": {"type": "ivfpq", "pq_m": 64, "refine": False},
}


def index_spec(**settings) -> dict:
    """An ``indexes`` entry with the schema's defaults, as the workflow would see it."""
    config = {
        "datasets": {"d": {"source": {"type": "url", "url": "https://example.org/d.zip"}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    config["indexes"] = {"i": settings}
    return validate_config(config, load_schema(SCHEMA))["indexes"]["i"]


def markdown(rows: list[dict]) -> str:
    header = list(rows[0])
    shown = [[f"{v:.4f}" if isinstance(v, float) else str(v) for v in row.values()] for row in rows]
    lines = [header, ["---"] * len(header), *shown]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def overlap(run: pd.DataFrame, reference: pd.DataFrame, k: int) -> float:
    """Mean over the reference's queries of |top k ∩ reference top k| / |reference top k|."""
    mine = run[run["rank"] <= k].groupby("query_id")["doc_id"].agg(set)
    theirs = reference[reference["rank"] <= k].groupby("query_id")["doc_id"].agg(set)
    shares = [len(mine.get(query, set()) & docs) / len(docs) for query, docs in theirs.items()]
    return float(np.mean(shares))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True, help="a workflow's results/")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--top-k", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=None, help="only the first N queries")
    parser.add_argument("--mmap", action="store_true", help="search every index memory-mapped")
    parser.add_argument("--indexes", nargs="*", default=list(INDEXES), choices=list(INDEXES))
    args = parser.parse_args()

    folder = args.results / "embeddings" / args.dataset / args.model
    corpus, queries = folder / "corpus.parquet", folder / "queries.parquet"
    qrels = pd.read_parquet(args.results / "datasets" / args.dataset / "qrels.parquet")
    work = Path(tempfile.mkdtemp(prefix="index-quality-"))
    if args.queries:
        table = pq.read_table(queries).slice(0, args.queries)
        contracts.write_table(table, work / "queries.parquet")
        queries = work / "queries.parquet"
        # Only the chosen queries are scored (score_run gives a judged query without results 0).
        qrels = qrels[qrels["query_id"].isin(table.column("id").to_pylist())]
    faiss.omp_set_num_threads(faiss.omp_get_max_threads())

    rows, reference = [], None
    for name in ["flat"] + [n for n in args.indexes if n != "flat"]:
        spec = index_spec(**INDEXES[name], mmap=args.mmap)
        stats = index_file(corpus, spec, work / "index.faiss")
        started = time.perf_counter()
        run, timing = dense_search(
            work / "index.faiss",
            spec,
            corpus,
            queries,
            args.top_k,
            False,
            batch_size=1024,
            latency_queries=0,
        )
        seconds = time.perf_counter() - started
        reference = run if reference is None else reference
        per_query = score_run(run, qrels, ["ndcg_cut.10"])
        ndcg = per_query.loc[per_query["metric"] == "ndcg_cut_10", "value"].mean()
        search, recall = timing["search"], timing["recall"] or {}
        rows.append(
            {
                "index": name,
                "lists": stats["lists"],
                "index_MiB": stats["index_bytes"] / 2**20,
                "build_s": stats["build_seconds"],
                "search_s": seconds,
                f"overlap@{args.top_k}": overlap(run, reference, args.top_k),
                "overlap@10": overlap(run, reference, 10),
                "ndcg@10": ndcg,
                "sampled_recall": recall.get("recall", float("nan")),
                "searched_with": ", ".join(
                    f"{key} {value}" for key, value in recall.get("settings", {}).items()
                ),
                "short_queries": timing["short_queries"],
                "probed_wider": search["queries_probed_wider"],
                "search_settings": search["widest_settings"],
            }
        )
        (work / "index.faiss").unlink()
    for row in rows:
        row["ndcg@10 - flat"] = row["ndcg@10"] - rows[0]["ndcg@10"]
    OUT.mkdir(exist_ok=True)
    record = {"dataset": args.dataset, "model": args.model, "top_k": args.top_k}
    record |= {"queries": int(reference["query_id"].nunique()), "rows": rows}
    (OUT / f"index_quality-{args.dataset}.json").write_text(
        json.dumps(record, indent=2, default=str) + "\n"
    )
    print(markdown([{k: v for k, v in row.items() if k != "search_settings"} for row in rows]))


if __name__ == "__main__":
    main()
