"""tokens: where a tokenizer's files are (by model key, id or folder), a loaded tokenizer's
fingerprint, and token ids (with character offsets) of texts as passages, positions and variants
count them. The tokenizer is loaded by irflow.encoding.models.load_tokenizer."""

from __future__ import annotations

import hashlib


def tokenizer_source(name: str, models: dict) -> dict:
    """A key of ``models`` stands for that model's files: its id and revision, and its
    ``local_copy`` where it names one (irflow.encoding.models.load_tokenizer reads them as the
    model's encoder does); anything else is an id or a folder."""
    if name not in models:
        return {"id": name, "revision": None}
    spec = models[name]
    source = {"id": spec["id"], "revision": spec["revision"]}
    return source | ({"local_copy": spec["local_copy"]} if spec.get("local_copy") else {})


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 of the tokenizer's full definition (vocabulary, normalizer, pre-tokenizer)."""
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()


def encode(tokenizer, texts, offsets: bool = False):
    """Token ids (and character offsets) without special tokens, truncation or the warning
    about texts longer than the model's maximum."""
    return tokenizer(texts, add_special_tokens=False, return_offsets_mapping=offsets, verbose=False)
