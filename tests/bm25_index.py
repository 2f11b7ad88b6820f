"""BM25 as the workflow runs it, for tests: the index_bm25 job's build and save, then a
retrieve job's memory-mapped search of the saved index."""

from __future__ import annotations

from pathlib import Path

from irflow.core.fingerprint import value_md5
from irflow.retrieval.bm25 import build_index, index_settings
from irflow.retrieval.retrieve import bm25_search


def indexed(corpus: Path, spec: dict) -> tuple[Path, dict]:
    """``corpus``'s index with ``spec``'s settings, saved beside it, and the build's facts."""
    folder = corpus.with_name(f"{corpus.stem}.{value_md5(index_settings(spec))[:8]}.bm25s")
    return folder, build_index(corpus, spec, folder)


def bm25_run(corpus: Path, queries: Path, spec: dict, top_k: int, remove_self_matches: bool,
             latency_queries: int = 0) -> tuple:  # fmt: skip
    """The run and timing of ``bm25_search`` over a fresh index of ``corpus``, with the
    index's facts in the timing as the cost table reads them."""
    folder, facts = indexed(Path(corpus), spec)
    run, timing = bm25_search(folder, queries, spec, top_k, remove_self_matches, latency_queries)
    return run, timing | facts
