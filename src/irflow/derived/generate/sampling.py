"""sampling: long documents cut into windows, lengths in words or tokens, personal data found, and
the seeded, stable sample of documents and split of queries (see irflow.derived.generate.dataset
for the decisions)."""

from __future__ import annotations

import hashlib
import logging
import re

import numpy as np
import pandas as pd

from irflow.core import contracts
from irflow.data.passages import passage_id, window_starts

log = logging.getLogger(__name__)


# Scripts written without spaces between words (Han, kana, Thai, Lao, Myanmar, Khmer): each of
# their characters counts as a word, so a Chinese document is not one long word.
NO_SPACES = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
)
WORDS = re.compile(f"[{NO_SPACES}]|[^\\s{NO_SPACES}]+")
# The same units without punctuation, lower-cased: what a query shares with its document.
PLAIN_WORDS = re.compile(f"[{NO_SPACES}]|[^\\W{NO_SPACES}]+")
# Personal data that keeps a document out of the sample (``personal_data``): a heuristic.
PERSONAL_DATA = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}"),
    "phone": re.compile(
        r"(?<![\w+.,-])(?:\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,6}"
        r"|\(\d{1,4}\)[ .-]?\d{2,4}(?P<a>[ .-])\d{2,4}(?:(?P=a)\d{2,4}){0,2}"
        r"|\d{2,4}(?P<b>[ .-])\d{2,4}(?:(?P=b)\d{2,4}){1,3})"
        r"(?![\w+-]|[.,]\d)"
    ),
}
PHONE_DIGITS = (10, 15)


def _word_spans(texts: list[str]) -> list[list[tuple[int, int]]]:
    return [[m.span() for m in WORDS.finditer(text)] for text in texts]


# The chunkers of a Long-Doc corpus (``chunker``): LlamaIndex's SimpleNodeParser, AIR-Bench's,
# and fixed windows (irflow's before issue 50, a named variant).
CHUNKERS = ("llamaindex", "windows")
# Counting words for chunk_unit: words.
WORDS_UNIT = "words"


def _windows(texts: list[str], size: int, overlap: int, tokenizer) -> list[list[str]]:
    """Each text cut into windows of ``size`` tokens (words when ``tokenizer`` is None) sharing
    ``overlap``, as ``irflow.data.passages`` cuts them, wherever a window ends."""
    if tokenizer is None:
        spans = _word_spans(texts)
    else:
        from irflow.data.tokens import encode

        spans = encode(tokenizer, texts, offsets=True)["offset_mapping"]
    pieces = []
    for text, offsets in zip(texts, spans):
        starts = window_starts(len(offsets), size, overlap)
        windows = [offsets[start : start + size] for start in starts]
        pieces.append([text[w[0][0] : w[-1][1]] for w in windows] if len(starts) > 1 else [text])
    return pieces


def _llamaindex(texts: list[str], size: int, overlap: int, tokenizer) -> list[list[str]]:
    """Each text split by LlamaIndex's SentenceSplitter, which ``SimpleNodeParser`` names,
    AIR-Bench's chunker: "we use the node parser [...] tool from LlamaIndex" (airbench.txt,
    line 260). It keeps sentences whole where a chunk can hold them and counts ``size`` and
    ``overlap`` by ``tokenizer``: a Hugging Face tokenizer, ``WORDS_UNIT`` (``WORDS``), or None
    for LlamaIndex's own default, tiktoken's cl100k_base (shipped in its wheel)."""
    from llama_index.core.node_parser import SimpleNodeParser

    if tokenizer == WORDS_UNIT:
        count = WORDS.findall
    elif tokenizer is not None:
        from irflow.data.tokens import encode

        def count(text: str) -> list[int]:
            return encode(tokenizer, text)["input_ids"]
    else:
        count = None
    splitter = SimpleNodeParser(chunk_size=size, chunk_overlap=overlap, tokenizer=count)
    pieces = []
    for text in texts:
        chunks = splitter.split_text(text) if text.strip() else []
        pieces.append(chunks if len(chunks) > 1 else [text])
    return pieces


def chunk_corpus(
    corpus: pd.DataFrame, size: int, overlap: int, tokenizer=None, chunker: str = "windows"
) -> tuple[pd.DataFrame, dict]:
    """Documents of more than one chunk of ``size`` tokens replaced by their chunks, cut by
    ``chunker`` (``CHUNKERS``); ``source_doc_id`` names each row's document. ``tokenizer``
    counts the tokens: a Hugging Face tokenizer, or None for words with ``windows`` and for
    LlamaIndex's default tokenizer with ``llamaindex`` (``WORDS_UNIT`` counts words there)."""
    texts = corpus["text"].fillna("").tolist()
    cut = _llamaindex if chunker == "llamaindex" else _windows
    rows, chunked = [], 0
    for doc_id, title, pieces in zip(
        corpus["doc_id"], corpus["title"], cut(texts, size, overlap, tokenizer)
    ):
        if len(pieces) == 1:
            rows.append(
                {"doc_id": doc_id, "title": title, "text": pieces[0], "source_doc_id": doc_id}
            )
            continue
        chunked += 1
        rows += [
            {
                "doc_id": passage_id(doc_id, n),
                "title": title,
                "text": piece,
                "source_doc_id": doc_id,
            }
            for n, piece in enumerate(pieces)
        ]
    frame = pd.DataFrame(rows, columns=["doc_id", "title", "text", "source_doc_id"])
    stats = {"documents": len(corpus), "documents_chunked": chunked, "chunks": len(frame)}
    return frame, stats


def word_overlap(query: str, document: str) -> float:
    """The share of the query's distinct words (``PLAIN_WORDS``, lower-cased) that occur in the
    document: 1.0 when the query copies the document's wording, lower after a good rewrite.
    Stop words count too."""
    words = set(PLAIN_WORDS.findall(query.lower()))
    if not words:
        return 0.0
    return len(words & set(PLAIN_WORDS.findall(document.lower()))) / len(words)


def _order_key(seed: int, doc_id: str) -> str:
    return hashlib.sha256(f"{seed}\0{doc_id}".encode()).hexdigest()


def document_rng(seed: int, doc_id: str) -> np.random.Generator:
    """The generator of every choice made for one document."""
    digest = hashlib.sha256(f"{seed}\0{doc_id}".encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def word_count(title: str | None, text: str | None) -> int:
    return len(WORDS.findall(contracts.document_text(title, text or "")))


def document_lengths(corpus: pd.DataFrame, tokenizer=None) -> np.ndarray:
    """Each document's length: in the tokenizer's tokens, or in words (``WORDS``)."""
    if tokenizer is None:
        return np.array([word_count(t, x) for t, x in zip(corpus["title"], corpus["text"])])
    from irflow.data.tokens import encode

    texts = contracts.document_texts(corpus["title"], corpus["text"].fillna(""))
    return np.array([len(ids) for ids in encode(tokenizer, list(texts))["input_ids"]], dtype=int)


def personal_data(text: str, kinds: list[str] | tuple[str, ...]) -> list[str]:
    """The ``kinds`` of ``PERSONAL_DATA`` found in ``text`` (a heuristic: see the module)."""
    found = []
    for kind in kinds:
        for match in PERSONAL_DATA[kind].finditer(text):
            digits = sum(c.isdigit() for c in match.group(0))
            # Without a +: groups of three after the first are a number's thousands, and
            # counting groups (9 10 11 12) a run of citation marks.
            groups = re.findall(r"\d+", match.group(0))
            numbers = match.group(0)[0] != "+" and (
                all(len(g) == 3 for g in groups[1:])
                or all(int(b) == int(a) + 1 for a, b in zip(groups, groups[1:]))
            )
            if kind != "phone" or (PHONE_DIGITS[0] <= digits <= PHONE_DIGITS[1] and not numbers):
                found.append(kind)
                break
    return found


def sample_documents(
    corpus: pd.DataFrame,
    count: int,
    seed: int,
    strata: int | None,
    min_words: int,
    tokenizer=None,
    *,
    max_words: int | None = None,
    personal: list[str] | tuple[str, ...] = (),
    eligible: np.ndarray | None = None,
) -> tuple[list[int], dict]:
    """Row positions of the sampled documents, in hash order, and what the sample holds.
    Lengths (``min_words``, ``max_words``, strata) count the tokenizer's tokens when one is
    given. Only rows where ``eligible`` is true (all when None), of ``min_words`` to
    ``max_words``, and without the ``personal`` kinds of personal data are candidates."""
    words = document_lengths(corpus, tokenizer)
    keep = np.ones(len(corpus), bool) if eligible is None else np.array(eligible, bool)
    stats: dict = {}
    if eligible is not None:
        stats["not_positive"] = int((~keep).sum())
    stats["too_short"] = int((keep & (words < min_words)).sum())
    keep &= words >= min_words
    if max_words is not None:
        stats["too_long"] = int((keep & (words > max_words)).sum())
        keep &= words <= max_words
    if personal:
        # Only the documents still in the running are searched: the scan costs most.
        flagged = {kind: 0 for kind in personal}
        for i in np.flatnonzero(keep):
            text = contracts.document_text(corpus["title"].iat[i], corpus["text"].iat[i] or "")
            kinds = personal_data(text, personal)
            for kind in kinds:
                flagged[kind] += 1
            keep[i] = not kinds
        stats["personal_data"] = flagged
    candidates = np.flatnonzero(keep)
    keys = {int(i): _order_key(seed, corpus["doc_id"].iat[i]) for i in candidates}
    if not strata or strata <= 1:
        chosen = sorted(candidates.tolist(), key=keys.__getitem__)[:count]
        quotas = [len(chosen)]
    else:
        by_length = sorted(candidates.tolist(), key=lambda i: (words[i], corpus["doc_id"].iat[i]))
        groups = [g.tolist() for g in np.array_split(np.array(by_length, dtype=int), strata)]
        groups = [sorted(g, key=keys.__getitem__) for g in groups]
        quotas = _allocate(count, [len(g) for g in groups])
        chosen = [i for group, quota in zip(groups, quotas) for i in group[:quota]]
    chosen.sort(key=keys.__getitem__)
    stats = {"candidates": int(len(candidates)), **stats}
    stats |= {"sampled": len(chosen), "per_stratum": quotas}
    if len(chosen) < count:
        log.warning(
            "asked for %d documents, only %d are candidates (%s; lengths in %s)",
            count,
            len(chosen),
            ", ".join(f"{key}: {value}" for key, value in stats.items() if key != "sampled"),
            "tokens" if tokenizer is not None else "words",
        )
    return chosen, stats


def _allocate(count: int, sizes: list[int]) -> list[int]:
    """Shares of ``count`` over groups of ``sizes``: as even as the sizes allow, the remainder
    to the first groups."""
    quotas = [0] * len(sizes)
    left = min(count, sum(sizes))
    while left > 0:
        open_groups = [i for i, size in enumerate(sizes) if quotas[i] < size]
        share, extra = divmod(left, len(open_groups))
        for rank, i in enumerate(open_groups):
            take = min(share + (rank < extra), sizes[i] - quotas[i])
            quotas[i] += take
            left -= take
    return quotas


def assign_splits(query_ids: list[str], dev_share: float, seed: int) -> dict[str, str]:
    """Each query's split: the first ``round(dev_share * len(query_ids))`` in the order of a
    hash of the seed and the query_id are ``dev``, the others ``test``."""
    order = sorted(query_ids, key=lambda q: _order_key(seed, f"split\0{q}"))
    dev = round(dev_share * len(order))
    return {q: ("dev" if rank < dev else "test") for rank, q in enumerate(order)}
