"""Every benchmark runs, at a smoke size, as benchmarks/README.md runs it: a script that no longer
fits the code it measures fails here (embed_backends.py died of KeyError 'similarity' and
dag_size.py's twin Snakefile of a missing config/reference/published.yaml, unnoticed, until
this test). Each runs on a small cut of SciFact (or generated data) with the shipped MiniLM,
offline, and must exit 0 and print its figures."""

from __future__ import annotations

import gzip
import os
import re
import shlex
import subprocess
import sys

import pytest
from conftest import REPO, scifact_subset
from tiny_models import build_tiny_sentence_transformer

BENCHMARKS = REPO / "benchmarks"
# Each benchmark's smoke arguments ({data}: a SciFact cut; {work}: a scratch folder; {corpus1}
# and {corpus2}: make_corpus.py's two small corpora; {static}: distill_static.py's model;
# {teacher}: a tiny random model, the one it distils and the ONNX benchmarks export) and a
# pattern its output must show: its ratio (irflow over the bare library) where it has one,
# else its figures. The scale steps run in this order, bm25_memory.py reading make_corpus.py's.
SMOKE = {
    "bm25_retrieval.py": (
        "--dataset {data} --repeats 1 --top-k 10",
        r"irflow_time_over_bare\s+\d",
    ),
    "dag_size.py": ("--sizes 1x1 --repeats 1", r"1x1 irflow / twin, cpu_seconds.*\s\d"),
    "embed_backends.py": (
        "--dataset {data} --model {teacher} --docs 4 --repeats 1 --threads 1 --backends onnx",
        r"onnx_over_bare_median_paired\s+\d",
    ),
    "embed_throughput.py": ("--dataset {data} --docs 8 --repeats 1", r"irflow_time_over_bare\s+\d"),
    "exact_search_memory.py": (
        "--rows 2000 --dim 16 --queries 10 --top-k 10 --shard-rows 1000 --threads 1",
        r"2,000 rows: runs equal byte for byte: True; time over the raw faiss call: sharded \d",
    ),
    "external_run_memory.py": (
        "--lines 2000 --docs 200 --top-k 10 --deep 100",
        r"\| few-queries \| 2,000 \|",
    ),
    "filter_throughput.py": (
        "--dataset {data} --documents 40 --repeats 1 --workers 1",
        r"_time_over_bare\s+\d",
    ),
    "index_memory.py": ("--type flat --dim 16 --rows 1000 1100", r"\| 1,000 \|"),
    "late_interaction_size.py": ("--dataset {data} --docs 8", r"tokens_per_document\s+\d"),
    "late_interaction_voyager.py": (
        "--dataset {data} --docs 10 --queries 4 --top-k 5 --repeats 1",
        r"search_irflow_over_bare\s+\d",
    ),
    "onnx_quantization_choice.py": (
        "--data-dir {datasets} --model {teacher} --screen 4 --repeats 1 --threads 1"
        " --candidates matmul",
        r"matmul .* \d+\.\d+x bare",
    ),
    "parquet_checksums.py": ("--rows 1000 --dim 8 --repeats 1", r"read_ratio\s+\d"),
    "positionalize.py": (
        "--dataset {data} --length 512 --repeats 1",
        r"irflow_time_over_bare\s+\d",
    ),
    "rerank_biencoder.py": (
        "--dataset {data} --queries 2 --depth 10 --repeats 1",
        r"irflow_warm_over_bare\s+\d",
    ),
    "vector_encode_throughput.py": (
        "--dataset {data} --docs 8 --repeats 1",
        r"irflow_time_over_bare\s+\d",
    ),
    "scale/make_corpus.py": (
        "--out {corpus1} --documents 1000 --queries 4"
        " && --out {corpus2} --documents 2000 --queries 4",
        r'"documents": 2000',
    ),
    "scale/distill_static.py": (
        "--out {static} --teacher {teacher} --pca-dims 16",
        r'"seconds"',
    ),
    "scale/bm25_memory.py": ("{corpus1} {corpus2} --work {work}/bm25 --jobs 1", r"peak"),
    "scale/embed_memory.py": ("--workdir {work}/embed --rows 2000 4000 --chunk-size 512", r"\d"),
}


# Not run here, and why: each needs a workflow run of its own first.
NOT_SMOKED = {
    # two whole graphs of config/scale.yaml, whose IVF-PQ index (4,000 and 5,656 lists) needs
    # corpora of some hundred thousand documents to train: minutes, not seconds
    "scale/measure.py": "runs config/scale.yaml twice on corpora of 10^5+ documents",
    # reads the embeddings and qrels of a workflow run (measure.py's or a user's)
    "index_quality.py": "reads a workflow run's embeddings",
    # two whole experiment folders, each a Snakemake run loading MiniLM (a minute at any size);
    # the path it times runs in CI in tests/test_vector_store.py and test_workflow.py's second
    # experiment folder
    "vector_store.py": "runs two whole experiment folders",
}


def benchmark_scripts() -> set[str]:
    """Every benchmark script (the harness and helper modules, named _*.py, apart)."""
    return {
        str(path.relative_to(BENCHMARKS))
        for path in BENCHMARKS.rglob("*.py")
        if not path.name.startswith("_") and "out" not in path.parts
    }


def test_every_benchmark_has_a_smoke_run():
    """A benchmark added without one (or a reason it has none) fails here rather than rot
    unrun."""
    assert benchmark_scripts() == set(SMOKE) | set(NOT_SMOKED)
    assert not set(SMOKE) & set(NOT_SMOKED)


# A command in a measured section: a script run with its flags, or a snakemake or pytest run.
COMMAND = re.compile(
    r"\b(benchmarks|scripts)/[\w/]+\.py\b[^`\n]*--|\.py` \(default|\.venv/bin/snakemake "
    r"|python -m pytest "
)


@pytest.mark.parametrize("page", ["benchmarks/README.md", "docs/validation.md"])
def test_every_measured_table_names_the_command_that_produced_it(page):
    """Each section (## or ###) with a table of measurements names its command. Before, six of
    benchmarks/README.md's did not (the first table, embed backends, sparse and
    late-interaction encoding, the Voyager index, index build memory, BM25 indexed once)."""
    text = (REPO / page).read_text(encoding="utf-8")
    fenced = re.compile(r"^```.*?^```", re.M | re.S)
    text = fenced.sub(lambda block: block[0].replace("\n#", "\n"), text)
    unnamed = [
        section.splitlines()[0]
        for section in re.split(r"^(?=#{2,3} )", text, flags=re.M)
        if re.search(r"^\|[ :-]*---", section, re.M) and not COMMAND.search(section)
    ]
    assert not unnamed, f"{page}: tables without their command: {unnamed}"


@pytest.fixture(scope="module")
def places(tmp_path_factory, shared_datasets, minilm_path) -> dict[str, str]:
    """The folders the smoke arguments name: a 5-query, 40-document cut of SciFact (its corpus
    gzipped, as BEIR ships it), an empty Hugging Face cache, a tiny random teacher on MiniLM's
    tokenizer (distilling MiniLM itself runs its 30,522 tokens through six layers: 10 minutes
    here) and scratch folders for the scale chain."""
    root = tmp_path_factory.mktemp("benchmarks")
    teacher = build_tiny_sentence_transformer(root / "teacher", minilm_path, "cosine")
    data = scifact_subset(shared_datasets / "scifact", root / "datasets" / "scifact", 5, 40)
    corpus = data / "corpus.jsonl"
    (data / "corpus.jsonl.gz").write_bytes(gzip.compress(corpus.read_bytes()))
    corpus.unlink()
    (root / "hf").mkdir()  # an empty Hugging Face cache: every benchmark runs offline
    return {
        "hf": str(root / "hf"),
        "teacher": str(teacher),
        "data": str(data),
        "datasets": str(root / "datasets"),
        "work": str(root / "work"),
        "corpus1": str(root / "corpora" / "synthetic-1m"),
        "corpus2": str(root / "corpora" / "synthetic-2m"),
        "static": str(root / "static"),
    }


@pytest.mark.e2e
@pytest.mark.parametrize("script", list(SMOKE))
def test_a_benchmark_runs_at_a_smoke_size(script, places):
    arguments, shows = SMOKE[script]
    output = ""
    for call in arguments.split(" && "):
        words = shlex.split(call.format(**places))
        result = subprocess.run(
            [sys.executable, str(BENCHMARKS / script), *words],
            cwd=REPO,
            capture_output=True,
            text=True,
            env=os.environ | {"HF_HUB_OFFLINE": "1", "HF_HOME": places["hf"]},
            check=False,
            timeout=600,
        )
        assert result.returncode == 0, (
            f"{script} {shlex.join(words)}: exit {result.returncode}\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
        output += result.stdout
    assert re.search(shows, output), f"{script} printed no {shows!r}:\n{output[-3000:]}"
