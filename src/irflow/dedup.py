"""Near-duplicate documents, found with MinHash LSH (datasketch).

A document is a set of word shingles (``shingle_words`` consecutive lower-cased word tokens).
MinHash LSH proposes pairs whose Jaccard similarity is likely above ``threshold``; a pair is
linked when the MinHash estimate of its Jaccard similarity reaches the threshold, and linked
documents form a cluster (transitively, so two members may be less alike than the
threshold, each being close to a third).

Which member of a cluster is kept is decided by the documents alone, never by hash order: the
first judged document in corpus order, else the first document in corpus order. Keeping a
judged document keeps the scores of its queries comparable. The others are removed (or, when
judged and the filter flags judged documents, kept and flagged). Every member's exact Jaccard
similarity to the kept one is recorded, so a cluster can be checked by eye.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa
from datasketch import LeanMinHash, MinHash, MinHashLSH

CLUSTERS = pa.schema(
    [
        ("cluster", pa.string()),  # the doc_id of the document the cluster keeps
        ("doc_id", pa.string()),
        ("position", pa.int64()),  # row number in the corpus
        ("kept", pa.bool_()),
        ("judged", pa.bool_()),
        ("jaccard", pa.float64()),  # exact Jaccard similarity of shingle sets to the kept one
        ("estimated_jaccard", pa.float64()),  # the MinHash estimate of the same
        ("size", pa.int64()),
    ]
)
TOKEN = re.compile(r"\w+")


def shingles(text: str, size: int) -> set[str]:
    """The word ``size``-grams of ``text``, lower-cased and without punctuation; a text shorter
    than ``size`` words is one shingle, an empty one none."""
    words = TOKEN.findall(text.lower())
    if len(words) <= size:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i : i + size]) for i in range(len(words) - size + 1)}


def jaccard(left: set[str], right: set[str]) -> float:
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, item: int) -> int:
        root = self.parent.setdefault(item, item)
        while root != self.parent[root]:
            root = self.parent[root]
        while item != root:  # path compression
            self.parent[item], item = root, self.parent[item]
        return root

    def union(self, left: int, right: int) -> None:
        a, b = self.find(left), self.find(right)
        if a != b:
            # The smaller position becomes the root: the result never depends on call order.
            self.parent[max(a, b)] = min(a, b)


@dataclass
class NearDuplicateFinder:
    """Feed documents in corpus order with ``add``; ``clusters`` returns the clusters found.

    Keeps one MinHash signature per document (a ``LeanMinHash``: its hash values, 8 bytes per
    permutation) and no text.
    """

    shingle_words: int = 5
    permutations: int = 128
    threshold: float = 0.8
    seed: int = 1
    _lsh: MinHashLSH = field(init=False)
    _signatures: dict[int, LeanMinHash] = field(init=False, default_factory=dict)
    _documents: dict[int, tuple[str, bool]] = field(init=False, default_factory=dict)
    _links: _UnionFind = field(init=False, default_factory=_UnionFind)

    def __post_init__(self) -> None:
        self._lsh = MinHashLSH(threshold=self.threshold, num_perm=self.permutations)

    def _minhash(self, grams: set[str]) -> MinHash:
        minhash = MinHash(num_perm=self.permutations, seed=self.seed)
        # Sorted, so the signature is the same whatever the set's iteration order.
        minhash.update_batch([g.encode() for g in sorted(grams)])
        return minhash

    def add(self, position: int, doc_id: str, text: str, judged: bool) -> None:
        grams = shingles(text, self.shingle_words)
        if not grams:
            return  # an empty document is no one's near-duplicate; the empty rule handles it
        minhash = LeanMinHash(self._minhash(grams))
        for other in self._lsh.query(minhash):
            # LSH proposes likely pairs; the estimate decides, so a chance band collision
            # links nothing.
            if minhash.jaccard(self._signatures[other]) >= self.threshold:
                self._links.union(position, other)
        self._lsh.insert(position, minhash, check_duplication=False)
        self._signatures[position] = minhash
        self._documents[position] = (doc_id, judged)

    def groups(self) -> list[list[int]]:
        """Positions of each cluster of two or more documents, in corpus order."""
        members: dict[int, list[int]] = {}
        for position in self._links.parent:
            members.setdefault(self._links.find(position), []).append(position)
        return sorted(
            (sorted(group) for group in members.values() if len(group) > 1),
            key=lambda group: group[0],
        )

    def clusters(self, texts: dict[int, str]) -> pa.Table:
        """The clusters as a ``CLUSTERS`` table; ``texts`` holds the text of every position in
        ``groups()``, for the exact Jaccard similarities."""
        rows = []
        for group in self.groups():
            judged = [p for p in group if self._documents[p][1]]
            keeper = (judged or group)[0]
            keeper_id = self._documents[keeper][0]
            keeper_grams = shingles(texts[keeper], self.shingle_words)
            keeper_hash = self._signatures[keeper]
            for position in group:
                doc_id, is_judged = self._documents[position]
                grams = shingles(texts[position], self.shingle_words)
                rows.append(
                    {
                        "cluster": keeper_id,
                        "doc_id": doc_id,
                        "position": position,
                        "kept": position == keeper,
                        "judged": is_judged,
                        "jaccard": jaccard(grams, keeper_grams),
                        "estimated_jaccard": self._signatures[position].jaccard(keeper_hash),
                        "size": len(group),
                    }
                )
        return pa.Table.from_pylist(rows, CLUSTERS)
