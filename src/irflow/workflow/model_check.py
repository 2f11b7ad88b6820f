"""model_check: under ``offline: true``, every model and tokenizer a config names must be a
folder or in the Hugging Face cache, checked when the config is, before any job runs.

Offline, a job reads a Hugging Face id from the cache alone (irflow.encoding.models.resolve_model,
irflow.data.tokens.load_tokenizer); one that is not there used to fail at run time, with
the library's advice to pass ``local_files_only=False``, after the jobs before it had run. The
lookup here is the jobs' own: huggingface_hub's ``snapshot_download`` with
``local_files_only``, which reads the cache and never the network.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

# The blocks whose entries name a model by ``id`` (and ``revision``): the encoders (dense,
# SPLADE, ColBERT), the rerankers (cross-encoders) and document expansion's models.
MODEL_BLOCKS = ("models", "rerankers", "expand")


def named_models(config: dict) -> Iterator[tuple[str, str, str | None]]:
    """(config key, Hugging Face id or folder, revision) of each model and tokenizer the
    config names; a tokenizer that is a key of ``models`` is that model, named once."""
    for block in MODEL_BLOCKS:
        yield from _ids(config.get(block) or {}, block)
    yield from _tokenizers(config, "", set(config.get("models") or {}))


def _ids(value, key: str) -> Iterator[tuple[str, str, str | None]]:
    if not isinstance(value, dict):
        return
    if isinstance(value.get("id"), str):
        yield f"{key}.id", value["id"], value.get("revision")
    for name, item in value.items():
        yield from _ids(item, f"{key}.{name}")


def _tokenizers(value, key: str, model_names: set) -> Iterator[tuple[str, str, None]]:
    if isinstance(value, list):
        for position, item in enumerate(value):
            yield from _tokenizers(item, f"{key}[{position}]", model_names)
    if not isinstance(value, dict):
        return
    for name, item in value.items():
        place = f"{key}.{name}" if key else str(name)
        if name == "tokenizer" and isinstance(item, str) and item not in model_names:
            yield place, item, None
        else:
            yield from _tokenizers(item, place, model_names)


def offline_model_problems(config: dict) -> list[str]:
    """One line per model or tokenizer that ``offline: true`` cannot load: neither a folder nor
    in the Hugging Face cache, each naming its config key and the fix. None when online."""
    if not config.get("offline"):
        return []
    missing = [
        (key, model_id)
        for key, model_id, revision in dict.fromkeys(named_models(config))
        if not Path(model_id).is_dir() and not _cached(model_id, revision)
    ]
    if not missing:
        return []
    from huggingface_hub.constants import HF_HUB_CACHE

    return [
        f"{key}: {model_id!r} is not a folder and not in the Hugging Face cache ({HF_HUB_CACHE}), "
        "and offline: true forbids downloading it; give a local folder or run once online"
        for key, model_id in missing
    ]


def _cached(model_id: str, revision: str | None) -> bool:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        snapshot_download(model_id, revision=revision, local_files_only=True)
    except (LocalEntryNotFoundError, HFValidationError):  # not there, or no valid repo id
        return False
    return True
