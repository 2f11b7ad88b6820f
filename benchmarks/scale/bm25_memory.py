"""BM25 at scale: peak memory and time of irflow's BM25 (index, then the top 1000 of every
judged query) per corpus size, each in a fresh process, and a straight line through the
measurements to MS MARCO's 8,841,823 passages.

Each corpus (a make_corpus.py folder) is ingested once into ``--work``; then a child process
runs ``bm25_search`` with the workflow's default BM25 on it, and the parent reads the child's
peak resident memory from ``os.wait4`` (ru_maxrss). The child also reports the index's
postings (its non-zero scores) and a digest of the run, so two versions of retrieve.py can be
checked to give the same run. ``--retrieve`` times another retrieve.py, for example the one
before a change (``git show REV:src/irflow/retrieval/retrieve.py > /tmp/old_retrieve.py``).

    .venv/bin/python benchmarks/scale/make_corpus.py --out /tmp/scale/msm1m
    .venv/bin/python benchmarks/scale/make_corpus.py --out /tmp/scale/msm2m --documents 2000000
    nice .venv/bin/python benchmarks/scale/bm25_memory.py /tmp/scale/msm1m /tmp/scale/msm2m

Writes benchmarks/out/bm25_memory[-NAME].json (NAME from ``--label``) and prints a table.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
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
        "datasets": {"d": {"source": {"path": "."}}},
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


def child(retrieve_file: str, corpus: str, queries: str) -> None:
    """One measurement, printed as JSON: this process's memory is what the parent reads."""
    if retrieve_file:
        spec = importlib.util.spec_from_file_location("retrieve_under_test", retrieve_file)
        retrieve = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(retrieve)
    else:
        from irflow.retrieval import retrieve
    indexed = []

    class Recorded(retrieve.BM25Retriever):
        def index(self, corpus_path):
            indexed.append(self)
            return super().index(corpus_path)

    retrieve.BM25Retriever = Recorded
    started = time.perf_counter()
    run, timing = retrieve.bm25_search(Path(corpus), Path(queries), default_spec(), 1000, False)
    seconds = time.perf_counter() - started
    digest = hashlib.sha256()
    for column in ("query_id", "doc_id", "score"):
        digest.update(run[column].to_numpy().astype("U" if column != "score" else None).tobytes())
    print(
        json.dumps(
            {
                "seconds": seconds,
                "index_seconds": timing["index_seconds"],
                "search_seconds": timing["search_seconds"],
                "index_bytes": timing["index_bytes"],
                "postings": len(indexed[0].model.scores["data"]),
                "vocabulary": len(indexed[0].model.scores["indptr"]) - 1,
                "run_rows": len(run),
                "run_sha256": digest.hexdigest(),
            }
        )
    )


def measure(retrieve_file: str, corpus: Path, queries: Path) -> dict:
    command = [sys.executable, __file__, "--child", retrieve_file, str(corpus), str(queries)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status:
        raise SystemExit(f"measurement of {corpus} failed (wait status {status})")
    import pyarrow.parquet as pq

    documents = pq.ParquetFile(corpus).metadata.num_rows
    peak_mib = usage.ru_maxrss * 1024 / MIB  # ru_maxrss is in KiB on Linux
    return {"documents": documents, "peak_rss_mib": peak_mib} | json.loads(output)


def line(points: list[tuple[float, float]], x: float) -> tuple[float, float, float]:
    """Intercept and slope of the line through the first and last points, and its value at x."""
    (x0, y0), (x1, y1) = points[0], points[-1]
    slope = (y1 - y0) / (x1 - x0)
    return y0 - slope * x0, slope, y0 + slope * (x - x0)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("corpora", type=Path, nargs="+", help="make_corpus.py folders")
    parser.add_argument("--work", type=Path, default=Path("/tmp/scale/ingested"))
    parser.add_argument("--retrieve", default="", help="another retrieve.py to measure")
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    from _harness import OUT

    rows = []
    for corpus in args.corpora:
        tables = ingested(corpus, args.work)
        rows.append(measure(str(args.retrieve), *tables))
        print(json.dumps(rows[-1]), flush=True)
    summary = {
        "retrieve": args.retrieve or "src/irflow/retrieval/retrieve.py",
        "measurements": rows,
    }
    if len(rows) > 1:
        for key in ("peak_rss_mib", "index_seconds", "seconds"):
            intercept, slope, at_msmarco = line(
                [(row["documents"], row[key]) for row in rows], MSMARCO_DOCUMENTS
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


if __name__ == "__main__":
    main()
