"""expand: document expansion (docT5query, doc2query--): each document's text is followed by
queries a sequence-to-sequence model writes for it, and the expanded corpus is an ordinary
dataset beside its base (same queries and qrels), so BM25 on it is a system like any other.

Generation follows docT5query (Nogueira & Lin, 2019): top-k sampling (k = 10) of
``queries`` queries per document from the document's text, truncated to the model's input
length. Sampling is seeded once per job, and batches go in corpus order, so a rerun with the
same settings and batch size writes the same corpus. doc2query--'s filter (dropping generated
queries a relevance model scores low) is not applied.

The job is not resumable: a killed expansion starts again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pandas as pd

from irflow import contracts
from irflow.embed import pick_device, resolve_model

log = logging.getLogger(__name__)


@dataclass
class QueryGenerator:
    """A transformers sequence-to-sequence model with its tokenizer and ``expand`` settings."""

    model: object
    tokenizer: object
    spec: dict
    provenance: dict

    @classmethod
    def load(cls, spec: dict) -> QueryGenerator:
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        path, provenance = resolve_model(spec)
        device = pick_device(spec["device"])
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSeq2SeqLM.from_pretrained(path, dtype=getattr(torch, spec["dtype"]))
        model.to(device).eval()
        return cls(model, tokenizer, spec, provenance | {"device": device})

    def generate(self, texts: list[str]) -> list[list[str]]:
        """``queries`` sampled queries per text, in order."""
        import torch

        inputs = self.tokenizer(
            texts,
            truncation=True,
            max_length=self.spec["max_length"],
            padding=True,
            return_tensors="pt",
        ).to(self.model.device)
        with torch.inference_mode():
            outputs = self.model.generate(
                input_ids=inputs["input_ids"],
                attention_mask=inputs["attention_mask"],
                do_sample=True,
                top_k=self.spec["top_k"],
                max_new_tokens=self.spec["max_new_tokens"],
                num_return_sequences=self.spec["queries"],
            )
        decoded = self.tokenizer.batch_decode(outputs, skip_special_tokens=True)
        n = self.spec["queries"]
        return [decoded[i * n : (i + 1) * n] for i in range(len(texts))]


def expand_corpus(corpus: pd.DataFrame, generator: QueryGenerator) -> tuple[pd.DataFrame, dict]:
    """The corpus with each document's generated queries appended to its text (one space
    between), and statistics of what was added."""
    import torch

    torch.manual_seed(generator.spec["seed"])
    batch_size = generator.spec["batch_size"]
    texts = contracts.document_texts(corpus["title"].tolist(), corpus["text"].tolist())
    generated: list[list[str]] = []
    for start in range(0, len(texts), batch_size):
        generated += generator.generate(texts[start : start + batch_size])
    expanded = corpus.copy()
    expanded["text"] = [
        " ".join([text, *queries]) for text, queries in zip(corpus["text"], generated)
    ]
    words = [sum(len(query.split()) for query in queries) for queries in generated]
    stats = {
        "documents": len(corpus),
        "queries_per_document": generator.spec["queries"],
        "words_added_per_document": sum(words) / max(len(words), 1),
    }
    return expanded, stats
