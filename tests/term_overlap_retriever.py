"""A retriever written outside irflow, as a user would write one (tests/test_custom_family.py):
a document scores the number of distinct query words it holds. irflow runs it by
``type: python, class: term_overlap_retriever:TermOverlap`` with this folder on PYTHONPATH."""

import re

import numpy as np


def words(text: str, lowercase: bool) -> set[str]:
    return set(re.findall(r"\w+", text.lower() if lowercase else text))


class TermOverlap:
    def __init__(self, lowercase: bool = True):
        self.lowercase = lowercase

    def index(self, corpus) -> None:
        titles, texts = corpus.column("title").to_pylist(), corpus.column("text").to_pylist()
        self.documents = [words(f"{t} {x}", self.lowercase) for t, x in zip(titles, texts)]

    def search(self, queries: list[str], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        hits = []
        for query in queries:
            terms = words(query, self.lowercase)
            scores = np.array([len(terms & document) for document in self.documents], float)
            rows = np.flatnonzero(scores)
            rows = rows[np.argsort(-scores[rows], kind="stable")[:depth]]
            hits.append((rows, scores[rows]))
        return hits


class NoSearch:
    """Not a retriever: it has no search method."""

    def index(self, corpus) -> None:
        pass
