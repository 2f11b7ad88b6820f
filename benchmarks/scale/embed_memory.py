"""Scale: peak memory and time of embed_gather and of a variant's embed that reuses its base's
vectors, at several corpus sizes, to show that both stay flat in the number of rows.

For each size N, generates (no model involved):

- a corpus of N documents, 1% of them a copy of an earlier document's text;
- its embeddings as 4 shards of random float32 vectors (256 dimensions), with manifests;
- a variant: the corpus shuffled, 10% of the texts changed and 1% of the documents new.

Then runs, each in a fresh process so that its peak resident memory (VmHWM, which unlike
getrusage's ru_maxrss does not count the parent's memory at the fork) is its own:

- ``gather``: irflow.encoding.embed.gather of the 4 shards (the embed_gather job);
- ``reuse``: irflow.encoding.embed.embed_file of the variant with ``Reuse`` of the gathered base
  (the embed job of a variant), with an encoder that returns random vectors, so that only irflow's
  own work is timed: matching the base once, then a part of ``--chunk-size`` rows at a time.

    python benchmarks/scale/embed_memory.py --workdir /tmp/embed-memory --rows 1000000 2000000

Prints a Markdown table and writes benchmarks/out/embed_memory.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "benchmarks" / "out" / "embed_memory.json"
DIM, SHARDS, BATCH = 256, 4, 65536
GIB = 1 << 30
sys.path.insert(0, str(REPO / "benchmarks"))


def write_corpus(path: Path, ids: list[str], texts: list[str]) -> None:
    from irflow.core import contracts

    table = pa.table({"doc_id": ids, "title": [""] * len(ids), "text": texts})
    pq.write_table(table.cast(contracts.CORPUS), path)


def generate(folder: Path, rows: int) -> None:
    """The corpus, its embedding shards and manifests, and the variant (see the docstring)."""
    from irflow.core import contracts
    from irflow.encoding.embed import shard_rows

    random = np.random.default_rng(rows)
    folder.mkdir(parents=True)
    ids = [f"doc{i}" for i in range(rows)]
    texts = [f"synthetic document {i} on topic {i % 997} of the corpus" for i in range(rows)]
    copies = random.choice(np.arange(1, rows), rows // 100, replace=False)
    for row in copies:
        texts[row] = texts[random.integers(0, row)]
    write_corpus(folder / "corpus.parquet", ids, texts)
    for shard in range(SHARDS):
        first, end = shard_rows(rows, shard, SHARDS)
        schema = contracts.embeddings_schema(DIM)
        with pq.ParquetWriter(folder / f"{shard}-of-{SHARDS}.parquet", schema) as writer:
            for start in range(first, end, BATCH):
                stop = min(start + BATCH, end)
                vectors = random.standard_normal((stop - start, DIM), dtype=np.float32)
                columns = [pa.array(ids[start:stop]), contracts.vector_array(vectors)]
                writer.write_batch(pa.record_batch(columns, schema=schema))
        manifest = {
            "shard": str(shard),
            "device": "cpu",
            "rows": end - first,
            "rows_encoded": end - first,
            "rows_resumed": 0,
            "rows_reused": 0,
            "encode_seconds": 1.0,
        }
        (folder / f"{shard}-of-{SHARDS}.json").write_text(json.dumps(manifest))
    order = random.permutation(rows)
    changed = random.random(rows) < 0.10
    variant_ids = [ids[i] for i in order] + [f"new{i}" for i in range(rows // 100)]
    variant_texts = [texts[i] + " (changed)" if changed[i] else texts[i] for i in order]
    variant_texts += [f"a new document {i}" for i in range(rows // 100)]
    write_corpus(folder / "variant.parquet", variant_ids, variant_texts)


def run_gather(folder: Path) -> dict:
    from irflow.encoding.embed import gather

    paths = [folder / f"{shard}-of-{SHARDS}.parquet" for shard in range(SHARDS)]
    manifests = [json.loads(path.with_suffix(".json").read_text()) for path in paths]
    facts = gather(paths, manifests, folder / "corpus.parquet", "corpus", folder / "base.parquet")
    return {"rows": facts["rows"]}


def run_reuse(folder: Path, chunk_size: int) -> dict:
    from _harness import model_spec

    from irflow.encoding.embed import Reuse, embed_file
    from irflow.encoding.models import Encoder

    class RandomEncoder(Encoder):
        random = np.random.default_rng(0)

        def encode(self, texts, prompt):
            return self.random.standard_normal((len(texts), DIM), dtype=np.float32)

    class TimedReuse(Reuse):
        match_seconds = 0.0

        def match(self, *args):
            started = time.perf_counter()
            matched = super().match(*args)
            TimedReuse.match_seconds += time.perf_counter() - started
            return matched

    spec = model_spec("random", chunk_size, device="cpu")
    encoder = RandomEncoder(None, spec, "cpu", {"dtype": "float32", "files_md5": "random"})
    reuse = TimedReuse(folder / "corpus.parquet", folder / "base.parquet", "corpus")
    out = folder / "variant-embeddings.parquet"
    stats = embed_file(encoder, folder / "variant.parquet", "corpus", out, reuse)
    return {
        "rows": stats["rows"],
        "rows_reused": stats["rows_reused"],
        "parts": -(-stats["rows"] // chunk_size),
        "match_seconds": TimedReuse.match_seconds,
    }


def peak_rss_bytes() -> int:
    """This process's peak resident memory since it started (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status: Linux only")


def child(job: str, folder: Path, chunk_size: int) -> None:
    """Run one job in this process and print its facts, seconds and peak RSS as JSON."""
    import irflow.encoding.embed  # noqa: F401  (its imports count in the baseline, not in the job)

    baseline = peak_rss_bytes()
    started = time.perf_counter()
    facts = run_gather(folder) if job == "gather" else run_reuse(folder, chunk_size)
    facts |= {
        "seconds": time.perf_counter() - started,
        "peak_rss_bytes": peak_rss_bytes(),
        "rss_after_imports_bytes": baseline,
    }
    print(json.dumps(facts))


def measure(job: str, folder: Path, chunk_size: int) -> dict:
    command = [sys.executable, __file__, "--child", job, "--workdir", str(folder)]
    command += ["--chunk-size", str(chunk_size)]
    result = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def markdown(results: list[dict]) -> str:
    lines = [
        "| job | rows | seconds | µs per row | peak RSS | RSS after imports |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in results:
        name = row["job"]
        if row["job"] == "reuse":
            name += f" (match once {row['match_seconds']:.1f} s, {row['parts']} parts)"
        lines.append(
            f"| {name} | {row['rows']:,} | {row['seconds']:.1f} | "
            f"{row['seconds'] / row['rows'] * 1e6:.1f} | {row['peak_rss_bytes'] / GIB:.2f} GiB | "
            f"{row['rss_after_imports_bytes'] / GIB:.2f} GiB |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, required=True, help="generated files go here")
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 2_000_000])
    parser.add_argument("--chunk-size", type=int, default=4096, help="rows per embed part")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--child", choices=["gather", "reuse"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.workdir, args.chunk_size)
        return

    results = []
    for rows in args.rows:
        folder = args.workdir / f"{rows}"
        if not (folder / "variant.parquet").exists():
            shutil.rmtree(folder, ignore_errors=True)
            generate(folder, rows)
        for job in ("gather", "reuse"):
            results.append({"job": job} | measure(job, folder, args.chunk_size))
            print(json.dumps(results[-1]), flush=True)
        if not args.keep:
            shutil.rmtree(folder)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(results, indent=1))
    print(markdown(results))


if __name__ == "__main__":
    main()
