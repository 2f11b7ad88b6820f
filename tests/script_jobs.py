"""Workflow scripts run as Snakemake runs them, for tests: in a fresh interpreter, each with the
parts of the snakemake object it reads."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

# Runs workflow scripts, in one process, each with the parts of the snakemake object it reads
# (from JSON: each dict but the config as Snakemake's named list, whose lists stay lists, as
# Snakemake's inputs); then prints the names of the modules the process imported.
SCRIPT_DRIVER = """
import json, runpy, sys
from types import SimpleNamespace
from snakemake.iocontainers import Namedlist
sys.path.insert(0, sys.argv[1])
for script, parts in json.loads(sys.argv[2]):
    snakemake = SimpleNamespace(**{
        k: Namedlist(fromdict=v) if isinstance(v, dict) and k != "config" else v
        for k, v in parts.items()
    })
    runpy.run_path(script, init_globals={"snakemake": snakemake}, run_name="__main__")
print(json.dumps(sorted(sys.modules)))
"""


def run_scripts(jobs: dict[str, dict]) -> list[str]:
    """Run ``scripts/<name>.py`` with the snakemake object's parts, for each name of ``jobs``,
    in the current folder; the modules the interpreter imported."""
    scripts = REPO / "scripts"
    jobs = [(str(scripts / f"{name}.py"), parts | {"log": []}) for name, parts in jobs.items()]
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT_DRIVER, str(scripts), json.dumps(jobs)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])
