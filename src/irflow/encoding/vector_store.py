"""vector_store: an embed job's vectors kept once per machine (``irflow.core.store``), so that a
second experiment folder that encodes the same texts with the same model links them instead.

The key is everything the vectors depend on: the model's result settings with the dtype and
similarity in effect and its revision or files' MD5 (``irflow.encoding.embed.vector_settings``,
what keys the job's own resumable parts), the graph an ONNX backend runs on, the side (which
prompt applies) and the texts' content: each row's id and text as the model reads it, in
order, whatever the dataset is called or however its table was written. Batch size, chunk size
and device are not in it: they change the vectors by float noise only, as for the parts.

A job whose vectors are in the store encodes nothing: its manifest counts no rows encoded and
says where the vectors came from (``vector_store``), with the encoding seconds of the job that
made them, so the cost table's throughput is that of their encoding. A shard of a large corpus
is not stored (its file is temporary); its gathered file is the one a later job would want,
and the shards' jobs are those a cluster runs.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from irflow.core import contracts
from irflow.core.fingerprint import value_md5
from irflow.core.settings_types import ModelModel
from irflow.core.store import Store, store_root
from irflow.encoding.embed import EMBEDDING_BATCH_ROWS, vector_settings
from irflow.encoding.models import SIDES

log = logging.getLogger(__name__)

# Part of the key: vectors stored in another layout (an older irflow) are not taken.
LAYOUT = "embeddings-v1"
FILE = "vectors.parquet"


def texts_md5(texts_path: Path, side: str) -> str:
    """MD5 of each row's id and text as the model reads it (``SIDES``), in row order."""
    to_texts, _ = SIDES[side]
    digest = hashlib.md5()
    for batch in contracts.stream_batches(texts_path, EMBEDDING_BATCH_ROWS):
        for id_, text in zip(*to_texts(batch)):
            digest.update(f"{len(id_)}:{id_}{len(text)}:{text}".encode())
    return digest.hexdigest()


def vectors_key(
    spec: ModelModel, provenance: dict, texts_path: Path, side: str
) -> tuple[str, dict]:
    """The store key of a side's vectors and what it is made of."""
    settings, model = vector_settings(spec, provenance)
    identity = {
        "layout": LAYOUT,
        "side": side,
        "settings": settings,
        "model": model,
        "export_key": provenance.get("export_key"),
        "texts_md5": texts_md5(texts_path, side),
    }
    return value_md5(identity), identity


def stored_or_made(
    configured: str | bool | None,
    spec: ModelModel,
    provenance: dict,
    texts_path: Path,
    side: str,
    out_path: Path,
    make: Callable[[], dict],
) -> dict:
    """The facts of ``out_path``, the vectors of ``texts_path``'s ``side``: linked from the
    store (``configured``: the config key ``vector_store``) when it holds them, else made by
    ``make()`` (which writes ``out_path`` and returns its facts) and stored; with the store's
    part under ``vector_store`` (None when there is no store)."""
    root = store_root(configured)
    if root is None:
        return make() | {"vector_store": None}
    key, identity = vectors_key(spec, provenance, texts_path, side)
    describes = {
        "model": provenance.get("model", spec.id),
        "side": side,
        "texts_md5": identity["texts_md5"],
    }
    facts, done = Store(root).obtain(key, {FILE: out_path}, make, describes)
    if done["found"]:
        log.info(
            "%s: the vector store holds these %d vectors (%s, %s): nothing encoded",
            side,
            facts["rows"],
            done["entry"],
            done["placed"][FILE],
        )
        facts = facts | {"rows_encoded": 0, "rows_resumed": 0}
    else:
        log.info("%s: %d vectors kept in the vector store (%s)", side, facts["rows"], done["entry"])
    return facts | {"vector_store": done}
