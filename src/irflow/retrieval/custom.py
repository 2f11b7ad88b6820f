"""custom: a retriever written outside irflow, run as a first-stage system.

A config names it as ``type: python`` with ``class: my_pkg.module:MyRetriever``, or by the name
of an ``irflow.retrievers`` entry point (docs/retrievers.md). Its class implements ``Retriever``;
irflow gives it the dataset's filtered corpus and the queries' texts and writes its hits as any
retriever's run (``contracts.RUN``: trec_eval's order, top_k, self-matches removed).
"""

from __future__ import annotations

import importlib
import inspect
import time
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
import pyarrow as pa

from irflow.core import contracts
from irflow.retrieval.retrieve import TextSearcher
from irflow.retrieval.runs import SearchRequest


class Retriever(Protocol):
    """What a user's retriever class implements. irflow builds it as ``cls(**settings)`` with
    the retriever entry's ``settings`` block."""

    def index(self, corpus: pa.Table) -> None:
        """Take the corpus (``contracts.CORPUS``: doc_id, title, text), once per run."""

    def search(self, queries: list[str], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query text, in order: (rows of the corpus table, their scores), at most
        ``depth`` of them, in any order (irflow ranks them as trec_eval does)."""


# What a class needs to be run as a Retriever.
METHODS = ("index", "search")
PROTOCOL = "irflow's retriever protocol (irflow.retrieval.custom.Retriever)"


def load_class(reference: str) -> type:
    """The class ``reference`` names as ``package.module:Class``; ValueError for another form,
    ImportError or AttributeError when it is not there."""
    module_name, colon, name = reference.partition(":")
    if not colon or not module_name or not name:
        raise ValueError(f"{reference!r} is not of the form package.module:Class")
    found = importlib.import_module(module_name)
    for part in name.split("."):
        found = getattr(found, part)
    return found


def protocol_problem(
    user_class, methods: tuple[str, ...] = METHODS, protocol: str = PROTOCOL
) -> str | None:
    """Why ``user_class`` does not implement ``protocol``, whose ``methods`` it needs (None
    when it does): a Retriever, by default."""
    if not inspect.isclass(user_class):
        return f"{user_class!r} is not a class"
    missing = [m for m in methods if not callable(getattr(user_class, m, None))]
    if missing:
        return (
            f"{user_class.__module__}.{user_class.__qualname__} does not implement "
            f"{protocol}: no method " + ", ".join(missing)
        )
    return None


def class_problem(
    load, reference: str, methods: tuple[str, ...] = METHODS, protocol: str = PROTOCOL
) -> str | None:
    """Why the class that ``load()`` imports (named ``reference`` in the config) cannot be run:
    it does not import, or it does not implement ``protocol`` (None when it can)."""
    try:
        return protocol_problem(load(), methods, protocol)
    except (ImportError, AttributeError, ValueError) as error:
        return (
            f"cannot import {reference!r} ({type(error).__name__}: {error}); install its "
            "package or put its folder on PYTHONPATH"
        )


def custom_search(
    retriever: Retriever,
    corpus_path: Path,
    queries_path: Path,
    top_k: int,
    remove_self_matches: bool,
    latency_queries: int = 0,
) -> tuple[pd.DataFrame, dict]:
    """``retriever``'s run of the queries over the corpus, and its timing (as bm25_search's)."""
    request = SearchRequest(top_k, remove_self_matches, latency_queries)
    searcher = custom_searcher(retriever, corpus_path)
    return searcher.search(contracts.read_table(queries_path), request)


def custom_searcher(retriever: Retriever, corpus_path: Path) -> TextSearcher:
    """``retriever``, given the corpus, as a searcher of query texts; its searches' timing
    records how long ``index`` took."""
    corpus = contracts.read_table(corpus_path, columns=contracts.CORPUS.names)
    started = time.perf_counter()
    retriever.index(corpus)
    index_seconds = time.perf_counter() - started
    doc_ids = corpus.column("doc_id").combine_chunks()
    return TextSearcher(retriever, doc_ids, facts={"index_seconds": index_seconds})


@cache
def cached_class(reference: str) -> type:
    """Imported once per process: the config check and every job's settings name the same."""
    return load_class(reference)


class NamedClass:
    """What a ``type: python`` kind of thing (a retriever family, a reranker type) is: its
    class is the one the entry's ``class`` names."""

    type = "python"
    # The key of the entry that names the class.
    class_key = "class"

    def user_class(self, spec: dict) -> type:
        return cached_class(spec["class"])

    def class_reference(self, spec: dict) -> str:
        return spec["class"]


class EntryPointClass:
    """What ``type: <name>`` adds to a ``type: python`` kind of thing (a retriever family, a
    reranker type): its class is the one an installed package registers as the entry point of
    that name, and its entry takes ``settings`` as ``type: python`` does."""

    class_key = "type"

    def __init__(self, entry_point):
        self.entry_point = entry_point
        self.type = entry_point.name
        # Its fragment is the type python's (``schema_fragment``), not one of the schema's.
        self.python_def, self.schema_def = self.schema_def, None

    def schema_fragment(self, schema: dict) -> dict:
        """Its entry's fragment (irflow.core.plugins.Registry.with_installed): the type
        python's, with the entry point's name as its type and without ``class``, which the
        entry point names."""
        python = schema["$defs"][self.python_def]
        properties = {key: value for key, value in python["properties"].items() if key != "class"}
        return python | {
            "required": ["type"],
            "properties": properties | {"type": {"const": self.type}},
        }

    def class_reference(self, spec: dict) -> str:
        return self.entry_point.value

    def user_class(self, spec: dict) -> type:
        return self.entry_point.load()
