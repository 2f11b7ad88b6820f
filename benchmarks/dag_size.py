"""How long `snakemake -n` takes to plan a large experiment, and how much memory it needs,
against Snakemake's own floor for the same graph.

The experiment is N datasets x M dense models + BM25 + 3 rerankers, every dataset a copy of
one tiny BEIR-layout folder and every model the local all-MiniLM-L6-v2 folder under its own
name (a dry run loads no model, but irflow reads a local model's file list). The dry run
starts in an empty working directory, as a first run would, so every job is planned.

The floor is a trivial twin of irflow's graph: one shell rule per irflow rule, with the same
output and log patterns, the same wildcards (constrained to the values the jobs take) and the
same input files per job, looked up in a table: so the same jobs, files and edges, without
irflow's imports, config checks, input functions, params, resources or script directives. The
twin is written from irflow's own verbose dry run, and its plan is checked to be the same jobs
with the same files before anything is timed.

    .venv/bin/python benchmarks/dag_size.py            # 20 x 20 and 100 x 20
    .venv/bin/python benchmarks/dag_size.py --sizes 100x20 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
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
        "datasets": {
            f"dataset{d:03d}": {"source": {"type": "path", "path": str(data)}}
            for d in range(datasets)
        },
        "models": {name: {"id": model} for name in names},
        "retrievers": {"bm25": {"type": "bm25"}}
        | {name: {"type": "dense", "model": name} for name in names},
        "rerankers": {name: {"type": "cross-encoder", "id": model} for name in rerankers},
        "reranking": [{"first_stage": "bm25", "reranker": name, "k": [100]} for name in rerankers],
    }


def snakemake_command(snakefile: Path, config: Path, workdir: Path) -> list[str]:
    return [
        str(SNAKEMAKE),
        "-n",
        "--snakefile",
        str(snakefile),
        "--configfile",
        str(config),
        "--directory",
        str(workdir),
        "--cores",
        "1",
    ]


# Bytecode as a user's install has it: this machine sets PYTHONDONTWRITEBYTECODE, which would
# make every dry run compile Snakemake and irflow anew.
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def planned_jobs(snakefile: Path, config: Path, workdir: Path) -> list[dict]:
    """Each job of a verbose dry run: its rule, wildcards, input, output and log files."""
    done = subprocess.run(
        snakemake_command(snakefile, config, workdir),
        capture_output=True,
        text=True,
        env=ENVIRONMENT,
    )
    if done.returncode:
        sys.exit(f"snakemake -n failed:\n{done.stdout}\n{done.stderr}")
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", done.stdout):
        header = re.match(r"(?:local)?rule (\w+):", block.strip())
        if header is None:
            continue
        fields = dict(re.findall(r"^\s+(input|output|log|wildcards): (.+)$", block, re.M))
        # A file that exists before the run (config/reference/published.yaml, which the
        # aggregate rule reads) is printed with Snakemake's " (cached)" after its name.
        files = {
            key: [f.removesuffix(" (cached)") for f in fields[key].split(", ")]
            if key in fields
            else []
            for key in FILE_FIELDS
        }
        pairs = fields.get("wildcards")
        wildcards = dict(pair.split("=", 1) for pair in pairs.split(", ")) if pairs else {}
        jobs.append({"rule": header[1], "wildcards": wildcards} | files)
    return jobs


FILE_FIELDS = ("input", "output", "log")


def as_pattern(path: str, wildcards: dict) -> str:
    """``path`` with each wildcard's value, where it stands as a whole name part, put back as
    ``{wildcard}`` (longest values first, so that a value inside another is not split)."""
    for name, value in sorted(wildcards.items(), key=lambda item: -len(item[1])):
        path = re.sub(rf"(?<![\w{{]){re.escape(value)}(?![\w}}])", f"{{{name}}}", path)
    return path


def job_key(wildcards: dict) -> str:
    return ",".join(f"{name}={value}" for name, value in sorted(wildcards.items()))


def write_twin(jobs: list[dict], folder: Path) -> Path:
    """The trivial Snakefile with the same jobs, files and edges as ``jobs`` (see above)."""
    rules: dict[str, dict] = {}
    for job in jobs:
        patterns = {
            key: [as_pattern(f, job["wildcards"]) for f in job[key]] for key in ("output", "log")
        }
        rule = rules.setdefault(job["rule"], {"patterns": patterns, "inputs": {}, "values": {}})
        if patterns != rule["patterns"]:
            sys.exit(
                f"rule {job['rule']}: no one pattern for its jobs: {patterns} {rule['patterns']}"
            )
        rule["inputs"][job_key(job["wildcards"])] = job["input"]
        for name, value in job["wildcards"].items():
            rule["values"].setdefault(name, set()).add(value)
    (folder / "inputs.json").write_text(
        json.dumps({name: rule["inputs"] for name, rule in rules.items()})
    )
    lines = [
        "import json",
        f"INPUTS = json.loads(open({str(folder / 'inputs.json')!r}).read())",
        "",
        "def inputs_of(rule):",
        "    return lambda w: INPUTS[rule][",
        "        ','.join(f'{k}={v}' for k, v in sorted(w.items()))",
        "    ]",
        "",
    ]
    # The rule without wildcards that names every target comes first: Snakemake's default.
    order = sorted(rules, key=lambda name: name != jobs_target(jobs))
    for name in order:
        rule = rules[name]
        lines += [f"rule {name}:", f"    input: inputs_of({name!r})"]
        for key in ("output", "log"):
            if rule["patterns"][key]:
                lines.append(f"    {key}: {', '.join(map(repr, rule['patterns'][key]))}")
        if rule["values"]:
            lines.append("    wildcard_constraints:")
            for wildcard, values in sorted(rule["values"].items()):
                choice = "|".join(re.escape(v) for v in sorted(values))
                lines.append(f"        {wildcard}={choice!r},")
        lines += ['    shell: "touch {output} {log}"', ""]
    snakefile = folder / "Snakefile"
    snakefile.write_text("\n".join(lines))
    return snakefile


def jobs_target(jobs: list[dict]) -> str:
    """The rule of the job that nothing else needs: the workflow's default target."""
    needed = {f for job in jobs for f in job["input"]}
    targets = [job["rule"] for job in jobs if not set(job["output"]) & needed]
    if len(targets) != 1:
        sys.exit(f"expected one default target, found {targets}")
    return targets[0]


def same_graph(mine: list[dict], twins: list[dict]) -> bool:
    def files(jobs):
        return sorted((job["rule"], *sorted(job["output"]), *sorted(job["input"])) for job in jobs)

    return files(mine) == files(twins)


def dry_run(snakefile: Path, config: Path, workdir: Path) -> dict:
    """Job count, wall and CPU seconds and peak RSS (of the snakemake process) of one dry run.
    CPU seconds are the steadier figure on a machine shared with other work."""
    command = snakemake_command(snakefile, config, workdir) + ["--quiet", "rules"]
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
        [sys.executable, "-c", probe, *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENVIRONMENT,
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
    parser.add_argument("--repeats", type=int, default=3, help="dry runs of each per size")
    args = parser.parse_args()
    print("command:", shlex.join([Path(sys.executable).name, *sys.argv]))
    model = local_minilm()
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "data" / "tiny"
        write_dataset(data)
        for size in args.sizes:
            datasets, models = (int(n) for n in size.split("x"))
            config = Path(scratch) / f"{size}.yaml"
            config.write_text(yaml.safe_dump(experiment(datasets, models, data, model)))
            snakefiles = {"irflow": ROOT / "Snakefile"}
            jobs = planned_jobs(snakefiles["irflow"], config, Path(tempfile.mkdtemp(dir=scratch)))
            twin = Path(tempfile.mkdtemp(dir=scratch))
            snakefiles["twin"] = write_twin(jobs, twin)
            twin_jobs = planned_jobs(
                snakefiles["twin"], config, Path(tempfile.mkdtemp(dir=scratch))
            )
            if not same_graph(jobs, twin_jobs):
                sys.exit(f"{size}: the twin Snakefile ({snakefiles['twin']}) plans another graph")
            # Taking turns, so that a change in the machine's load falls on both alike.
            runs = {name: [] for name in snakefiles}
            for _ in range(args.repeats):
                for name, snakefile in snakefiles.items():
                    workdir = Path(tempfile.mkdtemp(dir=scratch))
                    runs[name].append(dry_run(snakefile, config, workdir))
            for name, measured in runs.items():
                best = min(measured, key=lambda run: run["seconds"])
                results |= {
                    f"{size} {name} jobs": best["jobs"],
                    f"{size} {name} seconds (best of {args.repeats})": best["seconds"],
                    f"{size} {name} CPU seconds (same run)": best["cpu_seconds"],
                    f"{size} {name} peak RSS MiB": max(run["peak_mib"] for run in measured),
                }
            for figure in ("seconds", "cpu_seconds"):
                paired = [
                    mine[figure] / theirs[figure]
                    for mine, theirs in zip(runs["irflow"], runs["twin"])
                ]
                results[f"{size} irflow / twin, {figure} (median of rounds)"] = statistics.median(
                    paired
                )
    report("dag_size", results)


if __name__ == "__main__":
    main()
