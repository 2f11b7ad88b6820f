"""late_interaction: ColBERT-style models, a vector per token, scored by MaxSim.

Models load through sentence-transformers' ``MultiVectorEncoder``, which reads PyLate and
Stanford ColBERT checkpoints (query and document prefixes, query expansion, punctuation
skiplist, projection, normalisation) without PyLate itself: PyLate 1.6 pins
sentence-transformers 5.3 and torch 2.11, which this project's pins exclude. First-stage
retrieval is exhaustive, exact MaxSim over every document's token vectors (``index: exact``),
or PyLate's Voyager index rebuilt on the ``voyager`` package (``index: voyager``,
``VoyagerIndex``): an approximation of the exact search, whose recall against it is measured
on a seeded sample of queries and raised to ``target_recall`` as a faiss index's is
(``irflow.retrieval.recall``). PLAID needs fast-plaid, whose wheels are built for another torch.

Token vectors are cached as dense ones are (``irflow.encoding.encode_parts``: resumable parts,
shards), one row per text: its ``vectors``, a list of the model's dimension-sized float32 vectors.

The MaxSim of a query q and a document d is sum over q's tokens of the largest dot product with
any of d's tokens (``sentence_transformers.util.similarity.maxsim``, in float32).
"""

from __future__ import annotations

import io
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from pydantic import TypeAdapter

from irflow.core import contracts
from irflow.core.errors import ConfigError
from irflow.core.settings_types import LateInteractionExact, LateInteractionVoyager, ModelModel
from irflow.encoding.embed import batches_between, shard_rows
from irflow.encoding.encode_parts import SideEncoder
from irflow.encoding.models import SIDES, load_model, side_prompt
from irflow.retrieval.recall import measure_recall, recall_sample
from irflow.retrieval.retrieve import exact_run
from irflow.retrieval.runs import build_run, search_depth, top_with_ties

log = logging.getLogger(__name__)

# Scores of one query batch against the corpus (queries x documents) at most; and elements
# (padded token vectors and token similarities) one MaxSim call holds at most.
MAX_SCORE_ENTRIES = 1 << 24
MAXSIM_CHUNK_ELEMENTS = 1 << 25
# Token vectors go into the Voyager graph this many at a time: Voyager copies (and normalises)
# what it is given, so a bounded chunk keeps that copy small. One thread inserts them in the
# same order whatever the chunking.
VOYAGER_ADD_ROWS = 1 << 16
# A late-interaction retriever's ``index``: exact MaxSim, or a Voyager graph's candidates.
INDEX = TypeAdapter(LateInteractionExact | LateInteractionVoyager)


class TokenEncoder(SideEncoder):
    """A loaded ``MultiVectorEncoder`` with its typed ``models`` entry and provenance, which
    records the lengths that apply (``applied_lengths``)."""

    FACTORY = "MultiVectorEncoder"

    @classmethod
    def load(cls, entry: dict | ModelModel) -> TokenEncoder:
        """The encoder of a ``models`` entry: the config's dict, typed here, or the typed
        entry."""
        from sentence_transformers import MultiVectorEncoder

        spec = ModelModel.model_validate(entry)
        model, provenance = load_model(MultiVectorEncoder, spec)
        return cls(model, spec, provenance | set_lengths(model, spec))

    def encode(self, texts: list[str], side: str) -> list[np.ndarray]:
        """One (tokens x dim) float32 array per text. Queries go through ``encode_query``
        (its prefix and expansion), documents through ``encode_document``; a configured
        prompt replaces the model's own prefix."""
        arrays = self.encode_side(texts, side, convert_to_numpy=True)
        return [np.asarray(array, dtype=np.float32) for array in arrays]

    def table(self, ids: list[str], arrays: list[np.ndarray]) -> pa.Table:
        return tokens_table(ids, arrays)

    def truncated(self, texts: list[str], side: str) -> int:
        """How many of ``texts`` are longer than their side's length, prefix and special tokens
        included, and so lose their end."""
        prompts = self.model.prompts
        own = next((prompts[name] for name in OWN_PROMPTS[side] if name in prompts), "")
        prompt = side_prompt(self.spec, side) or own
        limit = self.provenance["query_length" if side == "queries" else "document_length"]
        tokenizer = transformer_of(self.model).tokenizer
        lengths = tokenizer(
            [prompt + text for text in texts], truncation=False, return_length=True, verbose=False
        )["length"]
        return sum(length > limit for length in lengths)

    def truncation(self, input_path: Path, side: str, shard: tuple[int, int] = (0, 1)) -> dict:
        """The manifest's count of the texts of ``shard`` that are cut to their side's length
        (all of them, resumed ones too), logged."""
        to_texts, _ = SIDES[side]
        source = contracts.ParquetFile(input_path)
        first, end = shard_rows(source.metadata.num_rows, *shard)
        truncated = sum(
            self.truncated(to_texts(rows)[1], side)
            for _, rows in batches_between(source, first, end, self.spec.chunk_size)
        )
        if truncated:
            length = self.provenance["query_length" if side == "queries" else "document_length"]
            log.warning(
                "%d of %d %s are longer than the %d tokens the model reads of them: their ends "
                "are not encoded",
                truncated,
                end - first,
                side,
                length,
            )
        return {"texts_truncated": truncated}


# The model's own prompt each side takes when the config gives none, in the order
# MultiVectorEncoder's encode_query and encode_document look for it.
OWN_PROMPTS = {"queries": ("query",), "corpus": ("document", "passage", "corpus")}


def transformer_of(model):
    """The model's ``Transformer`` module, which holds its lengths and tokenizer."""
    from sentence_transformers.base.modules import Transformer

    return next(module for module in model if isinstance(module, Transformer))


def set_lengths(model, spec: ModelModel) -> dict:
    """Put the configured ``query_length`` and ``document_length`` (tokens, prefix and special
    tokens included; None: the checkpoint's) on the model, and return the lengths that apply.

    ColBERT (Khattab & Zaharia 2020, §3.2): "If the query has fewer than a pre-defined number
    of tokens Nq, we pad it with BERT's special [mask] tokens up to length Nq (otherwise, we
    truncate it to the first Nq tokens)". A checkpoint with that query expansion (PyLate's and
    Stanford's ColBERTs, Nq 32) is padded to ``query_length`` as well; its ``document_length``
    (ColBERT's doc_maxlen) overrides the tokenizer's maximum, ``max_seq_length``."""
    transformer = transformer_of(model)
    most = transformer.tokenizer.model_max_length
    for key in ("query_length", "document_length"):
        length = getattr(spec, key)
        if length is not None and length > most:
            raise ConfigError(
                f"model {spec.id!r}: {key} {length} exceeds the {most} tokens the model "
                f"reads; set its models entry's {key} to at most {most}"
            )
    if spec.query_length is not None:
        transformer.query_length = spec.query_length
        if transformer.query_expansion is not None:
            transformer.query_expansion = transformer.query_expansion | {
                "length": spec.query_length
            }
    if spec.document_length is not None:
        transformer.document_length = spec.document_length
    return applied_lengths(transformer)


def applied_lengths(transformer) -> dict:
    """The tokens a query and a document are read to, and the width queries are padded to
    with [MASK] (None without query expansion), as sentence-transformers' ``Transformer``
    applies them: a fixed expansion's length, else ``query_length``, at least a "min"
    expansion's floor; ``document_length``; the tokenizer's maximum where neither is set."""
    most = transformer.tokenizer.model_max_length
    expansion = transformer.query_expansion
    query_length = transformer.query_length or most
    if expansion is not None:
        floor = expansion["length"]
        query_length = floor if expansion["strategy"] == "fixed" else max(query_length, floor)
    return {
        "query_length": query_length,
        "queries_padded_to": expansion["length"] if expansion is not None else None,
        "document_length": transformer.document_length or most,
    }


def tokens_table(ids: list[str], arrays: list[np.ndarray]) -> pa.Table:
    dim = arrays[0].shape[1]
    offsets = np.zeros(len(arrays) + 1, np.int32)
    np.cumsum([len(array) for array in arrays], out=offsets[1:])
    flat = np.concatenate(arrays).reshape(-1)
    tokens = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), dim)
    vectors = pa.ListArray.from_arrays(pa.array(offsets), tokens)
    return pa.Table.from_arrays(
        [pa.array(ids, pa.string()), vectors], schema=contracts.tokens_schema(dim)
    )


@dataclass
class TokenVectors:
    """Every row's token vectors as one (tokens x dim) float32 array and row offsets into it."""

    ids: pa.Array
    flat: np.ndarray
    offsets: np.ndarray

    @classmethod
    def read(cls, source: Path | pa.Table) -> TokenVectors:
        """The rows of a ``contracts.tokens_schema`` file, or of such a table in memory."""
        table = contracts.table_of(source)
        vectors = table.column("vectors").combine_chunks()
        offsets = vectors.offsets.to_numpy().astype(np.int64)
        dim = vectors.type.value_type.list_size
        # A writable copy: torch shares memory only with writable arrays.
        flat = np.array(vectors.flatten().flatten().to_numpy().reshape(-1, dim))
        return cls(table.column("id").combine_chunks(), flat, offsets - offsets[0])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def rows(self, start: int, end: int) -> list:
        """Rows [start, end) as torch tensors that share this array's memory."""
        return self.select(range(start, end))

    def select(self, rows) -> list:
        """The given rows as torch tensors that share this array's memory."""
        import torch

        flat = torch.from_numpy(self.flat)
        return [flat[self.offsets[i] : self.offsets[i + 1]] for i in rows]

    @property
    def nbytes(self) -> int:
        return self.flat.nbytes + self.offsets.nbytes


def maxsim_scores(queries, documents: list, query_mask=None) -> np.ndarray:
    """(queries x documents) MaxSim, float32, by sentence-transformers' chunked ``maxsim``."""
    from sentence_transformers.util.similarity import maxsim

    return maxsim(
        queries, documents, a_mask=query_mask, chunk_elements=MAXSIM_CHUNK_ELEMENTS
    ).numpy()


def _top(scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the ``depth`` best scores and any tied with the last of them."""
    rows, kept = top_with_ties(np.arange(len(scores)), scores, depth)
    return rows, kept.astype(np.float64)


def exhaustive_search(
    documents: TokenVectors, queries: TokenVectors, depth: int, batch_size: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query, (document rows, scores) of the ``depth`` best documents by exact MaxSim and
    any tied with the last; query batches hold at most ``MAX_SCORE_ENTRIES`` scores."""
    all_documents = documents.rows(0, len(documents))
    hits = []
    for start, end in query_batches(len(queries), len(documents), batch_size):
        batch = queries.rows(start, end)
        hits += [_top(row, depth) for row in maxsim_scores(batch, all_documents)]
    return hits


def query_batches(queries: int, documents: int, batch_size: int) -> list[tuple[int, int]]:
    """[start, end) of the query batches of ``exhaustive_search``."""
    step = max(1, min(batch_size, MAX_SCORE_ENTRIES // max(documents, 1)))
    return [(start, min(start + step, queries)) for start in range(0, queries, step)]


@dataclass
class VoyagerIndex:
    """PyLate's Voyager index (``pylate.indexes.Voyager``): every document token vector in one
    Voyager HNSW graph in cosine space, a token's id its row in ``TokenVectors.flat``. A search
    is PyLate's ``retrieve.ColBERT`` over it: each query token's ``k_token`` nearest document
    tokens name the candidate documents, which exact MaxSim ranks."""

    index: object
    token_documents: np.ndarray  # each token's document row
    spec: LateInteractionVoyager

    @classmethod
    def build(cls, documents: TokenVectors, block: dict | LateInteractionVoyager) -> VoyagerIndex:
        """The graph of ``documents``' tokens; ``block``: the retriever's ``index`` block,
        typed here (or typed)."""
        import torch
        from voyager import Index, Space

        spec = LateInteractionVoyager.model_validate(block)
        index = Index(
            Space.Cosine,
            num_dimensions=documents.flat.shape[1],
            M=spec.M,
            ef_construction=spec.ef_construction,
            random_seed=spec.seed,
            max_elements=len(documents.flat),
        )
        threads = spec.build_threads or torch.get_num_threads()
        for start in range(0, len(documents.flat), VOYAGER_ADD_ROWS):
            index.add_items(documents.flat[start : start + VOYAGER_ADD_ROWS], num_threads=threads)
        token_documents = np.repeat(
            np.arange(len(documents), dtype=np.int32), np.diff(documents.offsets)
        )
        return cls(index, token_documents, spec)

    @property
    def nbytes(self) -> int:
        """The graph as Voyager saves it (vectors and links), and the token-to-document map."""
        sink = _ByteCounter()
        self.index.save(sink)
        return sink.written + self.token_documents.nbytes

    def settings(self, depth: int) -> dict:
        """k_token and ef_search as searched at ``depth``: PyLate raises k_token to the depth;
        Voyager needs ef at least k. Neither exceeds the graph's tokens."""
        k_token = min(max(self.spec.k_token, depth), len(self.token_documents))
        return {"k_token": k_token, "ef_search": max(self.spec.ef_search, k_token)}

    def raised(self, depth: int) -> VoyagerIndex:
        """This graph searched with twice the k_token (up to every token: the exact search)
        and ef_search at ``depth``. Both: PyLate's candidates are the documents of each query
        token's k_token nearest tokens; ef bounds how many of those the graph finds, k_token
        which documents can be candidates at all, whatever ef."""
        settings = self.settings(depth)
        doubled = {
            "k_token": min(2 * settings["k_token"], len(self.token_documents)),
            "ef_search": 2 * settings["ef_search"],
        }
        return replace(self, spec=self.spec.model_copy(update=doubled))

    def can_widen(self, depth: int) -> bool:
        return self.settings(depth)["k_token"] < len(self.token_documents)

    def candidates(self, queries: TokenVectors, depth: int) -> list[np.ndarray]:
        """Per query, the document rows (ascending) holding any of its tokens' nearest tokens."""
        import torch
        from voyager import RecallError

        settings = self.settings(depth)
        try:
            tokens, _ = self.index.query(
                queries.flat,
                k=settings["k_token"],
                num_threads=torch.get_num_threads(),
                query_ef=settings["ef_search"],
            )
        except RecallError as error:
            raise RuntimeError(
                f"the Voyager graph gave fewer than k_token={settings['k_token']} tokens for a "
                "query token; raise the retriever's index.M or index.ef_search"
            ) from error
        documents = self.token_documents[tokens.astype(np.int64)]
        return [
            np.unique(documents[queries.offsets[row] : queries.offsets[row + 1]])
            for row in range(len(queries))
        ]

    def search(
        self, documents: TokenVectors, queries: TokenVectors, depth: int, batch_size: int
    ) -> tuple[list, list[int]]:
        """Per query, (document rows, scores) of its ``depth`` best candidates by exact MaxSim
        and any tied with the last; and each query's number of candidates.

        A query is scored padded (and masked) to the width of its batch in
        ``exhaustive_search``: the float32 sum over query tokens depends on that width, and so
        a candidate scores what the exact search gives it, to float32 rounding."""
        import torch

        hits, counts = [], []
        for start, end in query_batches(len(queries), len(documents), batch_size):
            batch = queries_slice(queries, start, end)
            width = int(np.diff(batch.offsets).max())
            for query, rows in zip(batch.rows(0, len(batch)), self.candidates(batch, depth)):
                padded = torch.zeros(1, width, query.shape[1])
                padded[0, : len(query)] = query
                mask = (torch.arange(width) < len(query)).float()[None]
                scores = maxsim_scores(padded, documents.select(rows), mask)[0]
                top, top_scores = _top(scores, depth)
                hits.append((rows[top], top_scores))
                counts.append(len(rows))
        return hits, counts


class _ByteCounter(io.RawIOBase):
    """A file that keeps only the number of bytes written to it."""

    written = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.written += len(data)
        return len(data)


def late_interaction_search(
    doc_vectors: Path,
    query_vectors: Path | pa.Table,
    top_k: int,
    remove_self_matches: bool,
    batch_size: int,
    latency_queries: int = 0,
    *,
    index: dict | LateInteractionExact | LateInteractionVoyager | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Top-k run of the queries' token vectors (a file, or a searcher's table in memory)
    against the documents' by MaxSim: exact over every document, or over a Voyager index's
    candidates (``index``, a retriever's ``index``: the config's dict, typed here, or typed;
    None: exact), whose ``recall`` against the exact search is measured first
    (``recall_against_exact``); timing, and the index's size in memory for the cost table: the
    token vectors, or the Voyager graph (the search holds the token vectors too, to rank the
    candidates)."""
    index = INDEX.validate_python(index or {"type": "exact"})
    started = time.perf_counter()
    documents, queries = TokenVectors.read(doc_vectors), TokenVectors.read(query_vectors)
    load_seconds = time.perf_counter() - started
    facts = {
        "index_bytes": documents.nbytes,
        "documents": len(documents),
        "tokens_per_document": len(documents.flat) / max(len(documents), 1),
        "dim": documents.flat.shape[1],
        "recall": None,
    }
    graph, candidates = None, []
    depth = search_depth(top_k, remove_self_matches)
    if isinstance(index, LateInteractionVoyager):
        started = time.perf_counter()
        graph = VoyagerIndex.build(documents, index)
        build_seconds = time.perf_counter() - started
        if index.recall_queries:
            graph, facts["recall"] = recall_against_exact(
                graph, documents, queries, top_k, remove_self_matches, batch_size
            )

    def search(row: int | None, depth: int, size: int) -> list:
        """Every query (``row`` None), or query ``row`` alone for its latency."""
        some = queries if row is None else queries_slice(queries, row, row + 1)
        if graph is None:
            return exhaustive_search(documents, some, depth, size)
        hits, counts = graph.search(documents, some, depth, size)
        if row is None:
            candidates[:] = counts
        return hits

    run, timing = exact_run(
        search,
        queries.ids,
        documents.ids,
        top_k,
        remove_self_matches,
        batch_size,
        latency_queries=latency_queries,
    )
    if graph is not None:
        facts |= {
            "index_bytes": graph.nbytes,
            "token_vectors_bytes": documents.nbytes,
            "voyager": graph.settings(depth)
            | {
                "build_seconds": build_seconds,
                "candidates_mean": float(np.mean(candidates)) if candidates else 0.0,
                "candidates_per_query": dict(zip(queries.ids.to_pylist(), candidates)),
            },
        }
        load_seconds += build_seconds
    return run, timing | facts | {"index_seconds": load_seconds}


def recall_against_exact(
    graph: VoyagerIndex,
    documents: TokenVectors,
    queries: TokenVectors,
    top_k: int,
    remove_self_matches: bool,
    batch_size: int,
) -> tuple[VoyagerIndex, dict]:
    """The Voyager run's recall@top_k against exact MaxSim on ``recall_queries`` queries drawn
    with ``recall_seed``, and with ``target_recall`` the graph's settings that reach it, as a
    faiss index's (``irflow.retrieval.recall.measure_recall``)."""
    some = queries_take(queries, recall_sample(len(queries), graph.spec))
    depth = search_depth(top_k, remove_self_matches)

    def run_of(search: VoyagerIndex | None) -> pd.DataFrame:
        """The sample's run: exact (``search`` None), or by the graph ``search``."""
        hits = (
            exhaustive_search(documents, some, depth, batch_size)
            if search is None
            else search.search(documents, some, depth, batch_size)[0]
        )
        return build_run(some.ids, documents.ids, hits, top_k, remove_self_matches)[0]

    return measure_recall(graph, depth, run_of, run_of(None), len(some), graph.spec, top_k=top_k)


def queries_slice(queries: TokenVectors, start: int, end: int) -> TokenVectors:
    """Queries [start, end) as their own ``TokenVectors`` (views, not copies)."""
    offsets = queries.offsets[start : end + 1]
    return TokenVectors(
        queries.ids[start:end], queries.flat[offsets[0] : offsets[-1]], offsets - offsets[0]
    )


def queries_take(queries: TokenVectors, rows: np.ndarray) -> TokenVectors:
    """Queries ``rows`` (a copy), in that order, as their own ``TokenVectors``."""
    lengths = np.diff(queries.offsets)[rows]
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = [queries.flat[queries.offsets[row] : queries.offsets[row + 1]] for row in rows]
    dim = queries.flat.shape[1]
    return TokenVectors(
        queries.ids.take(pa.array(rows, pa.int64())),
        np.concatenate(flat) if flat else np.empty((0, dim), np.float32),
        offsets,
    )
