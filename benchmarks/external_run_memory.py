"""Peak resident memory and time of importing an external run, read whole (irflow before issue
32) against streamed with each query's top_k kept as it goes (irflow.retrieval.external_run).

Generates a dataset of ``--docs`` documents and a TREC run of ``--lines`` lines in two shapes:
``few-queries`` (``--lines / --deep`` queries of ``--deep`` documents each, most cut by top_k:
the case streaming bounds) and ``top-k-each`` (``--lines / top_k`` queries of top_k documents:
every row is kept, so both readers hold the run). Each import runs in its own process, which
reports its own peak (``ru_maxrss``). The old reader is ``src/irflow/retrieval/external_run.py``
at ``--old-commit``, taken from git. Printed beside them: the peak that
irflow.workflow.resources' model gives (before headroom).

    python benchmarks/external_run_memory.py --lines 2000000

Writes benchmarks/out/external_run_memory.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
from _harness import OUT

from irflow.core import contracts
from irflow.workflow import resources

REPO = Path(__file__).resolve().parents[1]
MEASURE = """
import importlib.util, json, resource, sys, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("reader", sys.argv[1])
reader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reader)
run_file, corpus, queries = (Path(arg) for arg in sys.argv[2:5])
start = time.perf_counter()
run, report = reader.import_run(
    run_file, corpus, queries, queries, top_k=int(sys.argv[5]), remove_self_matches=False,
    max_unknown_fraction=0.0,
)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mib": peak, "rows": len(run)}))
"""


def write_dataset(folder: Path, docs: int, queries: int) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    doc_ids = [f"doc{i}" for i in range(docs)]
    corpus = pa.table({"doc_id": doc_ids, "title": [""] * docs, "text": ["x"] * docs})
    contracts.write_table(corpus, folder / "corpus.parquet", contracts.CORPUS)
    query_ids = [f"query{i}" for i in range(queries)]
    table = pa.table({"query_id": query_ids, "text": ["q"] * queries})
    contracts.write_table(table, folder / "queries.parquet", contracts.QUERIES)
    return folder / "corpus.parquet", folder / "queries.parquet"


def write_run(path: Path, queries: int, depth: int, docs: int) -> None:
    """``depth`` distinct random documents a query, with scores of 4 decimals (many ties)."""
    rng = np.random.default_rng(0)
    with open(path, "w") as out:
        for query in range(queries):
            listed = rng.choice(docs, size=depth, replace=False)
            scores = np.sort(rng.random(depth).round(4))[::-1]
            out.writelines(
                f"query{query} Q0 doc{doc} {rank} {score} bench\n"
                for rank, (doc, score) in enumerate(zip(listed, scores), start=1)
            )


def measure(reader: tuple[Path, Path], run: Path, corpus: Path, queries: Path, top_k: int) -> dict:
    """One import in its own process: ``reader`` is (the package's folder, its reader module)."""
    package, module = reader
    command = [sys.executable, "-c", MEASURE, str(module), str(run), str(corpus), str(queries)]
    result = subprocess.run(
        [*command, str(top_k)],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"PYTHONPATH": str(package)},
    )
    return json.loads(result.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--top-k", type=int, default=1000)
    parser.add_argument("--deep", type=int, default=20_000, help="documents a query, few-queries")
    parser.add_argument("--old-commit", default="e653423")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        # The old reader runs on the package it was written against (its imports moved since).
        archive = subprocess.run(
            ["git", "archive", args.old_commit, "src/irflow"], cwd=REPO, capture_output=True
        )
        if archive.returncode:
            sys.exit(f"git archive {args.old_commit}: {archive.stderr.decode()}")
        subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive.stdout, check=True)
        old = (scratch / "src", scratch / "src" / "irflow" / "retrieval" / "external_run.py")
        new = (REPO / "src", REPO / "src" / "irflow" / "retrieval" / "external_run.py")
        for shape, depth in (("few-queries", args.deep), ("top-k-each", args.top_k)):
            queries = args.lines // depth
            corpus, query_table = write_dataset(scratch / shape, args.docs, queries)
            run = scratch / shape / "run.trec"
            write_run(run, queries, depth, args.docs)
            row = {
                "shape": shape,
                "lines": queries * depth,
                "queries": queries,
                "file_mib": run.stat().st_size / 2**20,
                "model_mib": resources.external_run_peak_mib(corpus, query_table, args.top_k),
            }
            for name, reader in (("whole", old), ("streamed", new)):
                result = measure(reader, run, corpus, query_table, args.top_k)
                row |= {f"{name}_{key}": value for key, value in result.items()}
            assert row["whole_rows"] == row["streamed_rows"]
            rows.append(row)
    OUT.mkdir(exist_ok=True)
    (OUT / "external_run_memory.json").write_text(json.dumps(rows, indent=2))
    columns = ["shape", "lines", "queries", "file MiB", "kept rows"]
    columns += ["whole: peak MiB, s", "streamed: peak MiB, s", "model MiB"]
    print("| " + " | ".join(columns) + " |")
    print("| --- |" + " ---: |" * (len(columns) - 1))
    for r in rows:
        print(
            f"| {r['shape']} | {r['lines']:,} | {r['queries']:,} | {r['file_mib']:.0f} | "
            f"{r['streamed_rows']:,} | {r['whole_peak_mib']:.0f}, {r['whole_seconds']:.1f} | "
            f"{r['streamed_peak_mib']:.0f}, {r['streamed_seconds']:.1f} | {r['model_mib']:.0f} |"
        )


if __name__ == "__main__":
    main()
