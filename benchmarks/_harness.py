"""Timing helpers shared by the benchmarks: best-of-n wall time and a JSON report."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

OUT = Path(__file__).parent / "out"


def best_of(function, repeats: int) -> float:
    """The fastest of ``repeats`` runs: the least disturbed by other load on the machine."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def report(name: str, measurements: dict) -> None:
    OUT.mkdir(exist_ok=True)
    record = measurements | {"machine": platform.machine(), "python": platform.python_version()}
    (OUT / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    width = max(len(k) for k in measurements)
    for key, value in measurements.items():
        shown = f"{value:.4f}" if isinstance(value, float) else value
        print(f"{key:<{width}}  {shown}")
