"""Peak resident memory of an index build against irflow.workflow.resources' model, at row counts on
both sides of a power of two (where a storage that grows by doubling would jump).

Each build runs in its own process (``irflow.retrieval.index.index_file`` on a random embeddings
file), which reports its own peak (``ru_maxrss``). Printed beside it: the vectors' MiB and the peak
the model in irflow.workflow.resources gives (before headroom).

    python benchmarks/index_memory.py --type flat --dim 128 --rows 1000000 1100000
    python benchmarks/index_memory.py --type hnsw --dim 128 --rows 120000 140000 \
        --ef-construction 40

Writes benchmarks/out/index_memory-<type>.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _harness import OUT

from irflow.core import contracts
from irflow.core.settings_types import Index
from irflow.workflow import resources

BUILD = """
import resource, sys, faiss
from pathlib import Path
from irflow.retrieval.index import index_file
faiss.omp_set_num_threads(1)
index_file(Path(sys.argv[1]), {spec!r}, Path(sys.argv[2]))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_random_embeddings(path: Path, rows: int, dim: int) -> None:
    """Unit vectors in batches, so the writer's own peak stays small."""
    random = np.random.default_rng(0)
    schema = contracts.embeddings_schema(dim)
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, 65536):
            n = min(65536, rows - start)
            vectors = random.normal(size=(n, dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            ids = pa.array([f"d{i}" for i in range(start, start + n)])
            writer.write_table(
                pa.table({"id": ids, "vector": contracts.vector_array(vectors)}, schema=schema)
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--type", default="flat", choices=["flat", "hnsw", "ivf", "ivfpq"])
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rows", type=int, nargs="+", required=True)
    parser.add_argument("--M", type=int, default=32)
    parser.add_argument("--ef-construction", type=int, default=200)
    args = parser.parse_args()
    spec = {"type": args.type, "M": args.M, "ef_construction": args.ef_construction}
    spec |= {"nlist": None, "train_rows": None, "pq_m": 32, "pq_bits": 8, "refine": True}
    rows_measured = []
    with tempfile.TemporaryDirectory() as work:
        for rows in args.rows:
            embeddings = Path(work) / "e.parquet"
            write_random_embeddings(embeddings, rows, args.dim)
            code = BUILD.format(spec=spec)
            command = [sys.executable, "-c", code, embeddings, Path(work) / "i"]
            peak_kib = int(subprocess.run(command, check=True, capture_output=True).stdout)
            rows_measured.append(
                {
                    "rows": rows,
                    "dim": args.dim,
                    "vectors_MiB": rows * args.dim * 4 / resources.MIB,
                    "peak_MiB": peak_kib / 1024,
                    "model_MiB": resources.index_peak_mib(
                        rows, args.dim, Index.model_validate(spec)
                    ),
                }
            )
            print(rows_measured[-1], flush=True)
    OUT.mkdir(exist_ok=True)
    path = OUT / f"index_memory-{args.type}.json"
    path.write_text(json.dumps({"spec": spec, "rows": rows_measured}, indent=2) + "\n")
    header = list(rows_measured[0])
    lines = [header, ["---"] * len(header)]
    lines += [[f"{v:,.0f}" for v in row.values()] for row in rows_measured]
    print("\n".join("| " + " | ".join(map(str, line)) + " |" for line in lines))


if __name__ == "__main__":
    main()
