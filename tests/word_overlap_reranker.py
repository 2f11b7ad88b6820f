"""A reranker written outside irflow, as a user would write one (tests/test_custom_reranker.py):
a document scores the share of its distinct words that the query holds. irflow runs it by
``type: python, class: word_overlap_reranker:WordDensity`` with this folder on PYTHONPATH."""

import re


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class WordDensity:
    def __init__(self, weight: float = 1.0):
        self.weight = weight

    def score(self, query: str, documents: list[str]) -> list[float]:
        terms = words(query)
        return [self.weight * len(terms & words(d)) / max(len(words(d)), 1) for d in documents]


class NoScore:
    """Not a reranker: it has no score method."""

    def rank(self, query: str, documents: list[str]) -> list[int]:
        return list(range(len(documents)))
