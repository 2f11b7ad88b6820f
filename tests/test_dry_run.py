"""What every `snakemake -n` pays for before planning a job: the modules the Snakefile imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import REPO

# Libraries a job imports where it uses them, never at a dry run: each costs 30-200 ms of every
# `snakemake -n` (faiss 0.19 s cold), or seconds (torch and what imports it). Snakemake imports
# pandas, numpy and pyarrow itself.
JOB_LIBRARIES = {
    "bm25s",
    "datasketch",
    "duckdb",
    "faiss",
    "filelock",
    "httpx",
    "onnxruntime",
    "openai",
    "scipy",
    "sentence_transformers",
    "torch",
    "transformers",
}


def snakefile_imports() -> list[str]:
    """The irflow modules the Snakefile and its rules import."""
    sources = [REPO / "Snakefile", *sorted((REPO / "rules").rglob("*.smk"))]
    pattern = re.compile(r"^\s*(?:from|import) (irflow[\w.]*)", re.MULTILINE)
    return sorted({name for path in sources for name in pattern.findall(path.read_text())})


def test_the_snakefiles_imports_leave_the_jobs_libraries_unimported():
    modules = snakefile_imports()
    assert "irflow.workflow.config" in modules and "irflow.retrieval.index" in modules
    probe = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        f"print(json.dumps(sorted(set(sys.modules) & {JOB_LIBRARIES!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert json.loads(done.stdout) == []
