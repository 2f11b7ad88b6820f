"""A second experiment folder on the same data: its embed job against the first one's, with the
vector store shared by both (irflow.core.store, docs/vector-store.md).

The first folder runs the README's offline quickstart command up to its embed job (SciFact,
all-MiniLM-L6-v2 from its local copy), into a vector store of its own (empty: the first
encodes). The second folder has its own config, a copy of the quickstart's, and the same store.
The embed time of each is its embed job's, as its manifests record it (documents and queries,
the model load and the per-query latency included); the ratio is the second's over the
first's, in one run. The second must encode no row, and its vectors must be the first's bytes.

    .venv/bin/python benchmarks/vector_store.py --data-dir ../shared/datasets
    .venv/bin/python benchmarks/vector_store.py --data-dir ../shared/datasets --docs 100  # smoke
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import report

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
QUICKSTART = ROOT / "config" / "quickstart.yaml"
EMBEDDINGS = "results/embeddings/scifact/all-MiniLM-L6-v2"
MANIFESTS = "results/manifests/embed/scifact/all-MiniLM-L6-v2"


def cut_scifact(source: Path, target: Path, docs: int) -> None:
    """SciFact's first ``docs`` documents, its queries and the judgements of those documents,
    in the BEIR layout (a smoke run's data)."""
    (target / "qrels").mkdir(parents=True)
    with gzip.open(source / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        kept = [line for _, line in zip(range(docs), lines)]
    (target / "corpus.jsonl").write_text("".join(kept), encoding="utf-8")
    ids = {json.loads(line)["_id"] for line in kept}
    shutil.copy(source / "queries.jsonl", target / "queries.jsonl")
    qrels = (source / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    judged = [row for row in qrels[1:] if row.split("\t")[1] in ids]
    (target / "qrels" / "test.tsv").write_text("\n".join([qrels[0], *judged]) + "\n")


def embed_in(folder: Path, config: Path, data_dir: Path, store: Path, cores: str) -> dict:
    """Snakemake in ``folder`` up to the embed job; its wall seconds, the embed job's (from
    its manifests) and the rows it encoded."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [str(SNAKEMAKE), "--snakefile", str(ROOT / "Snakefile"), "--directory", str(folder)]
    command += [f"{EMBEDDINGS}/corpus.parquet", f"{EMBEDDINGS}/queries.parquet"]
    command += ["--cores", cores, "--configfile", str(config)]
    command += ["--config", "offline=true", f"data_dir={data_dir}"]
    environment = os.environ | {"IRFLOW_VECTOR_STORE": str(store), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"snakemake failed in {folder}:\n{done.stdout}\n{done.stderr}")
    sides = {
        side: json.loads((folder / MANIFESTS / f"{side}.json").read_text())
        for side in ("corpus", "queries")
    }
    return {
        "snakemake_s": wall,
        "embed_s": sum(facts["wall_seconds"] for facts in sides.values()),
        "rows": sum(facts["rows"] for facts in sides.values()),
        "rows_encoded": sum(facts["rows_encoded"] for facts in sides.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "datasets")
    parser.add_argument("--docs", type=int, help="only SciFact's first DOCS documents (smoke)")
    parser.add_argument("--cores", default="2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vector-store-bench-") as tmp:
        work = Path(tmp)
        data_dir = args.data_dir.resolve()
        if args.docs:
            cut_scifact(data_dir / "scifact", work / "data" / "scifact", args.docs)
            data_dir = work / "data"
        store = work / "store"
        first = embed_in(work / "first", QUICKSTART, data_dir, store, args.cores)
        second_config = work / "second" / "my-config.yaml"
        second_config.parent.mkdir()
        shutil.copy(QUICKSTART, second_config)
        second = embed_in(work / "second", second_config, data_dir, store, args.cores)
        for side in ("corpus", "queries"):
            mine = (work / "second" / EMBEDDINGS / f"{side}.parquet").read_bytes()
            if mine != (work / "first" / EMBEDDINGS / f"{side}.parquet").read_bytes():
                raise SystemExit(f"the second folder's {side} vectors differ from the first's")
    if second["rows_encoded"]:
        raise SystemExit(f"the second folder encoded {second['rows_encoded']} rows")
    report(
        "vector_store",
        {
            "rows": first["rows"],
            "first_embed_s": first["embed_s"],
            "second_embed_s": second["embed_s"],
            "second_over_first": second["embed_s"] / first["embed_s"],
            "first_snakemake_s": first["snakemake_s"],
            "second_snakemake_s": second["snakemake_s"],
            "second_rows_encoded": second["rows_encoded"],
        },
    )


if __name__ == "__main__":
    main()
