"""How long `snakemake -n` takes to plan a large experiment, and how much memory it needs.

The experiment is N datasets x M dense models + BM25 + 3 rerankers, every dataset a copy of
one tiny BEIR-layout folder and every model the local all-MiniLM-L6-v2 folder under its own
name (a dry run loads no model, but irflow reads a local model's file list). The dry run
starts in an empty working directory, as a first run would, so every job is planned.

    .venv/bin/python benchmarks/dag_size.py            # 20 x 20 and 100 x 20
    .venv/bin/python benchmarks/dag_size.py --sizes 100x20 --repeats 1
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from _harness import local_minilm, report

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = Path(sys.executable).parent / "snakemake"
RERANKERS = 3


def write_dataset(folder: Path) -> None:
    """The smallest BEIR layout the download rule accepts."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "a document"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "a query"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")


def experiment(datasets: int, models: int, data: Path, model: str) -> dict:
    names = [f"model{m:02d}" for m in range(models)]
    rerankers = [f"reranker{r}" for r in range(RERANKERS)]
    return {
        "datasets": {f"dataset{d:03d}": {"source": {"path": str(data)}} for d in range(datasets)},
        "models": {name: {"id": model} for name in names},
        "retrievers": {"bm25": {"type": "bm25"}}
        | {name: {"type": "dense", "model": name} for name in names},
        "rerankers": {name: {"type": "cross-encoder", "id": model} for name in rerankers},
        "reranking": [{"first_stage": "bm25", "reranker": name, "k": [100]} for name in rerankers],
    }


def dry_run(config: Path, workdir: Path) -> dict:
    """Job count, wall and CPU seconds and peak RSS (of the snakemake process) of one dry run.
    CPU seconds are the steadier figure on a machine shared with other work."""
    command = [
        str(SNAKEMAKE),
        "-n",
        "--quiet",
        "rules",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--configfile",
        str(config),
        "--directory",
        str(workdir),
        "--cores",
        "1",
    ]
    # The peak of the one child this call waits for: RUSAGE_CHILDREN keeps the largest child
    # seen, so each dry run is measured in its own short-lived Python that forks it.
    probe = (
        "import resource, subprocess, sys, time;"
        "t = time.perf_counter();"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
        "s = time.perf_counter() - t;"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN);"
        "sys.stdout.write(f'{s} {u.ru_utime + u.ru_stime} {u.ru_maxrss}\\n');"
        "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr); sys.exit(p.returncode)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *command], capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode:
        sys.exit(f"snakemake -n failed:\n{done.stdout}\n{done.stderr}")
    first, _, summary = done.stdout.partition("\n")
    seconds, cpu_seconds, peak_kib = first.split()
    total = re.search(r"^total\s+(\d+)", summary, re.MULTILINE)
    if not total:
        sys.exit(f"no job count in snakemake's summary:\n{summary}")
    return {
        "jobs": int(total[1]),
        "seconds": float(seconds),
        "cpu_seconds": float(cpu_seconds),
        "peak_mib": int(peak_kib) / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["20x20", "100x20"], help="DATASETSxMODELS")
    parser.add_argument("--repeats", type=int, default=3, help="dry runs per size; best is kept")
    args = parser.parse_args()
    model = local_minilm()
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "data" / "tiny"
        write_dataset(data)
        for size in args.sizes:
            datasets, models = (int(n) for n in size.split("x"))
            config = Path(scratch) / f"{size}.yaml"
            config.write_text(yaml.safe_dump(experiment(datasets, models, data, model)))
            runs = [
                dry_run(config, Path(tempfile.mkdtemp(dir=scratch))) for _ in range(args.repeats)
            ]
            best = min(runs, key=lambda run: run["seconds"])
            results |= {
                f"{size} jobs": best["jobs"],
                f"{size} seconds (best of {args.repeats})": best["seconds"],
                f"{size} CPU seconds (same run)": best["cpu_seconds"],
                f"{size} peak RSS MiB": max(run["peak_mib"] for run in runs),
            }
    report("dag_size", results)


if __name__ == "__main__":
    main()
