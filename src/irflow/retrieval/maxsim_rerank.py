"""maxsim_rerank: a late-interaction (ColBERT) model as a reranker, exact MaxSim of a query's
token vectors with each candidate's (irflow.retrieval.late_interaction's scoring), holding one
bounded batch of candidates' token vectors at a time."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from irflow.core.progress import LoggedProgress
from irflow.retrieval.late_interaction import TokenEncoder, maxsim_scores

# Candidates' token vectors a late-interaction reranker holds at once, counted at the model's
# document length (MaxSimScorer): 1 GiB, about 8,000 documents of 256 tokens x 128 float32s.
MAX_HELD_TOKEN_BYTES = 1 << 30


@dataclass
class MaxSimScorer:
    """A reranker (``irflow.retrieval.rerank.Scorer``): exact MaxSim of the query's token vectors
    with each candidate's.

    It holds the token vectors of one batch of candidates at a time, never the whole job's
    (HotpotQA's top 100 would be about 22 GB): ``score_queries`` takes consecutive queries
    whose distinct candidates, at the model's document length, fit ``MAX_HELD_TOKEN_BYTES``
    (a query with more is a batch of its own), encodes those candidates, scores the batch and
    drops them. A document that is a candidate in several batches is encoded in each: the
    provenance counts ``documents_encoded`` against ``documents_distinct``, and the most
    documents held at once, ``documents_held_peak``."""

    encoder: TokenEncoder
    # Text -> token vectors of the documents held now.
    vectors: dict = field(init=False, repr=False, default_factory=dict)
    counts: dict = field(init=False, repr=False)

    def __post_init__(self):
        self.counts = {
            "documents_distinct": 0,
            "documents_encoded": 0,
            "documents_encode_seconds": 0.0,
            "documents_held_peak": 0,
            "documents_truncated": 0,
            "queries_truncated": 0,
        }

    @property
    def provenance(self) -> dict:
        return self.encoder.provenance | self.counts

    @property
    def documents_per_batch(self) -> int:
        """Documents whose token vectors fit ``MAX_HELD_TOKEN_BYTES`` at the document length."""
        dim = self.encoder.model.get_embedding_dimension()
        document_bytes = self.encoder.provenance["document_length"] * dim * 4
        return max(1, MAX_HELD_TOKEN_BYTES // document_bytes)

    def prepare(self, documents: list[str]) -> None:
        """Hold the token vectors of ``documents``, and of no other document."""
        import torch

        wanted = list(dict.fromkeys(documents))
        held = {text: self.vectors[text] for text in wanted if text in self.vectors}
        new = [text for text in wanted if text not in held]
        self.vectors = held
        chunk_size = self.encoder.spec.chunk_size
        started = time.perf_counter()
        for start in range(0, len(new), chunk_size):
            texts = new[start : start + chunk_size]
            arrays = self.encoder.encode(texts, "corpus")
            self.vectors |= {text: torch.from_numpy(a) for text, a in zip(texts, arrays)}
        self.counts["documents_encode_seconds"] += time.perf_counter() - started
        self.counts["documents_encoded"] += len(new)
        self.counts["documents_held_peak"] = max(
            self.counts["documents_held_peak"], len(self.vectors)
        )

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        self.prepare(documents)
        return self._scores([query], [documents])[0]

    def encode_seconds_elsewhere(self, query: str) -> float:
        return 0.0

    def score_queries(self, queries: list[str], candidates: list[list[str]]) -> list[np.ndarray]:
        distinct = list(dict.fromkeys(text for documents in candidates for text in documents))
        chunk_size = self.encoder.spec.chunk_size
        self.counts["documents_distinct"] += len(distinct)
        self.counts["documents_truncated"] += sum(
            self.encoder.truncated(distinct[start : start + chunk_size], "corpus")
            for start in range(0, len(distinct), chunk_size)
        )
        self.counts["queries_truncated"] += self.encoder.truncated(queries, "queries")
        scores = []
        with LoggedProgress(desc="rerank", total=len(queries), unit="queries") as progress:
            for start, end in candidate_batches(candidates, self.documents_per_batch):
                self.prepare([text for documents in candidates[start:end] for text in documents])
                scores += self._scores(queries[start:end], candidates[start:end])
                progress.update(end - start)
        self.vectors = {}
        return scores

    def _scores(self, queries: list[str], candidates: list[list[str]]) -> list[np.ndarray]:
        """MaxSim of each query with its candidates, all of them held."""
        import torch

        return [
            maxsim_scores(
                [torch.from_numpy(query_vectors)], [self.vectors[text] for text in documents]
            )[0].astype(np.float64)
            for query_vectors, documents in zip(self.encoder.encode(queries, "queries"), candidates)
        ]


def candidate_batches(candidates: list[list[str]], most: int) -> list[tuple[int, int]]:
    """[start, end) of runs of consecutive queries whose distinct candidates number at most
    ``most``; a query with more candidates is a batch of its own."""
    batches, start, held = [], 0, set()
    for row, documents in enumerate(candidates):
        grown = held | set(documents)
        if len(grown) > most and row > start:
            batches.append((start, row))
            start, grown = row, set(documents)
        held = grown
    return batches + [(start, len(candidates))] if candidates else []
