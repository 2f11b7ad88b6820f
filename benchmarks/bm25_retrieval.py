"""BM25: irflow's retrieve stage vs bare bm25s on the same corpus and queries.

Both tokenise with the same stemmer and stopwords, index title + " " + text and retrieve the
top 1000 for every judged query. The irflow side is its index_bm25 job (build and save the
index) then its retrieve job (load the index memory-mapped, search); it also reads Parquet and
builds the run table in trec_eval order. Writing that run (Parquet and TREC file, as the
retrieve rule does) is timed on its own: bare bm25s writes nothing to compare it with.

Bare bm25s is also timed a second time in each round (``bare_again``): the ratio of bare bm25s
to itself is this machine's noise, against which irflow's ratio is read.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import bm25s
import pyarrow.parquet as pq
import Stemmer
from _harness import best_of, median_paired_ratio, report, timings

from irflow.data.filter import queries_to_score
from irflow.data.ingest import ingest
from irflow.retrieval.bm25 import build_index
from irflow.retrieval.retrieve import bm25_search
from irflow.retrieval.runs import write_run
from irflow.workflow.config import load_schema, validate_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(REPO / "config" / "config.schema.yaml")
# The workflow's default BM25: lucene, k1 0.9, b 0.4, English stopwords, Snowball stemmer.
SPEC = validate_config(
    {
        "datasets": {"d": {"source": {"type": "url", "url": "https://example.org/d.zip"}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    },
    SCHEMA,
)["retrievers"]["bm25"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--top-k", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus_file = next(args.dataset.glob("corpus.jsonl*"))
        ingest(
            corpus_file, args.dataset / "queries.jsonl", args.dataset / "qrels" / "test.tsv", tmp
        )
        queries = queries_to_score(tmp / "queries.parquet", tmp / "qrels.parquet")
        pq.write_table(queries, tmp / "scored.parquet")
        corpus = pq.read_table(tmp / "corpus.parquet")
        texts = [
            f"{t} {x}".strip()
            for t, x in zip(corpus.column("title").to_pylist(), corpus.column("text").to_pylist())
        ]
        query_texts = queries.column("text").to_pylist()

        def bare():
            # Made in each run, as irflow makes its own: PyStemmer caches stems, and a stemmer
            # kept warm across repeats gave bare bm25s 0.1 s of SciFact's 1.1 s.
            stemmer = Stemmer.Stemmer("english")
            model = bm25s.BM25(method=SPEC["method"], k1=SPEC["k1"], b=SPEC["b"])
            model.index(
                bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                show_progress=False,
            )
            tokens = bm25s.tokenize(
                query_texts, stopwords="en", stemmer=stemmer, show_progress=False
            )
            model.retrieve(tokens, k=args.top_k, show_progress=False)

        searched = {}

        def pipeline():
            build_index(tmp / "corpus.parquet", SPEC, tmp / "bm25.bm25s")
            searched["run"], _ = bm25_search(
                tmp / "bm25.bm25s", tmp / "scored.parquet", SPEC, args.top_k, False
            )

        times = timings({"bare": bare, "irflow": pipeline, "bare_again": bare}, args.repeats)
        bare_s, pipeline_s = min(times["bare"]), min(times["irflow"])
        run = searched["run"]

        def write():
            write_run(run, tmp / "run.parquet", {}, tmp / "run.trec", "bm25")

        write_s = best_of({"write": write}, args.repeats)["write"]

    report(
        "bm25_retrieval",
        {
            "dataset": args.dataset.name,
            "documents": len(texts),
            "queries": len(query_texts),
            "bare_seconds": bare_s,
            "irflow_seconds": pipeline_s,
            "irflow_time_over_bare": pipeline_s / bare_s,
            "median_paired_ratio": median_paired_ratio(times, "irflow", "bare"),
            "bare_again_over_bare": min(times["bare_again"]) / bare_s,
            "bare_again_median_paired_ratio": median_paired_ratio(times, "bare_again", "bare"),
            "run_rows": len(run),
            "write_run_seconds": write_s,
        },
    )


if __name__ == "__main__":
    main()
