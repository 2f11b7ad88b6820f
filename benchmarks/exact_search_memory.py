"""Peak resident memory and time of exact dense search: one flat index against the embeddings
searched in row shards (``indexes.<name>.shard_rows``), with the raw faiss call as the time
reference, on random unit vectors written as the embeddings Parquet contract.

Each step runs in its own process, which reports its own peak (``VmHWM``):
- raw: ``faiss.read_index`` and one ``IndexFlatIP.search`` of every query (the reference time);
- flat build / flat search: the workflow's index job and retrieve job with a flat index;
- sharded search: the retrieve job with ``shard_rows`` (which has no index job).
The two runs are compared byte for byte.

    python benchmarks/exact_search_memory.py --rows 1000000 2000000 --shard-rows 262144

Writes benchmarks/out/exact_search_memory.json and prints the command and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _harness import OUT
from index_memory import write_random_embeddings

from irflow.core import contracts
from irflow.workflow import resources

STEP = """
import json, sys, time, faiss
from pathlib import Path
spec, work, step, top_k, threads = json.loads(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], \
    int(sys.argv[4]), int(sys.argv[5])
faiss.omp_set_num_threads(threads)
from irflow.core.settings_types import Index
from irflow.retrieval.exact_search import searched_in_shards
sharded = searched_in_shards(Index.model_validate(spec))
index = None if sharded else work / f"{step.split()[0]}.faiss"
started = time.perf_counter()
if step == "raw":
    from irflow.encoding.embed import read_embeddings
    _, queries = read_embeddings(work / "queries.parquet")
    loaded = faiss.read_index(str(work / "flat.faiss"))
    started = time.perf_counter()
    loaded.search(queries, top_k + 1)
elif step.endswith("build"):
    from irflow.retrieval.index import index_file
    index_file(work / "docs.parquet", spec, index)
else:
    from irflow.core.contracts import write_frame
    from irflow.retrieval.retrieve import dense_search
    run, _ = dense_search(index, spec, work / "docs.parquet", work / "queries.parquet", top_k,
                          False, batch_size=1024, latency_queries=0)
    write_frame(run, work / f"{step.split()[0]}.run.parquet")
seconds = time.perf_counter() - started
# VmHWM: this process's own peak; ru_maxrss would start from the parent's RSS (it is kept
# across the fork and exec that start this process).
peak_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if "VmHWM" in line)
print(json.dumps([peak_kib / 1024, seconds]))
"""
STEPS = ("raw", "flat build", "flat search", "sharded search")


def write_queries(path: Path, rows: int, dim: int) -> None:
    random = np.random.default_rng(1)
    vectors = random.normal(size=(rows, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = pa.array([f"q{i}" for i in range(rows)])
    table = pa.table({"id": ids, "vector": contracts.vector_array(vectors)})
    pq.write_table(table.cast(contracts.embeddings_schema(dim)), path)


def measure(rows: int, args, work: Path) -> dict:
    write_random_embeddings(work / "docs.parquet", rows, args.dim)
    write_queries(work / "queries.parquet", args.queries, args.dim)
    flat = {"type": "flat", "mmap": False, "recall_queries": 0, "shard_rows": None}
    specs = {"flat": flat, "sharded": flat | {"shard_rows": args.shard_rows}}
    order = ["flat build", "raw", "flat search", "sharded search"]
    measured = {}
    for step in order:
        spec = specs[step.split()[0]] if step != "raw" else flat
        command = [sys.executable, "-c", STEP, json.dumps(spec), work, step, str(args.top_k)]
        done = subprocess.run([*command, str(args.threads)], check=True, capture_output=True)
        peak, seconds = json.loads(done.stdout)
        measured[step] = {"peak_MiB": peak, "seconds": seconds}
        print(rows, step, measured[step], flush=True)
    runs = [(work / f"{name}.run.parquet").read_bytes() for name in ("flat", "sharded")]
    vectors_mib = rows * args.dim * 4 / resources.MIB
    return {
        "rows": rows,
        "vectors_MiB": vectors_mib,
        "steps": measured,
        "runs_equal_byte_for_byte": runs[0] == runs[1],
        "sharded_search_over_raw_faiss": measured["sharded search"]["seconds"]
        / measured["raw"]["seconds"],
        "flat_search_over_raw_faiss": measured["flat search"]["seconds"]
        / measured["raw"]["seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", required=True)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--top-k", type=int, default=1000)
    parser.add_argument("--shard-rows", type=int, default=262144)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    command = shlex.join(["python", *sys.argv])
    print(command, flush=True)
    results = []
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as work:
            results.append(measure(rows, args, Path(work)))
    OUT.mkdir(exist_ok=True)
    out = {"command": command, "settings": vars(args), "results": results}
    (OUT / "exact_search_memory.json").write_text(json.dumps(out, indent=2) + "\n")
    print(command)
    print("| rows | vectors MiB | " + " | ".join(f"{step} MiB (s)" for step in STEPS) + " |")
    print("| ---: " * (2 + len(STEPS)) + "|")
    for result in results:
        cells = [f"{result['rows']:,}", f"{result['vectors_MiB']:,.0f}"]
        for step in STEPS:
            measured = result["steps"][step]
            cells.append(f"{measured['peak_MiB']:,.0f} ({measured['seconds']:.1f})")
        print("| " + " | ".join(cells) + " |")
    for result in results:
        print(
            f"{result['rows']:,} rows: runs equal byte for byte: "
            f"{result['runs_equal_byte_for_byte']}; time over the raw faiss call: sharded "
            f"{result['sharded_search_over_raw_faiss']:.2f}x, flat "
            f"{result['flat_search_over_raw_faiss']:.2f}x"
        )


if __name__ == "__main__":
    main()
