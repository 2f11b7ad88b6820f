"""passages: documents -> overlapping passages of a model's tokens, for long documents.

A model reads at most ``max_seq_length`` tokens of a document; what lies beyond is invisible to
it (``truncate``, the default and what published results do). Two strategies split documents
instead (Dai & Callan 2019, "Deeper Text Understanding for IR with Contextual Neural Language
Modeling"):
- ``maxp``: every passage is embedded and a document scores the maximum over its passages;
- ``firstp``: only the first passage is kept, so a document is its first ``passage_tokens``.

Decisions:
- Passages are windows of ``passage_tokens`` tokens of the document's text by the model's own
  tokenizer, starting every ``passage_tokens − overlap`` tokens (AIR-Bench: 200 and 50). The
  last window ends at the text's end; no window lies wholly inside the one before it. A text
  with no token is one empty passage, so every document keeps a row.
- A passage's text is the document text between its first token's start and its last token's
  end, so passages are verbatim slices. Each passage keeps the document's title: the embedder
  reads title + text (``contracts.document_text``) for passages as for documents, as Dai &
  Callan prepend the title to every passage.
- ``passage_id`` is ``<doc_id>#<n>``, n counting from 0; ``doc_id`` names the document, and row
  order is the corpus order, passage after passage, which the dense retriever relies on to map
  index rows to documents.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from irflow.core import contracts
from irflow.core.settings_types import LongDocuments, ModelModel
from irflow.data.tokens import encode

log = logging.getLogger(__name__)

STRATEGIES = ("truncate", "firstp", "maxp")
ROWS_PER_BATCH = 4096


def splits_documents(model: dict | ModelModel) -> bool:
    """Whether a model (its ``models`` entry: the config's dict, typed here, or the typed
    entry) reads documents as passages."""
    return ModelModel.model_validate(model).long_documents.strategy != "truncate"


def document_side(model: dict | ModelModel) -> str:
    """What a model's document embeddings are made of: ``corpus`` rows or ``passages``."""
    return "passages" if splits_documents(model) else "corpus"


def window_starts(tokens: int, size: int, overlap: int) -> list[int]:
    """Token offsets where the windows over ``tokens`` tokens start."""
    stride = size - overlap
    return list(range(0, max(tokens - overlap, 1), stride))


def passage_id(doc_id: str, number: int) -> str:
    return f"{doc_id}#{number}"


def split_batch(batch: pa.RecordBatch, tokenizer, long_documents: LongDocuments) -> Iterator[dict]:
    """The passages of a batch of corpus rows, as rows of the passages contract."""
    size, overlap = long_documents.passage_tokens, long_documents.overlap
    first_only = long_documents.strategy == "firstp"
    doc_ids, titles, texts = (
        batch.column(name).to_pylist() for name in ("doc_id", "title", "text")
    )
    offsets = encode(tokenizer, texts, offsets=True)["offset_mapping"]
    for doc_id, title, text, spans in zip(doc_ids, titles, texts, offsets):
        starts = window_starts(len(spans), size, overlap)
        for number, start in enumerate(starts[:1] if first_only else starts):
            window = spans[start : start + size]
            passage = text[window[0][0] : window[-1][1]] if window else ""
            yield {
                "passage_id": passage_id(doc_id, number),
                "doc_id": doc_id,
                "title": title,
                "text": passage,
            }


def model_window(model_id: str, max_seq_length: int | None, tokenizer) -> int | None:
    """The tokens a sentence-transformers model reads: ``max_seq_length`` when configured, else
    its folder's sentence_bert_config.json, else the tokenizer's maximum (None if unbounded)."""
    if max_seq_length is not None:
        return max_seq_length
    config = Path(model_id) / "sentence_bert_config.json"
    if config.is_file():
        value = json.loads(config.read_text()).get("max_seq_length")
        if value is not None:
            return int(value)
    limit = tokenizer.model_max_length
    return int(limit) if limit < 1_000_000 else None


def read_tokens(tokenizer, titles: list, texts: list, prompt: str) -> list[int]:
    """Tokens of each passage as the model reads it: prompt, title and text, special tokens."""
    joined = [prompt + text for text in contracts.document_texts(titles, texts)]
    return [len(ids) for ids in tokenizer(joined, verbose=False)["input_ids"]]


def split_corpus(
    corpus_path: Path,
    tokenizer,
    long_documents: dict | LongDocuments,
    out_path: Path,
    prompt: str = "",
    window: int | None = None,
) -> dict:
    """Write the passages of every document of ``corpus_path`` as a model's ``long_documents``
    (the config's dict, typed here, or typed) says; streamed, a batch at a time.

    With the model's ``window`` (tokens), counts the passages that the model would cut: the
    title and ``prompt`` on each passage and the special tokens take room beside its
    ``passage_tokens``, and a cut passage hides its end from MaxP."""
    long_documents = LongDocuments.model_validate(long_documents)
    over = 0

    def rows() -> Iterator[dict]:
        nonlocal over
        for batch in contracts.stream_batches(corpus_path, ROWS_PER_BATCH):
            passages = list(split_batch(batch, tokenizer, long_documents))
            if window is not None:
                titles, texts = [p["title"] for p in passages], [p["text"] for p in passages]
                over += sum(n > window for n in read_tokens(tokenizer, titles, texts, prompt))
            yield from passages

    passages = contracts.write_rows(rows(), contracts.PASSAGES, out_path, ROWS_PER_BATCH)
    documents = contracts.ParquetFile(corpus_path).metadata.num_rows
    if over:
        log.warning(
            "%d of %d passages are longer than the model's %d-token window with title, prompt "
            "and special tokens: their ends are cut; lower passage_tokens",
            over,
            passages,
            window,
        )
    stats = {
        "documents": documents,
        "passages": passages,
        "passages_per_document": passages / documents if documents else 0.0,
    }
    return stats if window is None else stats | {"window": window, "passages_over_window": over}
