"""rerank: each query's top-k first-stage candidates rescored by a second model.

Only the k candidates are kept: appending the rest below them would mix two score scales in
one ranking, so they are dropped. Latency is timed per query around the scoring call alone,
which is what a reranker adds to a search. Models load inside the scorers, so importing this
module (as the workflow does) does not import torch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from irflow.embed import Encoder, load_model, read_embeddings
from irflow.runs import trec_order


class Scorer(Protocol):
    def score(self, query: str, documents: list[str]) -> np.ndarray: ...


def top_candidates(run: pd.DataFrame, k: int) -> pd.DataFrame:
    """Each query's first k documents in trec_eval order, whatever order ``run`` is in."""
    ordered = trec_order(run[["query_id", "doc_id", "score"]])
    return ordered[ordered["rank"] <= k].reset_index(drop=True)


@dataclass
class CrossEncoderScorer:
    """A sentence-transformers CrossEncoder: one forward pass per (query, document) pair.

    Scores are the model's raw logits. sentence-transformers would pass a one-label model's
    logit through a sigmoid, which rounds large logits to exactly 1.0 in float32 and so turns
    different scores into ties; the logit ranks the same without that loss.
    """

    model: object
    batch_size: int
    provenance: dict

    @classmethod
    def load(cls, spec: dict) -> CrossEncoderScorer:
        import torch
        from sentence_transformers import CrossEncoder

        model, provenance = load_model(
            CrossEncoder, spec, max_length=spec["max_length"], activation_fn=torch.nn.Identity()
        )
        provenance["max_length"] = model.max_seq_length
        return cls(model, spec["batch_size"], provenance)

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        scores = self.model.predict(
            [(query, document) for document in documents],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(scores, dtype=np.float64)


@dataclass
class BiEncoderScorer:
    """Dot product of the query's vector with each document's, as the first stage scores.

    With ``document_embeddings`` (the ``embeddings`` contract) and the ``documents`` that were
    embedded (id -> text), a document's vector is read from the file instead of recomputed;
    only the rows of those documents (the candidates) are read. The lookup goes by text, so the
    vector always belongs to the text being scored: a text the file does not hold (an id
    missing from it, or a text joined differently) is encoded here.
    """

    encoder: Encoder
    document_embeddings: Path | None = None
    documents: dict[str, str] | None = None
    cached: dict[str, np.ndarray] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self):
        if self.document_embeddings is None:
            return
        if self.documents is None:
            raise ValueError("document_embeddings needs the documents (id -> text) it embedded")
        ids, vectors = read_embeddings(self.document_embeddings, ids=self.documents)
        self.cached = {self.documents[doc_id]: vector for doc_id, vector in zip(ids, vectors)}

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        query_vector = self.encoder.encode([query], self.encoder.spec["query_prompt"])[0]
        uncached = [text for text in documents if text not in self.cached]
        encoded = {}
        if uncached:
            vectors = self.encoder.encode(uncached, self.encoder.spec["document_prompt"])
            encoded = dict(zip(uncached, vectors))
        matrix = np.stack([self.cached.get(text, encoded.get(text)) for text in documents])
        return matrix.astype(np.float64) @ query_vector.astype(np.float64)


def rerank(
    run: pd.DataFrame,
    queries: dict[str, str],
    documents: dict[str, str],
    scorer: Scorer,
    k: int,
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Rescore each query's top k; returns the new run and each query's scoring seconds."""
    candidates = top_candidates(run, k)
    for kind, ids, texts in (
        ("query", candidates["query_id"], queries),
        ("document", candidates["doc_id"], documents),
    ):
        missing = sorted(set(ids) - texts.keys())
        if missing:
            raise ValueError(f"{len(missing)} candidate {kind} id(s) without text: {missing[:5]}")
    doc_ids = candidates["doc_id"].to_numpy()
    scores = np.empty(len(candidates), dtype=np.float64)
    latencies = {}
    for query_id, rows in candidates.groupby("query_id").indices.items():
        texts = [documents[doc_id] for doc_id in doc_ids[rows]]
        started = time.perf_counter()
        scores[rows] = scorer.score(queries[query_id], texts)
        latencies[query_id] = time.perf_counter() - started
    return trec_order(candidates.assign(score=scores)), latencies
