"""scorers: what scores a query's candidates for a reranker type (irflow.retrieval.rerankers).
Models load inside the scorers, so importing this module (as the workflow does) does not
import torch.

A bi-encoder scores as dense retrieval does: the dot product of the query's vector with a
document's, both encoded by ``irflow.encoding.models.Encoder`` with the model's prompts, and
of unit length when its similarity (the config's, else the model's own) is cosine. A
document's vector does not depend on the query, so every distinct candidate text of the job is
encoded once, in chunks, before any query is scored, and each chunk is written to a
``VectorCache`` on disk: a rerun, another reranking job or a QC vote with the same
model settings reads it instead of encoding again. Where the workflow embedded the dataset with
the same model anyway (for a dense retriever), the vectors come from those files, and the model
is loaded only if some text is missing from them. A query timed for latency then takes its
vector from the file too, and its encoding time is the one the embed job measured for that
query, encoded on its own as a search would: the reranker's latency is that plus the scoring.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

from irflow.core import contracts
from irflow.core.fingerprint import value_md5
from irflow.core.progress import LoggedProgress, counting_batches
from irflow.core.settings_types import CrossEncoder, ModelModel
from irflow.encoding.embed import read_embeddings
from irflow.encoding.models import (
    RESULT_SETTINGS,
    Encoder,
    OnDemandEncoder,
    attach_backend,
    load_model,
    placed_for_backend,
    use_threads,
)

log = logging.getLogger(__name__)

# Where the workflow's reranking jobs and QC votes share document vectors (not a rule output,
# so Snakemake never deletes or reruns it; delete it to free the space).
VECTOR_CACHE = Path("results/vector-cache")
# What an embed job's manifest records of the model that made its vectors (Encoder.provenance).
MODEL_PROVENANCE = (
    "model",
    "revision",
    "files_md5",
    "device",
    "dtype",
    "similarity",
    "similarity_from",
    "max_seq_length",
    "backend",
    "export_key",
)


class Scorer(Protocol):
    provenance: dict  # for the manifest; final once every query is scored

    def prepare(self, documents: list[str]) -> None:
        """Hold what ``score`` needs of ``documents`` that does not depend on the query."""
        ...

    def score(self, query: str, documents: list[str]) -> np.ndarray: ...

    def score_queries(self, queries: list[str], candidates: list[list[str]]) -> list[np.ndarray]:
        """``score`` of each query with its candidates, batched across queries."""
        ...

    def encode_seconds_elsewhere(self, query: str) -> float:
        """Seconds of the query's encoding that ``score`` did not spend itself, because another
        job encoded and timed it (0 when ``score`` encodes the query)."""
        ...


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
    def load(cls, entry: dict | CrossEncoder, threads: int | None = None) -> CrossEncoderScorer:
        """The scorer of a cross-encoder reranker's entry: the config's dict (a rerank job's
        params, expand's filter), typed here, or the typed entry."""
        import torch

        use_threads(threads)
        from sentence_transformers import CrossEncoder as SentenceCrossEncoder

        spec = CrossEncoder.model_validate(entry)
        model, provenance = load_model(
            SentenceCrossEncoder,
            placed_for_backend(spec),
            max_length=spec.max_length,
            activation_fn=torch.nn.Identity(),
        )
        provenance["max_length"] = model.max_seq_length
        # sentence-transformers' own backend="onnx" needs optimum-onnx, which cannot be
        # installed beside transformers 5 (irflow.encoding.onnx_export): irflow exports the
        # CrossEncoder's Transformer module as it does a bi-encoder's.
        attach_backend(model, spec, provenance)
        return cls(model, spec.batch_size, provenance)

    def prepare(self, documents: list[str]) -> None:
        """Nothing to do ahead: a cross-encoder reads each document together with its query."""

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        return self.score_pairs([(query, document) for document in documents])

    def score_queries(self, queries: list[str], candidates: list[list[str]]) -> list[np.ndarray]:
        pairs = [(query, doc) for query, docs in zip(queries, candidates) for doc in docs]
        with (
            LoggedProgress(desc="rerank", total=len(pairs), unit="pairs") as progress,
            counting_batches(self.model, progress),
        ):
            return split_by_lengths(self.score_pairs(pairs), candidates)

    def encode_seconds_elsewhere(self, query: str) -> float:
        return 0.0

    def score_pairs(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """One score per (query, document) pair."""
        scores = self.model.predict(
            pairs,
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return np.asarray(scores, dtype=np.float64)


def text_digest(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


class VectorCache:
    """Document vectors of one model's result settings, by the md5 of the document's text.

    One folder per model key under ``root``: the settings that change vectors, with the dtype
    the model runs in, the similarity in effect and its exact revision or file hash, as
    ``irflow.encoding.embed.cache_key`` keys its parts (that key also hashes an input file,
    which a cache shared by jobs must not). The folder holds Parquet parts in the ``embeddings``
    contract, a text's digest as the id. A part appears atomically and is never rewritten, so
    jobs read and add at the same time; two jobs that encode one text at once both add it, and
    either vector serves.
    """

    def __init__(self, root: Path, encoder: Encoder | OnDemandEncoder):
        self.root, self.encoder = Path(root), encoder

    @cached_property
    def folder(self) -> Path:
        """Named on first use: the key needs the loaded model's dtype and files."""
        provenance = self.encoder.provenance
        settings = {key: getattr(self.encoder.spec, key) for key in RESULT_SETTINGS}
        settings |= {"dtype": provenance["dtype"], "similarity": provenance["similarity"]}
        identity = {k: v for k, v in provenance.items() if k in ("revision", "files_md5")}
        folder = self.root / value_md5([settings, identity])
        folder.mkdir(parents=True, exist_ok=True)
        # For people reading the folder; pyarrow skips names that start with "_".
        (folder / "_settings.json").write_text(json.dumps(settings | identity, indent=2))
        return folder

    def get(self, digests: list[str]) -> dict[str, np.ndarray]:
        """The cached vector of each digest the cache holds."""
        if not any(self.folder.glob("part-*.parquet")):
            return {}
        found, vectors = read_embeddings(self.folder, digests)
        return dict(zip(found, vectors))

    def put(self, digests: list[str], vectors: np.ndarray) -> None:
        table = pa.table(
            {"id": digests, "vector": contracts.vector_array(vectors)},
            schema=contracts.embeddings_schema(vectors.shape[1]),
        )
        contracts.write_table(table, self.folder / f"part-{uuid.uuid4().hex}.parquet")


@dataclass
class BiEncoderScorer:
    """Dot product of the query's vector with each document's, as dense retrieval scores.

    ``prepare`` gets each distinct document text's vector once: with ``document_embeddings``
    (the model's ``embeddings`` file) and the ``documents`` that were embedded (id -> text),
    from the file, reading only those documents' rows; the lookup goes by text, so the vector
    always belongs to the text being scored (an id missing from the file, or a text joined
    differently, is not taken from it). Then from ``cache``, and the rest is encoded in chunks
    of the model's ``chunk_size``, each chunk added to ``cache`` as soon as it is done.
    ``score_queries`` takes the queries' vectors the same way from ``query_embeddings`` and
    ``queries`` (id -> text) and encodes the rest together. ``score``, one query as a search
    scores it, encodes its query, unless ``query_seconds`` (text -> seconds) holds the time the
    embed job took to encode it on its own: then its vector comes from the file, and
    ``encode_seconds_elsewhere`` gives that time. ``provenance`` counts the documents by where
    their vectors came from; while nothing is encoded here it describes the model as
    ``vector_provenance`` (the embed job's record of it) does, so an ``OnDemandEncoder`` is
    never loaded.
    """

    encoder: Encoder | OnDemandEncoder
    document_embeddings: Path | None = None
    documents: dict[str, str] | None = None
    cache: VectorCache | None = None
    query_embeddings: Path | None = None
    queries: dict[str, str] | None = None
    query_seconds: dict[str, float] = field(default_factory=dict)
    vector_provenance: dict | None = None
    # Text -> vector of every document prepared so far.
    vectors: dict[str, np.ndarray] = field(init=False, repr=False, default_factory=dict)
    counts: dict[str, float] = field(init=False, repr=False)
    in_file: dict[str, np.ndarray] = field(init=False, repr=False, default_factory=dict)
    queries_in_file: dict[str, np.ndarray] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self):
        self.counts = {
            "documents_from_embeddings": 0,
            "documents_from_cache": 0,
            "documents_encoded": 0,
            "documents_encode_seconds": 0.0,
            "queries_from_embeddings": 0,
            "queries_encoded": 0,
            "latency_encodings_from_embed": 0,
        }
        self.in_file = vectors_by_text(self.document_embeddings, self.documents)
        self.queries_in_file = vectors_by_text(self.query_embeddings, self.queries)

    @property
    def provenance(self) -> dict:
        encoded_here = self.counts["documents_encoded"] or self.counts["queries_encoded"]
        use_record = self.vector_provenance is not None and not encoded_here
        model = self.vector_provenance if use_record else self.encoder.provenance
        return model | {
            "model_loaded": not isinstance(self.encoder, OnDemandEncoder) or self.encoder.loaded,
            "reused_embeddings": self.document_embeddings is not None,
            "documents_distinct": len(self.vectors),
            **self.counts,
        }

    def prepare(self, documents: list[str]) -> None:
        """Hold the vector of every distinct text in ``documents``."""
        new = [text for text in dict.fromkeys(documents) if text not in self.vectors]
        from_file = {text: self.in_file.pop(text) for text in new if text in self.in_file}
        self.vectors |= from_file
        rest = [text for text in new if text not in from_file]
        digests = [text_digest(text) for text in rest]
        cached = self.cache.get(digests) if self.cache is not None and rest else {}
        self.vectors |= {text: cached[d] for text, d in zip(rest, digests) if d in cached}
        missing = [(text, d) for text, d in zip(rest, digests) if d not in cached]
        started = time.perf_counter()
        if missing:
            self._encode_documents(missing)
        self.counts["documents_encode_seconds"] += time.perf_counter() - started
        self.counts["documents_from_embeddings"] += len(from_file)
        self.counts["documents_from_cache"] += len(rest) - len(missing)
        self.counts["documents_encoded"] += len(missing)
        if new:
            log.info(
                "%d distinct documents: %d vectors from the embeddings file, %d from the cache, "
                "%d encoded",
                len(new),
                len(from_file),
                len(rest) - len(missing),
                len(missing),
            )

    def _encode_documents(self, missing: list[tuple[str, str]]) -> None:
        """Encode (text, digest) pairs a chunk at a time, each chunk cached once done; the
        progress counts the model's batches."""
        chunk_size = self.encoder.spec.chunk_size
        with (
            LoggedProgress(
                desc="rerank: encode documents", total=len(missing), unit="documents"
            ) as progress,
            counting_batches(self.encoder.model, progress),
        ):
            for start in range(0, len(missing), chunk_size):
                texts, chunk_digests = map(list, zip(*missing[start : start + chunk_size]))
                vectors = self.encoder.encode(texts, self.encoder.spec.document_prompt)
                if self.cache is not None:
                    self.cache.put(chunk_digests, vectors)
                self.vectors |= dict(zip(texts, vectors))

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        self.prepare(documents)
        if self.encode_seconds_elsewhere(query):
            self.counts["latency_encodings_from_embed"] += 1
            vector = self.queries_in_file[query][np.newaxis]
        else:
            vector = self._encode_queries([query])
        return self._scores(vector, [documents])[0]

    def encode_seconds_elsewhere(self, query: str) -> float:
        return self.query_seconds.get(query, 0.0) if query in self.queries_in_file else 0.0

    def score_queries(self, queries: list[str], candidates: list[list[str]]) -> list[np.ndarray]:
        # Every distinct candidate once, before the queries: a few floats a document.
        self.prepare([text for documents in candidates for text in documents])
        vectors = {
            text: self.queries_in_file[text] for text in queries if text in self.queries_in_file
        }
        self.counts["queries_from_embeddings"] += len(vectors)
        rest = [text for text in dict.fromkeys(queries) if text not in vectors]
        if rest:
            vectors |= dict(zip(rest, self._encode_queries(rest)))
        return self._scores(np.stack([vectors[text] for text in queries]), candidates)

    def _encode_queries(self, queries: list[str]) -> np.ndarray:
        self.counts["queries_encoded"] += len(queries)
        return self.encoder.encode(queries, self.encoder.spec.query_prompt)

    def _scores(self, query_vectors: np.ndarray, candidates: list[list[str]]) -> list[np.ndarray]:
        self.prepare([text for documents in candidates for text in documents])
        return [
            np.stack([self.vectors[text] for text in documents]).astype(np.float64)
            @ query_vector.astype(np.float64)
            for query_vector, documents in zip(query_vectors, candidates)
        ]


def vectors_by_text(embeddings: Path | None, texts: dict[str, str] | None) -> dict:
    """Text -> vector of the rows of an ``embeddings`` file whose id ``texts`` (id -> text)
    names; by text, so a vector always belongs to the text it is used for."""
    if embeddings is None:
        return {}
    if texts is None:
        raise ValueError(f"{embeddings} needs the texts (id -> text) it embedded")
    ids, vectors = read_embeddings(embeddings, ids=texts)
    return {texts[row_id]: vector for row_id, vector in zip(ids, vectors)}


def split_by_lengths(scores: np.ndarray, candidates: list[list[str]]) -> list[np.ndarray]:
    """Flat scores of every (query, candidate) pair, back into one array per query."""
    return np.split(scores, np.cumsum([len(documents) for documents in candidates])[:-1])


@dataclass(frozen=True)
class ScoringJob:
    """What a job that scores with a reranker gives its scorer: the ``models`` entries (for a
    reranker that names one), the texts it scores (id -> text), where a bi-encoder may find
    vectors already made (``bi_encoder_scorer``) and the torch threads its model runs on."""

    models: dict
    documents: dict[str, str]
    queries: dict[str, str] | None = None
    embeddings: Path | None = None
    query_embeddings: Path | None = None
    query_manifest: Path | None = None
    cache_root: Path | None = VECTOR_CACHE
    threads: int | None = None


def bi_encoder_scorer(model: dict | ModelModel, job: ScoringJob) -> BiEncoderScorer:
    """The bi-encoder scorer of ``models`` entry ``model`` (the config's dict, typed by its
    encoder, or the typed entry): it takes the vectors of
    ``job.documents`` from its model's ``embeddings`` file when given, then from the vector
    cache under ``job.cache_root`` (none when None), and encodes the rest; and those of
    ``job.queries`` from ``job.query_embeddings``, whose embed job's ``query_manifest`` gives
    each timed query's encoding seconds. The model is loaded only once something must be
    encoded."""
    encoder = OnDemandEncoder(model, job.threads)
    cache = VectorCache(job.cache_root, encoder) if job.cache_root is not None else None
    record = json.loads(job.query_manifest.read_text()) if job.query_manifest is not None else {}
    query_texts = job.queries if job.query_embeddings else None
    return BiEncoderScorer(
        encoder,
        job.embeddings,
        job.documents if job.embeddings else None,
        cache,
        job.query_embeddings,
        query_texts,
        query_seconds={
            query_texts[query_id]: seconds
            for query_id, seconds in record.get("latency", {}).items()
            if query_texts and query_id in query_texts
        },
        vector_provenance={k: record[k] for k in MODEL_PROVENANCE if k in record} or None,
    )
