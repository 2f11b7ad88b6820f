"""Run manifests: what produced a result, so a number can be traced and reproduced."""

from __future__ import annotations

import json
import platform
import resource
import socket
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from irflow.core import atomic, records

PACKAGES = (
    "irflow",
    "snakemake",
    "torch",
    "sentence-transformers",
    "transformers",
    "faiss-cpu",
    "faiss-gpu",
    "bm25s",
    "PyStemmer",
    "pyserini",  # its wheel ships the Anserini jar the lucene family runs
    "pyjnius",
    "pytrec-eval-terrier",
    "pyarrow",
    "pandas",
    "duckdb",
    "numpy",
)


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def peak_rss_bytes() -> int:
    """The most resident memory this process (the job's script) or a child of it has held."""
    most = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    return most if sys.platform == "darwin" else 1024 * most  # KiB on Linux, bytes on macOS


class Manifest:
    """Collects facts during a job and writes them, with timing and environment, as JSON: the
    record of its stage (irflow.core.records), checked before it is written."""

    def __init__(self, path: str | Path, **facts):
        self.path = Path(path)
        self.facts = facts
        self.started = time.perf_counter()
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")

    def add(self, **facts) -> None:
        self.facts.update(facts)

    def write(self) -> None:
        record = self.facts | {
            "started_at": self.started_at,
            "wall_seconds": round(time.perf_counter() - self.started, 3),
            "peak_rss_bytes": peak_rss_bytes(),
            "host": socket.gethostname(),
            "python": platform.python_version(),
            "packages": package_versions(),
        }
        records.check(record)
        text = json.dumps(record, indent=2, sort_keys=True, default=str) + "\n"
        atomic.write_text(self.path, text)
