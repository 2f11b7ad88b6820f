"""BM25 at scale: the index job and the search job, each in a fresh process, their peak memory
and time per corpus size, and a straight line through the measurements to MS MARCO's 8,841,823
passages.

Each corpus (a make_corpus.py folder) is ingested once into ``--work``. Then:

* an index child does what every BM25 job did before the index was saved (build bm25s' score
  matrix of the corpus with the workflow's default BM25, then search the judged queries at
  depth 1000 in memory) and then saves the index (``irflow.retrieval.bm25``), as the index_bm25
  job does;
* a search child does what each BM25 job does now: load the saved index memory-mapped and
  search the same queries (``bm25_search``).

The parent reads each child's peak resident memory from ``os.wait4`` (ru_maxrss; mapped pages
the search reads count in it) and checks that both runs are the same, bit for bit (SHA-256 of
query ids, doc ids and scores). From the same run it prints the cost of ``--jobs`` jobs that
each need BM25 (retrieve, qc_candidates, negatives, ...): rebuilt in every job, against
indexed once and searched from the saved index.

    .venv/bin/python benchmarks/scale/make_corpus.py --out /tmp/scale/msm1m
    .venv/bin/python benchmarks/scale/make_corpus.py --out /tmp/scale/msm2m --documents 2000000
    nice .venv/bin/python benchmarks/scale/bm25_memory.py /tmp/scale/msm1m /tmp/scale/msm2m

Writes benchmarks/out/bm25_memory[-NAME].json (NAME from ``--label``) and prints a table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MSMARCO_DOCUMENTS = 8_841_823
MIB = 1 << 20
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def default_spec() -> dict:
    from irflow.workflow.config import load_schema, validate_config

    schema = load_schema(HERE.parents[1] / "config" / "config.schema.yaml")
    config = {
        "datasets": {"d": {"source": {"type": "url", "url": "https://example.org/d.zip"}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    return validate_config(config, schema)["retrievers"]["bm25"]


def ingested(corpus: Path, work: Path) -> tuple[Path, Path]:
    """The corpus and its judged queries as irflow's Parquet tables, made once."""
    import pyarrow.parquet as pq

    from irflow.data.filter import queries_to_score
    from irflow.data.ingest import ingest

    out = work / corpus.name
    if not (out / "scored.parquet").exists():
        out.mkdir(parents=True, exist_ok=True)
        ingest(corpus / "corpus.jsonl.gz", corpus / "queries.jsonl", corpus / "qrels/test.tsv", out)
        scored = queries_to_score(out / "queries.parquet", out / "qrels.parquet")
        pq.write_table(scored, out / "scored.parquet")
    return out / "corpus.parquet", out / "scored.parquet"


def run_digest(run) -> str:
    digest = hashlib.sha256()
    for column in ("query_id", "doc_id", "score"):
        digest.update(run[column].to_numpy().astype("U" if column != "score" else None).tobytes())
    return digest.hexdigest()


def index_child(corpus: str, queries: str, folder: str) -> dict:
    """A BM25 job before the index was saved (build, then search in memory), then the save."""
    from irflow.retrieval.bm25 import BM25Retriever
    from irflow.retrieval.retrieve import search_texts

    spec = default_spec()
    started = time.perf_counter()
    retriever = BM25Retriever(spec).index(Path(corpus))
    built = time.perf_counter()
    run, _ = search_texts(retriever, retriever.doc_ids, Path(queries), 1000, False)
    searched = time.perf_counter()
    index_bytes = retriever.save(Path(folder))
    return {
        "index_seconds": built - started,
        "search_seconds": searched - built,
        "save_seconds": time.perf_counter() - searched,
        "index_bytes": index_bytes,
        "postings": len(retriever.model.scores["data"]),
        "vocabulary": len(retriever.model.scores["indptr"]) - 1,
        "run_rows": len(run),
        "run_sha256": run_digest(run),
    }


def search_child(corpus: str, queries: str, folder: str) -> dict:
    """A BM25 job now: the saved index, memory-mapped, searched."""
    from irflow.retrieval.retrieve import bm25_search

    started = time.perf_counter()
    run, timing = bm25_search(Path(folder), Path(queries), default_spec(), 1000, False)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "search_seconds": timing["search_seconds"],
        "load_seconds": seconds - timing["search_seconds"],
        "run_rows": len(run),
        "run_sha256": run_digest(run),
    }


CHILDREN = {"index": index_child, "search": search_child}


def measure(kind: str, corpus: Path, queries: Path, folder: Path) -> dict:
    """One child's facts and its peak resident memory."""
    command = [sys.executable, __file__, "--child", kind, str(corpus), str(queries), str(folder)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status:
        raise SystemExit(f"{kind} measurement of {corpus} failed (wait status {status})")
    return {"peak_rss_mib": usage.ru_maxrss * 1024 / MIB} | json.loads(output)  # KiB on Linux


def measure_corpus(corpus: Path, queries: Path, jobs: int) -> dict:
    import pyarrow.parquet as pq

    folder = corpus.with_name("bm25.bm25s")
    index = measure("index", corpus, queries, folder)
    search = measure("search", corpus, queries, folder)
    if search["run_sha256"] != index["run_sha256"]:
        raise SystemExit(f"{corpus}: the saved index's run differs from the built index's")
    rebuilt = jobs * (index["index_seconds"] + index["search_seconds"])
    once = index["index_seconds"] + index["save_seconds"] + jobs * search["seconds"]
    return {
        "documents": pq.ParquetFile(corpus).metadata.num_rows,
        "index_job": index,
        "search_job": search,
        "jobs": jobs,
        "rebuilt_in_every_job_seconds": rebuilt,
        "indexed_once_seconds": once,
        "speedup": rebuilt / once,
    }


def line(points: list[tuple[float, float]], x: float) -> tuple[float, float, float]:
    """Intercept and slope of the line through the first and last points, and its value at x."""
    (x0, y0), (x1, y1) = points[0], points[-1]
    slope = (y1 - y0) / (x1 - x0)
    return y0 - slope * x0, slope, y0 + slope * (x - x0)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(CHILDREN[sys.argv[2]](*sys.argv[3:6])))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("corpora", type=Path, nargs="+", help="make_corpus.py folders")
    parser.add_argument("--work", type=Path, default=Path("/tmp/scale/ingested"))
    parser.add_argument("--jobs", type=int, default=4, help="BM25 jobs per dataset to compare")
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    from _harness import OUT

    rows = []
    for corpus in args.corpora:
        rows.append(measure_corpus(*ingested(corpus, args.work), args.jobs))
        print(json.dumps(rows[-1]), flush=True)
    summary = {"command": " ".join(sys.argv), "measurements": rows}
    if len(rows) > 1:
        fits = {
            "index_peak_rss_mib": lambda row: row["index_job"]["peak_rss_mib"],
            "search_peak_rss_mib": lambda row: row["search_job"]["peak_rss_mib"],
            "index_seconds": lambda row: row["index_job"]["index_seconds"],
        }
        for key, value in fits.items():
            intercept, slope, at_msmarco = line(
                [(row["documents"], value(row)) for row in rows], MSMARCO_DOCUMENTS
            )
            summary[f"{key}_fit"] = {
                "intercept": intercept,
                "per_million_documents": slope * 1e6,
                "at_msmarco": at_msmarco,
            }
    OUT.mkdir(exist_ok=True)
    name = "bm25_memory" + (f"-{args.label}" if args.label else "")
    (OUT / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    for row in rows:
        print(
            f"{row['documents']:,} documents, {args.jobs} BM25 jobs: rebuilt in each "
            f"{row['rebuilt_in_every_job_seconds']:.1f} s, indexed once "
            f"{row['indexed_once_seconds']:.1f} s: {row['speedup']:.2f}x; peak RSS index job "
            f"{row['index_job']['peak_rss_mib']:.0f} MiB, search job "
            f"{row['search_job']['peak_rss_mib']:.0f} MiB"
        )


if __name__ == "__main__":
    main()
