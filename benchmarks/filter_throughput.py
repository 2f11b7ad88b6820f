"""filter: documents per second of irflow's filter stage, by which filters are on, and the two
filters backed by a library against that library called bare on the same texts.

- basic: the default rules (empty documents), what every run of the workflow pays;
- gopher: the Arctic-Embed / Gopher quality measures but language (pure Python, no library to
  compare);
- language: py3langid only (``identifier: py3langid``, the named variant; fastText's
  classifier is the default since issue 50), against bare py3langid
  (``LanguageIdentifier.rank`` with normalised probabilities) on every document;
- near_duplicates: MinHash LSH only, against bare datasketch (a ``MinHash`` of the same
  shingles per document, as datasketch documents it, LSH query and insert with irflow's
  banding, estimated Jaccard of each candidate);
- all: everything at once, in one process and in ``--workers`` processes (the quality
  measures and MinHash signatures in the workers, the LSH index in the main process);
  ``all_workers_speedup`` is the one-process time over the workers' time.

irflow's times include reading the corpus Parquet, writing the kept rows and the audit.
``--documents`` takes the corpus's first documents (default: all of them, ArguAna's 8,674, so
that starting the worker processes, a fraction of a second, does not decide the speedup); the
minutes per million documents are extrapolated linearly. The load average before and after
the run is recorded, and CPU seconds (of the process and its workers) beside wall time: other
jobs on a shared machine change the wall times, and with them the workers' speedup, far more
than the CPU a run spends. So ``*_cpu_minutes_per_million``, ``*_cpu_over_bare``,
``all_workers_cpu_over_one_process`` (what the workers add) and ``all_workers_main_cpu_share``
(what stays in the main process) can be compared across runs on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
from _harness import best_of, report
from datasketch import LeanMinHash, MinHash, MinHashLSH
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from irflow.core.contracts import document_texts
from irflow.data.dedup import lsh_bands, shingles
from irflow.data.filter import run_filter
from irflow.data.ingest import ingest
from irflow.data.quality import FILTERS, Document, expected_language_probability
from irflow.workflow.config import load_schema, validate_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(REPO / "config" / "config.schema.yaml")
# Every quality filter but language identification.
GOPHER = [name for name in FILTERS if name != "language"]
# Language identification by py3langid, the library the bare run calls.
PY3LANGID = {"language": {"identifier": "py3langid"}}


def rules(quality: list[str], near_duplicates: bool) -> dict:
    """The validated ``filter`` block with these filters on and the schema's defaults."""
    config = {
        "datasets": {"d": {"source": {"type": "url", "url": "https://example.org/d.zip"}}},
        "retrievers": {"r": {"type": "bm25"}},
        "filter": {
            "quality": {name: {"enabled": True} | PY3LANGID.get(name, {}) for name in quality},
            "near_duplicates": {"enabled": near_duplicates},
        },
    }
    return validate_config(config, SCHEMA)["filter"]


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds of this process and of its finished child processes (the workers)."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def counted(function, name: str, cpu: dict) -> Callable[[], None]:
    """``function``, keeping in ``cpu[name]`` the (own, children) CPU seconds of its cheapest
    run."""

    def run() -> None:
        before = cpu_seconds()
        function()
        used = tuple(after - start for after, start in zip(cpu_seconds(), before))
        cpu[name] = min(cpu.get(name, used), used, key=sum)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/arguana"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--documents", type=int, default=None, help="the first N documents")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]

    settings = {
        "basic": rules([], False),
        "gopher": rules(GOPHER, False),
        "language": rules(["language"], False),
        "near_duplicates": rules([], True),
        "all": rules(list(FILTERS), True),
    }
    workers = {name: 1 for name in settings} | {"all_workers": args.workers}
    settings["all_workers"] = settings["all"]
    near = settings["near_duplicates"]["near_duplicates"]

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus_file = next(args.dataset.glob("corpus.jsonl*"))
        ingest(
            corpus_file, args.dataset / "queries.jsonl", args.dataset / "qrels" / "test.tsv", tmp
        )
        corpus = pq.read_table(tmp / "corpus.parquet")
        if args.documents is not None:
            corpus = corpus.slice(0, args.documents)
            pq.write_table(corpus, tmp / "corpus.parquet")
        texts = document_texts(
            corpus.column("title").to_pylist(), corpus.column("text").to_pylist()
        )

        def irflow(name: str):
            def run() -> None:
                out = tmp / name
                run_filter(
                    tmp / "corpus.parquet",
                    tmp / "queries.parquet",
                    tmp / "qrels.parquet",
                    settings[name],
                    out_corpus=out / "corpus.parquet",
                    out_queries=out / "queries.parquet",
                    out_audit=out / "audit.parquet",
                    out_clusters=out / "clusters.parquet",
                    workers=workers[name],
                )

            return run

        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)

        def bare_language() -> None:
            for text in texts:
                identifier.rank(text)

        def bare_near_duplicates() -> None:
            bands = lsh_bands(near["threshold"], near["permutations"])
            lsh = MinHashLSH(num_perm=near["permutations"], params=bands)
            signatures = {}
            for position, text in enumerate(texts):
                grams = shingles(text, near["shingle_words"])
                if not grams:
                    continue
                minhash = MinHash(num_perm=near["permutations"], seed=near["seed"])
                minhash.update_batch([g.encode() for g in grams])
                minhash = LeanMinHash(minhash)
                for other in lsh.query(minhash):
                    minhash.jaccard(signatures[other])
                lsh.insert(position, minhash)
                signatures[position] = minhash

        # Load irflow's copy of the model before timing, as the bare one is loaded above.
        expected_language_probability(Document("warm up"), "en", identifier="py3langid")
        functions = {f"irflow_{name}": irflow(name) for name in settings}
        functions |= {"bare_language": bare_language, "bare_near_duplicates": bare_near_duplicates}
        cpu: dict[str, tuple[float, float]] = {}
        seconds = best_of(
            {name: counted(f, name, cpu) for name, f in functions.items()}, args.repeats
        )

    documents = len(texts)
    measurements: dict = {
        "dataset": args.dataset.name,
        "documents": documents,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }
    for name in settings:
        measurements[f"{name}_docs_per_second"] = documents / seconds[f"irflow_{name}"]
        # Extrapolated linearly: the filters' cost per document does not grow with the corpus
        # (near-duplicates index one signature per cluster).
        measurements[f"{name}_minutes_per_million"] = (
            seconds[f"irflow_{name}"] / documents * 1e6 / 60
        )
        measurements[f"{name}_cpu_minutes_per_million"] = (
            sum(cpu[f"irflow_{name}"]) / documents * 1e6 / 60
        )
    measurements["all_workers_speedup"] = seconds["irflow_all"] / seconds["irflow_all_workers"]
    # CPU seconds, which other jobs on the machine change far less than wall time: what the
    # workers add to the work, and the share left in the main process.
    one, (main, workers) = sum(cpu["irflow_all"]), cpu["irflow_all_workers"]
    measurements["all_workers_cpu_over_one_process"] = (main + workers) / one
    measurements["all_workers_main_cpu_share"] = main / (main + workers)
    for name in ("language", "near_duplicates"):
        measurements[f"bare_{name}_docs_per_second"] = documents / seconds[f"bare_{name}"]
        # The basic rules and the Parquet input and output are paid by every configuration.
        measurements[f"{name}_time_over_bare"] = seconds[f"irflow_{name}"] / seconds[f"bare_{name}"]
        measurements[f"{name}_added_time_over_bare"] = (
            seconds[f"irflow_{name}"] - seconds["irflow_basic"]
        ) / seconds[f"bare_{name}"]
        measurements[f"{name}_cpu_over_bare"] = sum(cpu[f"irflow_{name}"]) / sum(
            cpu[f"bare_{name}"]
        )
    report("filter_throughput", measurements)


if __name__ == "__main__":
    main()
