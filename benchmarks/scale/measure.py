"""Scale: the graph on generated corpora of two sizes, with time and peak memory per job, and
each extrapolated to MS MARCO through the line the two sizes draw.

Runs ``snakemake --configfile config/scale.yaml`` once per corpus, each in a work folder of its
own (the corpus linked in as ``data/synthetic-1m``, the dataset name the config uses), then
reads every job's manifest: its wall time and the peak resident memory of its process
(``peak_rss_bytes``). Both corpora have the same queries, so the two runs differ only in
documents. For every job it draws the straight line through the two points, seconds against
documents and peak RSS against documents, and reads it at MS MARCO's 8,841,823 passages. What
grows with queries as well (the search part of retrieve jobs, and score) is then scaled from
the corpora's queries to MS MARCO's 6,980 dev queries: a query's work does not depend on the
others. Memory is not scaled by queries: the run a retrieve or score job holds grows with
queries x top_k (7 M rows at MS MARCO), which ``irflow.workflow.resources`` models per run row.

    python benchmarks/scale/make_corpus.py --out /data/synthetic-1m
    python benchmarks/scale/make_corpus.py --out /data/synthetic-2m --documents 2000000
    python benchmarks/scale/distill_static.py --out /data/minilm-static
    python benchmarks/scale/measure.py --data /data/synthetic-1m /data/synthetic-2m \\
        --model /data/minilm-static --workdir /data/scale-run

Writes benchmarks/out/scale.json and prints the Markdown table docs/validation.md quotes.
"""

from __future__ import annotations

import argparse
import json
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


def query_share(manifest: dict) -> float:
    """The share of a job's time that grows with the number of queries."""
    if manifest["stage"] == "score":
        return 1.0
    if manifest["stage"] == "retrieve":
        return min(1.0, manifest["search_seconds"] / manifest["wall_seconds"])
    return 0.0


def jobs(workdir: Path) -> dict[str, dict]:
    """Every job's manifest that records its peak memory, by a name for the job."""
    found = {}
    for path in sorted((workdir / "results" / "manifests").rglob("*.json")):
        manifest = json.loads(path.read_text())
        if "peak_rss_bytes" not in manifest:
            continue
        name = str(path.relative_to(workdir / "results" / "manifests").with_suffix(""))
        if manifest["stage"] == "embed" and "shards" in manifest:  # embed_gather's manifest
            name += " (gather)"
        found[name] = manifest
    return found


def through(x0: float, y0: float, x1: float, y1: float, x: float) -> float:
    """The line through (x0, y0) and (x1, y1), read at x."""
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def extrapolate(sizes: list[dict]) -> list[dict]:
    """Per job: seconds and peak RSS at each size, and both read at MS MARCO's size."""
    small, large = sizes
    rows = []
    for name, first in small["jobs"].items():
        second = large["jobs"].get(name)
        if second is None:
            continue
        points = (small["documents"], large["documents"])
        seconds = (first["wall_seconds"], second["wall_seconds"])
        peaks = (first["peak_rss_bytes"] / GIB, second["peak_rss_bytes"] / GIB)
        # The query-driven share of the time, scaled to MS MARCO's queries.
        queries = MSMARCO_QUERIES / small["queries"]
        share = query_share(second)
        msmarco_seconds = through(points[0], seconds[0], points[1], seconds[1], MSMARCO_DOCUMENTS)
        msmarco_seconds *= 1 - share + share * queries
        rows.append(
            {
                "job": name,
                "seconds": seconds,
                "peak_rss_gib": peaks,
                "msmarco_hours": max(msmarco_seconds, max(seconds)) / 3600,
                "msmarco_peak_gib": max(
                    through(points[0], peaks[0], points[1], peaks[1], MSMARCO_DOCUMENTS),
                    max(peaks),
                ),
            }
        )
    return rows


def markdown(rows: list[dict], sizes: list[dict]) -> str:
    labels = [f"{size['documents'] / 1e6:g} M" for size in sizes]
    lines = [
        f"| job | seconds at {' / '.join(labels)} | peak RSS at {' / '.join(labels)} "
        "| MS MARCO: time | MS MARCO: peak RSS |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        seconds = " / ".join(f"{s:.1f}" for s in row["seconds"])
        peaks = " / ".join(f"{p:.2f}" for p in row["peak_rss_gib"])
        lines.append(
            f"| {row['job']} | {seconds} | {peaks} GiB | {row['msmarco_hours']:.2f} h "
            f"| {row['msmarco_peak_gib']:.2f} GiB |"
        )
    return "\n".join(lines)


def quality(workdir: Path) -> list:
    import duckdb

    summary = workdir / "results" / "summary.parquet"
    return duckdb.sql(
        f"SELECT system, metric, value FROM read_parquet('{summary}') ORDER BY ALL"
    ).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data", type=Path, nargs=2, required=True, help="two generated BEIR folders"
    )
    parser.add_argument("--model", type=Path, required=True, help="the static model folder")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--again", action="store_true", help="rerun every job (--forceall)")
    args = parser.parse_args()

    sizes = []
    for data in args.data:
        workdir = args.workdir / data.name
        wall = run_graph(workdir, data, args.model, args.cores, args.again)
        summary = json.loads((data / "summary.json").read_text())
        sizes.append(
            {
                "data": str(data),
                "documents": summary["documents"],
                "queries": summary["queries"],
                "snakemake_seconds": wall,
                "jobs": jobs(workdir),
                "quality": quality(workdir),
            }
        )
    if sizes[0]["queries"] != sizes[1]["queries"] or sizes[0]["documents"] >= sizes[1]["documents"]:
        raise SystemExit("--data: the same queries, and the second corpus the larger")
    rows = extrapolate(sizes)
    out = REPO / "benchmarks" / "out" / "scale.json"
    out.parent.mkdir(exist_ok=True)
    result = {"cores": args.cores, "sizes": sizes, "jobs": rows}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(rows, sizes))
    for size in sizes:
        print(
            f"{size['documents']:,} documents: whole graph {size['snakemake_seconds'] / 60:.1f} "
            f"min on {args.cores} cores; nDCG@10 "
            + ", ".join(f"{s} {v:.3f}" for s, m, v in size["quality"] if m == "ndcg_cut_10")
        )
    print(f"written to {out}")


if __name__ == "__main__":
    main()
