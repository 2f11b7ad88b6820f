"""Scale: the graph on a generated 1 M-document corpus, with peak memory and throughput per job.

Runs ``snakemake --configfile config/scale.yaml`` in a work folder of its own (the corpus
linked in as ``data/synthetic-1m``), then reads every job's manifest: its wall time and the
peak resident memory of its process (``peak_rss_bytes``). Reports, per stage, the rows it
handled, rows per second, peak RSS, and an extrapolation to MS MARCO (8,841,823 passages,
6,980 dev queries) from the measured rates:

- ingest, filter, embed and index scale with the number of documents;
- BM25's indexing scales with documents and its search with documents x queries (the
  postings a query reads grow with the corpus);
- exact (flat) search scales with documents x queries; IVF-PQ search with √documents x queries
  (lists grow as √documents, a query probes a fixed number of them);
- scoring scales with queries.

    python benchmarks/scale/make_corpus.py --out /data/synthetic-1m
    python benchmarks/scale/distill_static.py --out /data/minilm-static
    python benchmarks/scale/measure.py --data /data/synthetic-1m \\
        --model /data/minilm-static --workdir /data/scale-run

Writes benchmarks/out/scale.json and prints the Markdown table the README quotes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MSMARCO_DOCUMENTS, MSMARCO_QUERIES = 8_841_823, 6_980
GIB = 1 << 30


def run_graph(workdir: Path, data: Path, model: Path, cores: int, again: bool) -> float:
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    link = workdir / "data" / "synthetic-1m"
    if not link.exists():
        link.symlink_to(data.resolve())
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--configfile",
        str(REPO / "config" / "scale.yaml"),
        "--directory",
        str(workdir),
        "--cores",
        str(cores),
        *(["--forceall"] if again else []),
    ]
    environment = os.environ | {"HF_HUB_OFFLINE": "1", "IRFLOW_STATIC_MODEL": str(model)}
    started = time.perf_counter()
    subprocess.run(command, check=True, env=environment)
    return time.perf_counter() - started


def job_rows(manifest: dict, documents: int, queries: int) -> tuple[int, str]:
    """What a job's throughput counts: documents (or embedded rows) or queries."""
    stage = manifest["stage"]
    if stage in ("embed", "embed_shard"):
        return manifest["rows"], "rows"
    if stage in ("retrieve", "score"):
        return queries, "queries"
    return documents, "documents"


def msmarco_factor(manifest: dict, settings: dict) -> float:
    """How much longer the job would take on MS MARCO, by the scaling rules above."""
    documents = MSMARCO_DOCUMENTS / settings["documents"]
    queries = MSMARCO_QUERIES / settings["queries"]
    stage = manifest["stage"]
    if stage == "score":
        return queries
    if stage != "retrieve":
        return documents
    if "index_seconds" in manifest:  # BM25: indexing, then search
        search_share = manifest["search_seconds"] / manifest["wall_seconds"]
        return (1 - search_share) * documents + search_share * documents * queries
    index = settings["indexes"][settings["retrievers"][manifest["system"]]["index"]]["type"]
    return queries * (math.sqrt(documents) if index.startswith("ivf") else documents)


def stage_table(workdir: Path, documents: int, queries: int, config: dict) -> list[dict]:
    settings = config | {"documents": documents, "queries": queries}
    rows = []
    for path in sorted((workdir / "results" / "manifests").rglob("*.json")):
        manifest = json.loads(path.read_text())
        if "peak_rss_bytes" not in manifest:
            continue
        count, unit = job_rows(manifest, documents, queries)
        name = str(path.relative_to(workdir / "results" / "manifests").with_suffix(""))
        if manifest["stage"] == "embed" and "shards" in manifest:  # embed_gather's manifest
            name += " (gather)"
        seconds = manifest["wall_seconds"]
        rows.append(
            {
                "job": name,
                "seconds": seconds,
                "rows": count,
                "unit": unit,
                "rows_per_second": count / seconds if seconds else float("nan"),
                "peak_rss_gib": manifest["peak_rss_bytes"] / GIB,
                "msmarco_hours": seconds * msmarco_factor(manifest, settings) / 3600,
            }
        )
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "| job | seconds | throughput | peak RSS | MS MARCO estimate |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row['job']} | {row['seconds']:.1f} | {row['rows_per_second']:,.0f} "
            f"{row['unit']}/s | {row['peak_rss_gib']:.2f} GiB | {row['msmarco_hours']:.2f} h |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the generated BEIR folder")
    parser.add_argument("--model", type=Path, required=True, help="the static model folder")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--again", action="store_true", help="rerun every job (--forceall)")
    args = parser.parse_args()

    import duckdb
    import yaml

    from irflow.config import expand_config, load_schema, validate_config

    os.environ["IRFLOW_STATIC_MODEL"] = str(args.model)
    config = validate_config(
        expand_config(yaml.safe_load((REPO / "config" / "scale.yaml").read_text())),
        load_schema(REPO / "config" / "config.schema.yaml"),
    )
    wall = run_graph(args.workdir, args.data, args.model, args.cores, args.again)
    summary = json.loads((args.data / "summary.json").read_text())
    rows = stage_table(args.workdir, summary["documents"], summary["queries"], config)
    summary_table = args.workdir / "results" / "summary.parquet"
    quality = duckdb.sql(
        f"SELECT system, metric, value FROM read_parquet('{summary_table}') ORDER BY ALL"
    ).fetchall()
    out = REPO / "benchmarks" / "out" / "scale.json"
    out.parent.mkdir(exist_ok=True)
    result = {
        "documents": summary["documents"],
        "queries": summary["queries"],
        "cores": args.cores,
        "snakemake_seconds": wall,
        "peak_rss_gib_max": max(row["peak_rss_gib"] for row in rows),
        "jobs": rows,
        "quality": quality,
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(rows))
    print(f"\nwhole graph: {wall / 60:.1f} min on {args.cores} cores; written to {out}")


if __name__ == "__main__":
    main()
