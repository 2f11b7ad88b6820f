"""positionalize: position-controlled variants of a dataset, irflow's addition to PosIR.

PosIR does not build documents: it locates each query's evidence span in a real document and
bins the queries by where that span lies. irflow's variants are controlled insertions instead:
for every query with exactly one relevant document, that document is replaced, under the same
doc_id, by a haystack of ``length`` tokens: filler documents of the same corpus with the
relevant document's text embedded at token offset ``position × (length − its own length)``, so
position 0 puts it at the start and 1 at the end. The result is an ordinary dataset (the
contracts' corpus, queries and qrels) that the rest of the workflow evaluates unchanged, and
that PosIR's analysis bins like one of its own: by the span's centre over the haystack.
``position`` is where the inserted text starts in the free room, not the span's centre: at 512
tokens a relevant document of 400 tokens at position 0 has its centre at 0.39.

The qrels span: where the base dataset's judgement has a span (the evidence inside the
document, as PosIR's datasets give), that span moved with the document's text; otherwise the
whole inserted text (title and text).

Decisions:
- The relevant text and every filler are a document as the models read it: title, a space,
  text (``contracts.document_text``). The haystack's title is empty, so its text is all that a
  model reads, and the span counts characters in it.
- Pieces are joined by a blank line (``SEPARATOR``): the relevant text and each filler read as
  paragraphs of their own, and a word-piece tokenizer spends no token on it.
- Fillers are cut only at a token boundary that splits no word (not between two letters or
  digits). The filler stream ends at the last such boundary within the budget, and the relevant
  text goes in at the boundary nearest its target offset. A haystack is therefore at most
  ``length`` tokens and falls short by at most one word.
- Fillers depend on the seed and the relevant doc_id only: the same at every position, and a
  longer variant's fillers extend a shorter one's. ``random``: a seeded random order of the
  corpus. ``bm25``: first the documents that the workflow's default BM25 (a ``bm25``
  retriever entry with the schema's defaults, ``bm25``) ranks highest for the query
  (near-misses, the harder test), then the random order. Near-misses are the documents
  most likely to be relevant though unjudged, which PosIR removes as false negatives; unless
  they are screened, a ``bm25`` haystack may hold a second answer that a model finds wherever
  the inserted one sits, which flattens the curve and lowers PSI.
- Screening (``Screen``): a reranker scores each candidate filler, in order, against every
  query of the relevant document, in the same call as the relevant text itself; a candidate
  scoring at least the relevant text's score less ``margin`` for any of them is skipped and
  the next one taken. The rule is relative, as a reranker's scale is not (a cross-encoder's
  raw logit may be negative, so a fraction of the relevant document's score would not be a
  cap), and a difference rather than a ratio for the same reason: margin 0 skips what the
  reranker ranks at or above the judged answer. Candidates are scored ``SCREEN_BATCH`` at a
  time as the stream takes them, so a haystack costs a few batches, and the batches, hence
  the decisions, are the same at every length: a longer variant's fillers still extend a
  shorter one's.
- The filler stream is counted on its joined text until it reaches the budget, and a
  haystack's token count is that of its whole text: a tokenizer that spends tokens on the
  separator, or reads a piece's edges differently in context, still gets full haystacks.
- A filler is never a document judged relevant (relevance > 0) to any query, nor an empty one.
- A variant keeps every corpus document (the relevant documents of kept queries replaced), and
  only the kept queries and their judgements. Queries are skipped, and counted by reason, when
  they have no relevant document, several, one missing from the corpus, or one that does not fit
  in ``length`` tokens.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from irflow.core import contracts
from irflow.core.errors import ConfigError
from irflow.core.seeds import SEED_MARK, seeded_names

if TYPE_CHECKING:
    from irflow.retrieval.scorers import Scorer
from irflow.core.settings_types import Bm25
from irflow.data.tokens import encode
from irflow.retrieval.bm25 import bm25_model, stemmer_of

log = logging.getLogger(__name__)


SEPARATOR = "\n\n"
# A block's key, and a seed's copy of it (irflow.core.seeds: "key@seed1").
NAME = rf"[A-Za-z0-9][A-Za-z0-9._-]*(?:{SEED_MARK}[0-9]+)?"
VARIANT = re.compile(rf"(?P<name>{NAME})@L(?P<length>[1-9][0-9]*)@p(?P<position>[0-9.e-]+)")
# Random fillers are drawn this many at a time without a pass over the corpus; only a haystack
# that needs more (very short documents) pays for a full permutation.
FIRST_DRAW = 64
NEAR_MISS_DEPTH = 100
FILLER_MODES = ("random", "bm25")
# Candidates a screen scores per reranker call: a haystack takes a few fillers, so scoring all
# NEAR_MISS_DEPTH near-misses up front would mostly be wasted.
SCREEN_BATCH = 16


# --- names ------------------------------------------------------------------------------------


def variant_name(dataset: str, length: int, position: float) -> str:
    """``scifact@L512@p0.25``; the position as the shortest text that reads back the same."""
    return f"{dataset}@L{int(length)}@p{float(position)!r}".removesuffix(".0")


def parse_variant(name: str) -> tuple[str, int, float]:
    """The (dataset, length, position) a variant name was made from."""
    match = VARIANT.fullmatch(name)
    if match is None:
        raise ValueError(f"{name!r} is not a variant name like 'scifact@L512@p0.25'")
    return match["name"], int(match["length"]), float(match["position"])


def list_variants(config: dict) -> dict[str, dict]:
    """Every variant the ``positionalize`` block defines, by name, with its settings.

    The name starts with the block's key, so two blocks over one dataset (random and bm25
    fillers, say) give different variants. A block of several seeds is one block per seed
    (irflow.core.seeds.seeded_names: ``key``, ``key@seed1``, ...), each with that one seed.
    """
    variants = {}
    for key, block in sorted(config.get("positionalize", {}).items()):
        if block["dataset"] not in config["datasets"]:
            known = ", ".join(sorted(config["datasets"]))
            raise ConfigError(
                f"config key 'positionalize.{key}.dataset': {block['dataset']!r} is not a key "
                f"of 'datasets'; allowed values: {known}"
            )
        screen = block.get("screen") and screen_settings(key, block["screen"], config)
        shape = itertools.product(block["lengths"], block["positions"])
        for (length, position), (name, seed) in itertools.product(
            shape, seeded_names(key, block["seed"]).items()
        ):
            settings = {key: block[key] for key in ("dataset", "tokenizer", "fillers")}
            # Only when configured, so that a block without it keeps its jobs' parameters.
            settings |= {"seed": seed} | ({"screen": screen} if screen else {})
            variants[variant_name(name, length, position)] = settings | {
                "block": name,
                "length": length,
                "position": position,
            }
    return variants


def seeded_variants(config: dict) -> dict[str, dict[str, int]]:
    """Per variant of a block's first seed, that variant under each of the block's seeds."""
    return {
        variant_name(key, length, position): {
            variant_name(name, length, position): seed
            for name, seed in seeded_names(key, block["seed"]).items()
        }
        for key, block in config.get("positionalize", {}).items()
        for length, position in itertools.product(block["lengths"], block["positions"])
    }


def screen_settings(key: str, screen: dict, config: dict) -> dict:
    """A block's ``screen`` with its reranker's spec and its type's settings (a bi-encoder's:
    those that determine its model's vectors): the job's parameters, so that changing any
    reruns it. Its type must screen (irflow.retrieval.rerankers)."""
    from irflow.retrieval.rerankers import reranker_type, types_with, with_capability

    name, screening = screen["reranker"], with_capability(config, "screens")
    if name not in screening:
        raise ConfigError(
            f"config key 'positionalize.{key}.screen.reranker': {name!r} is not a "
            f"{types_with('screens')} key of 'rerankers'; allowed values: "
            f"{', '.join(screening) or '(none)'}"
        )
    spec = config["rerankers"][name]
    return screen | {"spec": spec} | reranker_type(spec["type"]).settings(spec, config)


def variant_checksum(base_checksum: str, settings: dict, tokenizer_sha256: str) -> str:
    """What the variant's content depends on: the base dataset, the settings, the tokenizer."""
    record = {"base": base_checksum, "settings": settings, "tokenizer": tokenizer_sha256}
    return hashlib.md5(json.dumps(record, sort_keys=True).encode()).hexdigest()


# --- haystacks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Stream:
    """A relevant document's fillers, joined, with the token boundaries where it may be cut."""

    text: str
    starts: np.ndarray  # character offset where each token starts
    ends: np.ndarray  # ... and ends
    cuts: np.ndarray  # ascending token indices before which a cut splits no word, 0 and n too
    budget: int  # filler tokens the haystack has room for
    screened: list[int]  # candidates skipped before the last filler taken (filler_texts indices)


@dataclass
class Screen:
    """Skips a candidate filler that ``scorer`` (an ``irflow.retrieval.rerank`` scorer) scores, for
    one of the relevant document's queries, at least as high as the relevant text less
    ``margin``."""

    scorer: Scorer
    margin: float = 0.0


@dataclass(frozen=True)
class _Haystack:
    text: str
    span_start: int
    tokens: int  # counted on the whole text


@dataclass
class Variant:
    length: int
    position: float
    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame
    stats: dict


def _stable_int(text: str) -> int:
    """A seed from a string that, unlike hash(), is the same in every process."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _random_order(rng: np.random.Generator, n: int) -> Iterator[int]:
    """0 .. n-1 in a random order, drawn lazily."""
    first = rng.choice(n, size=min(n, FIRST_DRAW), replace=False)
    yield from first.tolist()
    rest = np.setdiff1d(np.arange(n), first)
    yield from rng.permutation(rest).tolist()


def _word_cuts(text: str, starts: np.ndarray) -> np.ndarray:
    """Token indices before which a cut does not fall between two letters or digits."""
    inner = [
        i
        for i in range(1, len(starts))
        if not (text[starts[i] - 1].isalnum() and text[starts[i]].isalnum())
    ]
    return np.array([0, *inner, len(starts)], dtype=np.int64)


def _text_offsets(documents: pd.DataFrame) -> dict[str, int]:
    """Where each document's ``text`` starts in ``contracts.document_text`` (title, a space,
    text, stripped), the string that qrels spans of the base dataset are moved into."""
    offsets = {}
    for doc_id, title, text in zip(documents.index, documents["title"], documents["text"]):
        joined = f"{title or ''} {text}"
        offsets[doc_id] = len(title or "") + 1 - (len(joined) - len(joined.lstrip()))
    return offsets


class Positionalizer:
    """Builds a dataset's variants; a length's filler streams are built once for all positions.
    ``bm25``, the bm25 retriever entry that ranks the near-misses, is typed once here
    (irflow.core.settings_types.Bm25)."""

    def __init__(
        self,
        corpus: pd.DataFrame,
        queries: pd.DataFrame,
        qrels: pd.DataFrame,
        tokenizer,
        fillers: str = "random",
        seed: int = 0,
        *,
        screen: Screen | None = None,
        bm25: dict | None = None,
    ):
        if fillers not in FILLER_MODES:
            raise ValueError(f"fillers {fillers!r}: expected one of {FILLER_MODES}")
        if fillers == "bm25" and bm25 is None:
            raise ValueError("fillers 'bm25' need the bm25 settings that rank the near-misses")
        self.bm25 = None if bm25 is None else Bm25.model_validate(bm25)
        self.corpus, self.queries, self.qrels = corpus, queries, qrels
        self.tokenizer, self.fillers, self.seed = tokenizer, fillers, seed
        self.screen = screen
        self.separator_tokens = len(encode(tokenizer, SEPARATOR)["input_ids"])
        texts = pd.Series(
            contracts.document_texts(corpus["title"].tolist(), corpus["text"].tolist()),
            index=corpus["doc_id"].to_numpy(),
        )
        relevant = qrels[qrels["relevance"] > 0]
        self.relevant_doc, self.skipped = self._select_queries(relevant, set(texts.index))
        eligible = ~texts.index.isin(relevant["doc_id"]) & (texts != "").to_numpy()
        self.filler_texts = texts[eligible].tolist()
        documents = self.relevant_doc.unique()
        self.relevant_texts = texts[documents].to_dict()
        self.text_offsets = _text_offsets(corpus.set_index("doc_id").loc[documents])
        counts = encode(tokenizer, [self.relevant_texts[d] for d in documents])["input_ids"]
        self.relevant_tokens = {d: len(ids) for d, ids in zip(documents, counts)}
        self._near_misses: dict[str, list[int]] | None = None
        self._streams: tuple[int, dict[str, _Stream]] | None = None

    def _select_queries(self, relevant: pd.DataFrame, doc_ids: set) -> tuple[pd.Series, dict]:
        """query_id -> its one relevant doc_id, and the other queries counted by reason."""
        query_ids = pd.Index(self.queries["query_id"])
        counts = relevant.groupby("query_id")["doc_id"].agg(["count", "first"])
        counts = counts[counts.index.isin(query_ids)]
        single = counts.loc[counts["count"] == 1, "first"]
        present = single.isin(doc_ids)
        skipped = {
            "unjudged": int((~query_ids.isin(self.qrels["query_id"])).sum()),
            "no_relevant": int(query_ids.isin(self.qrels["query_id"]).sum() - len(counts)),
            "several_relevant": int((counts["count"] > 1).sum()),
            "relevant_document_missing": int((~present).sum()),
        }
        return single[present].rename("doc_id"), skipped

    @functools.cached_property
    def query_texts(self) -> dict[str, list[str]]:
        """Per relevant document, the texts of the queries it is the one relevant document of."""
        query_text = self.queries.set_index("query_id")["text"]
        by_doc = self.relevant_doc.groupby(self.relevant_doc).groups
        return {doc: query_text[sorted(ids)].tolist() for doc, ids in by_doc.items()}

    def near_misses(self) -> dict[str, list[int]]:
        """Per relevant document, the fillers that share a term with its queries, best first by
        BM25 with the settings ``bm25`` (a bm25 retriever entry; the fillers are read as title
        and text, its default ``fields``)."""
        if self._near_misses is None:
            self._near_misses = self._rank_near_misses() if self.filler_texts else {}
        return self._near_misses

    def _rank_near_misses(self) -> dict[str, list[int]]:
        import bm25s

        spec = self.bm25
        stemmer = stemmer_of(spec)

        def tokenize(texts):
            return bm25s.tokenize(
                texts,
                stopwords=spec.stopwords,
                stemmer=stemmer,
                return_ids=False,
                show_progress=False,
            )

        model = bm25_model(spec)
        model.index(tokenize(self.filler_texts), show_progress=False)
        # A document relevant to several kept queries is a near-miss for all of them at once.
        docs = sorted(self.query_texts)
        texts = [" ".join(self.query_texts[d]) for d in docs]
        depth = min(NEAR_MISS_DEPTH, len(self.filler_texts))
        rows, scores = model.retrieve(tokenize(texts), k=depth, show_progress=False)
        return {doc: row[score > 0].tolist() for doc, row, score in zip(docs, rows, scores)}

    def filler_order(self, doc_id: str, screened: list[int] | None = None) -> Iterator[int]:
        """Indices into ``filler_texts``, in the order a haystack for ``doc_id`` takes them;
        with a screen, the candidates it skips are appended to ``screened`` as they are
        passed over."""
        candidates = self._candidates(doc_id)
        if self.screen is None:
            yield from candidates
            return
        screened = [] if screened is None else screened
        while batch := list(itertools.islice(candidates, SCREEN_BATCH)):
            skip = self.screen_out(doc_id, [self.filler_texts[index] for index in batch])
            for index, skipped in zip(batch, skip):
                if skipped:
                    screened.append(index)
                else:
                    yield index

    def _candidates(self, doc_id: str) -> Iterator[int]:
        """``filler_order`` before screening."""
        rng = np.random.default_rng([self.seed, _stable_int(doc_id)])
        first = self.near_misses().get(doc_id, []) if self.fillers == "bm25" else []
        seen = set()
        for index in itertools.chain(first, _random_order(rng, len(self.filler_texts))):
            if index not in seen:
                seen.add(index)
                yield index

    def screen_out(self, doc_id: str, texts: list[str]) -> np.ndarray:
        """Whether the screen skips each of ``texts`` as a filler around ``doc_id``'s text."""
        relevant, skip = self.relevant_texts[doc_id], np.zeros(len(texts), dtype=bool)
        for query in self.query_texts[doc_id]:
            # The relevant text in the same call: an exact copy among the candidates scores
            # exactly as it does, so margin 0 always skips it.
            scores = self.screen.scorer.score(query, [relevant, *texts])
            skip |= scores[1:] >= scores[0] - self.screen.margin
        return skip

    def _stream(self, doc_id: str, budget: int) -> _Stream:
        """Fillers in order until their joined text has ``budget`` tokens, or none is left.

        Counted on the joined text: separators cost tokens only between pieces, and a
        tokenizer may read a piece's edges differently inside the stream than alone."""
        screened: list[int] = []
        order, pieces, estimate, index = self.filler_order(doc_id, screened), [], 0, None
        while True:
            while estimate < budget and (index := next(order, None)) is not None:
                piece = self.filler_texts[index]
                estimate += len(encode(self.tokenizer, piece)["input_ids"])
                estimate += self.separator_tokens if pieces else 0
                pieces.append(piece)
            text = SEPARATOR.join(pieces)
            offsets = np.array(encode(self.tokenizer, text, offsets=True)["offset_mapping"])
            offsets = offsets.reshape(-1, 2).astype(np.int64)
            # None: the order ran out (the corpus, or what the screen left of it).
            if len(offsets) >= budget or index is None:
                break
            estimate = len(offsets)  # short of the estimate: take more
        starts, ends = offsets[:, 0], offsets[:, 1]
        return _Stream(text, starts, ends, _word_cuts(text, starts), budget, screened)

    def streams(self, length: int) -> dict[str, _Stream]:
        """Filler streams of every relevant document that fits in ``length`` tokens, with a
        separator on either side; only the latest length is kept."""
        if self._streams is None or self._streams[0] != length:
            room = {
                doc: length - tokens - 2 * self.separator_tokens
                for doc, tokens in self.relevant_tokens.items()
            }
            streams = {
                doc: self._stream(doc, budget) for doc, budget in room.items() if budget >= 0
            }
            self._streams = (length, streams)
        return self._streams[1]

    def haystack(self, doc_id: str, stream: _Stream, position: float) -> _Haystack:
        """The stream cut to its budget with the relevant text at the word boundary nearest
        ``position`` of the way through it."""
        cuts = stream.cuts
        end = cuts[np.searchsorted(cuts, stream.budget, side="right") - 1]
        usable = cuts[cuts <= end]
        at = usable[np.argmin(np.abs(usable - position * end))]
        before = stream.text[: stream.ends[at - 1]] if at > 0 else ""
        after = stream.text[stream.starts[at] : stream.ends[end - 1]] if end > at else ""
        relevant = self.relevant_texts[doc_id]
        text = SEPARATOR.join(part for part in (before, relevant, after) if part)
        return _Haystack(
            text=text,
            span_start=len(before) + len(SEPARATOR) if before else 0,
            tokens=len(encode(self.tokenizer, text)["input_ids"]),
        )

    def variant(self, length: int, position: float) -> Variant:
        streams = self.streams(length)
        haystacks = {doc: self.haystack(doc, stream, position) for doc, stream in streams.items()}
        kept = self.relevant_doc[self.relevant_doc.isin(haystacks)]
        texts = self.corpus["doc_id"].map({doc: h.text for doc, h in haystacks.items()})
        replaced = texts.notna()
        corpus = self.corpus.assign(
            title=self.corpus["title"].mask(replaced, ""),
            text=texts.where(replaced, self.corpus["text"]),
        )
        qrels = self.qrels[self.qrels["query_id"].isin(kept.index)]
        is_target = qrels["doc_id"].to_numpy() == kept.reindex(qrels["query_id"]).to_numpy()
        inserted = qrels["doc_id"].map({doc: h.span_start for doc, h in haystacks.items()})
        inserted_end = inserted + qrels["doc_id"].map(self.relevant_texts).str.len()
        # Where the base dataset locates the evidence inside the document, the span is that
        # evidence, moved with the document's text; elsewhere it is the whole inserted text.
        text_at = inserted + qrels["doc_id"].map(self.text_offsets)
        own = is_target & qrels["span_start"].notna().to_numpy()
        evidence_start = (text_at + qrels["span_start"]).clip(inserted, inserted_end)
        evidence_end = (text_at + qrels["span_end"]).clip(inserted, inserted_end)
        span_start = evidence_start.where(own, inserted)
        span_end = evidence_end.where(own, inserted_end)
        # Other judgements of a replaced document point into text that is no longer there.
        replaced_doc = qrels["doc_id"].isin(haystacks)
        qrels = qrels.assign(
            span_start=span_start.where(is_target, qrels["span_start"].mask(replaced_doc)),
            span_end=span_end.where(is_target, qrels["span_end"].mask(replaced_doc)),
        ).astype({"span_start": "Int64", "span_end": "Int64"})
        tokens = np.array([h.tokens for h in haystacks.values()])
        underfilled = sum(len(stream.starts) < stream.budget for stream in streams.values())
        over = int((tokens > length).sum())
        if over:
            log.warning(
                "%d haystacks exceed %d tokens: the tokenizer reads the joins between pieces "
                "as more tokens than the pieces alone",
                over,
                length,
            )
        skipped = self.skipped | {"too_long": len(self.relevant_doc) - len(kept)}
        stats = {
            "length": length,
            "position": position,
            "fillers": self.fillers,
            "seed": self.seed,
            "queries_kept": len(kept),
            "queries_skipped": skipped,
            "haystacks": len(haystacks),
            "haystack_tokens": {
                "min": int(tokens.min()) if len(tokens) else None,
                "mean": float(tokens.mean()) if len(tokens) else None,
                "max": int(tokens.max()) if len(tokens) else None,
            },
            "underfilled_haystacks": int(underfilled),
            "over_length_haystacks": over,
            "evidence_spans": int(own.sum()),
        }
        if underfilled:
            log.warning(
                "%d haystacks of %d tokens are short: the corpus has too few fillers (that "
                "the screen, if any, keeps)",
                underfilled,
                length,
            )
        if self.screen is not None:
            screened = [len(stream.screened) for stream in streams.values()]
            stats["screened_fillers"] = sum(screened)
            stats["screened_haystacks"] = sum(count > 0 for count in screened)
            log.info(
                "%d candidate fillers screened out of %d haystacks of %d tokens: the reranker "
                "scores them at least as high as the relevant document less %g for its query",
                stats["screened_fillers"],
                stats["screened_haystacks"],
                length,
                self.screen.margin,
            )
        elif self.fillers == "bm25":
            log.warning(
                "bm25 fillers are not screened: the near-misses around each relevant document "
                "may be unjudged relevant documents (PosIR removes such false negatives); "
                "positionalize.<block>.screen screens them with a reranker"
            )
        return Variant(
            length=length,
            position=position,
            corpus=corpus,
            queries=self.queries[self.queries["query_id"].isin(kept.index)],
            qrels=qrels,
            stats=stats,
        )


def positionalize(
    corpus: pd.DataFrame,
    queries: pd.DataFrame,
    qrels: pd.DataFrame,
    tokenizer,
    lengths: list[int],
    positions: list[float],
    *,
    fillers: str = "random",
    seed: int = 0,
    screen: Screen | None = None,
    bm25: dict | None = None,
) -> Iterator[Variant]:
    """Every (length, position) variant, length by length, so only one length's fillers are
    in memory at a time."""
    maker = Positionalizer(
        corpus, queries, qrels, tokenizer, fillers, seed, screen=screen, bm25=bm25
    )
    for length in lengths:
        for position in positions:
            yield maker.variant(length, position)
