"""Near-duplicate documents, found with MinHash LSH (datasketch) and confirmed exactly.

MinHash is irflow's addition: Arctic-Embed (App. C) removes duplicates without naming a method.

A document is a set of word shingles (``shingle_words`` consecutive lower-cased word tokens).
The LSH banding is chosen for recall, not datasketch's balance of errors: the most rows per
band (the fewest chance candidates) that still propose a pair at exactly ``threshold`` with
probability ``RECALL`` (datasketch's default 9 bands of 13 rows proposes a pair at Jaccard 0.8
with probability 0.4). Every proposed pair is then confirmed with the exact Jaccard similarity
of the two shingle sets, and pairs at or above ``threshold`` are linked; linked documents form
a cluster (transitively, so two members may be less alike than the threshold, each being close
to a third).

Only a cluster's representative is indexed: a document whose estimated similarity to an
indexed one reaches the threshold is compared with it and not indexed itself, so a thousand
near-copies cost a thousand LSH queries against one entry rather than a quadratic number of
comparisons, and only representatives keep a signature in memory.

Which member of a cluster is kept is decided by the documents alone, never by hash order: the
first judged document in corpus order, else the first document in corpus order (the filter's
exact-duplicate rule keeps the same one). Keeping a judged document keeps the scores of its
queries comparable, and removing its unjudged copies removes ready-made false negatives. The
others are removed (or, when judged and the filter flags judged documents, kept and flagged).
Every member's exact Jaccard similarity to the kept one is recorded, so a cluster can be
checked by eye.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import pyarrow as pa

from irflow.core import contracts
from irflow.data.quality import Document

# datasketch is imported where it is used: it imports scipy.integrate (0.8 s), and every
# Snakemake dry run imports this module through the config checks.
if TYPE_CHECKING:
    from datasketch import LeanMinHash, MinHash, MinHashLSH

# The probability with which LSH proposes a pair at exactly the threshold.
RECALL = 0.99


def shingles(text: str | Document, size: int) -> set[str]:
    """The word ``size``-grams of a text, lower-cased and without punctuation
    (``Document.tokens``: a ``Document`` already split is not split again); a text shorter
    than ``size`` words is one shingle, an empty one none."""
    words = (text if isinstance(text, Document) else Document(text)).tokens
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


def lsh_bands(threshold: float, permutations: int, recall: float = RECALL) -> tuple[int, int]:
    """(bands, rows): the most rows per band for which a pair at Jaccard ``threshold`` shares a
    band with probability at least ``recall``, 1 - (1 - threshold^rows)^bands."""
    best = (permutations, 1)
    for rows in range(1, permutations + 1):
        bands = permutations // rows
        if 1 - (1 - threshold**rows) ** bands >= recall:
            best = (bands, rows)
    return best


@dataclass
class NearDuplicateFinder:
    """Feed documents' ``signature`` in corpus order with ``add`` (signatures may be computed
    in other processes: ``add`` alone is sequential); ``candidates`` names the documents whose
    texts ``clusters`` needs to confirm the pairs and return the clusters."""

    shingle_words: int = 5
    permutations: int = 128
    threshold: float = 0.8
    seed: int = 1
    _lsh: MinHashLSH = field(init=False)
    # Signatures of the indexed representatives only (LeanMinHash: 8 bytes per permutation).
    _signatures: dict[int, LeanMinHash] = field(init=False, default_factory=dict)
    _documents: dict[int, tuple[str, bool]] = field(init=False, default_factory=dict)
    # Proposed pairs (later, earlier) with their estimated Jaccard similarity.
    _pairs: dict[tuple[int, int], float] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        from datasketch import MinHashLSH

        self.bands = lsh_bands(self.threshold, self.permutations)
        self._lsh = MinHashLSH(num_perm=self.permutations, params=self.bands)

    @cached_property
    def _empty(self) -> MinHash:
        """A MinHash of nothing, whose permutations every signature reuses: datasketch draws
        them anew for every MinHash it creates."""
        from datasketch import MinHash

        return MinHash(num_perm=self.permutations, seed=self.seed)

    def signature(self, doc: Document) -> LeanMinHash | None:
        """The MinHash of the document's shingles; None for an empty document, which is no
        one's near-duplicate (the empty rule handles it)."""
        from datasketch import LeanMinHash, MinHash

        grams = shingles(doc, self.shingle_words)
        if not grams:
            return None
        empty = self._empty
        minhash = MinHash(
            self.permutations, self.seed, permutations=empty.permutations, scheme=empty.scheme
        )
        # Sorted, so the signature is the same whatever the set's iteration order.
        minhash.update_batch([g.encode() for g in sorted(grams)])
        return LeanMinHash(minhash)

    def add(self, position: int, doc_id: str, minhash: LeanMinHash | None, judged: bool) -> None:
        if minhash is None:
            return
        self._documents[position] = (doc_id, judged)
        represented = False
        for other in self._lsh.query(minhash):
            estimate = minhash.jaccard(self._signatures[other])
            self._pairs[(position, other)] = estimate
            represented |= estimate >= self.threshold
        if not represented:
            self._lsh.insert(position, minhash, check_duplication=False)
            self._signatures[position] = minhash

    def candidates(self) -> set[int]:
        """Positions of the documents in a proposed pair."""
        return {p for pair in self._pairs for p in pair}

    def groups(self, texts: dict[int, str]) -> list[list[int]]:
        """Positions of each cluster of two or more documents, in corpus order: the proposed
        pairs whose exact Jaccard similarity reaches the threshold, linked. ``texts`` holds
        the text of every position of ``candidates()``."""
        links, grams = _UnionFind(), {}

        def shingled(position: int) -> set[str]:
            if position not in grams:
                grams[position] = shingles(texts[position], self.shingle_words)
            return grams[position]

        for left, right in self._pairs:
            if jaccard(shingled(left), shingled(right)) >= self.threshold:
                links.union(left, right)
        members: dict[int, list[int]] = {}
        for position in links.parent:
            members.setdefault(links.find(position), []).append(position)
        return sorted(
            (sorted(group) for group in members.values() if len(group) > 1),
            key=lambda group: group[0],
        )

    def clusters(self, texts: dict[int, str]) -> pa.Table:
        """The clusters as a ``contracts.CLUSTERS`` table; ``texts`` as for ``groups``."""
        rows = []
        for group in self.groups(texts):
            judged = [p for p in group if self._documents[p][1]]
            keeper = (judged or group)[0]
            keeper_id = self._documents[keeper][0]
            keeper_grams = shingles(texts[keeper], self.shingle_words)
            for position in group:
                doc_id, is_judged = self._documents[position]
                grams = shingles(texts[position], self.shingle_words)
                pair = (max(position, keeper), min(position, keeper))
                estimate = 1.0 if position == keeper else self._pairs.get(pair)
                rows.append(
                    {
                        "cluster": keeper_id,
                        "doc_id": doc_id,
                        "position": position,
                        "kept": position == keeper,
                        "judged": is_judged,
                        "jaccard": jaccard(grams, keeper_grams),
                        "estimated_jaccard": estimate,
                        "size": len(group),
                    }
                )
        return pa.Table.from_pylist(rows, contracts.CLUSTERS)
