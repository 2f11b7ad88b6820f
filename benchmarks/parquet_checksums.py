"""Page checksums: the cost of verifying them on read, and of writing them.

Every Parquet file irflow writes carries a CRC-32 of each page and every read verifies it
(irflow.core.contracts). Timed on an embeddings table (id, a fixed-size list of float32), the
largest file irflow reads whole: ``contracts.read_table`` (verified) against pyarrow's plain
``pq.read_table`` of the same file, and ``contracts.write_file`` (checksums) against a plain
``pq.write_table``. Each round times all four, in turns (``_harness.timings``); the ratio is the
median over rounds of the two times of one round.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _harness import median_paired_ratio, report, timings

from irflow.core import contracts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    vectors = np.random.default_rng(0).random((args.rows, args.dim), dtype=np.float32)
    table = pa.table(
        {
            "id": pa.array([f"doc{i}" for i in range(args.rows)]),
            "vector": contracts.vector_array(vectors),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        checked, plain = Path(tmp) / "checked.parquet", Path(tmp) / "plain.parquet"
        contracts.write_file(table, checked)
        times = timings(
            {
                "read_verified": lambda: contracts.read_table(checked),
                "read_plain": lambda: pq.read_table(checked),
                "write_checksums": lambda: contracts.write_file(table, checked),
                "write_plain": lambda: pq.write_table(table, plain),
            },
            args.repeats,
        )
        file_mb = checked.stat().st_size / 1e6
    report(
        "parquet_checksums",
        {
            "rows": args.rows,
            "dim": args.dim,
            "file_mb": round(file_mb, 1),
            **{f"{name}_s": min(seconds) for name, seconds in times.items()},
            "read_ratio": median_paired_ratio(times, "read_verified", "read_plain"),
            "write_ratio": median_paired_ratio(times, "write_checksums", "write_plain"),
        },
    )


if __name__ == "__main__":
    main()
