"""tokens: a Hugging Face fast tokenizer by model key, id or folder, its fingerprint, and token ids
(with character offsets) of texts as passages, positions and variants count them."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from irflow.core.errors import ConfigError
from irflow.core.offline import env_offline

if TYPE_CHECKING:
    pass


def tokenizer_source(name: str, models: dict) -> dict:
    """A key of ``models`` stands for that model's id and revision; anything else is an id or
    a folder."""
    if name in models:
        return {"id": models[name]["id"], "revision": models[name]["revision"]}
    return {"id": name, "revision": None}


def load_tokenizer(source: dict):
    from transformers import AutoTokenizer

    # Offline (irflow.core.offline), only a local folder or the Hugging Face cache is read.
    tokenizer = AutoTokenizer.from_pretrained(
        source["id"], revision=source["revision"], local_files_only=env_offline()
    )
    if not tokenizer.is_fast:
        raise ConfigError(
            f"tokenizer {source['id']!r} has no fast (Rust) version, which gives the character "
            "offsets that cutting at token boundaries needs"
        )
    return tokenizer


def tokenizer_fingerprint(tokenizer) -> str:
    """SHA-256 of the tokenizer's full definition (vocabulary, normalizer, pre-tokenizer)."""
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()


def encode(tokenizer, texts, offsets: bool = False):
    """Token ids (and character offsets) without special tokens, truncation or the warning
    about texts longer than the model's maximum."""
    return tokenizer(texts, add_special_tokens=False, return_offsets_mapping=offsets, verbose=False)
