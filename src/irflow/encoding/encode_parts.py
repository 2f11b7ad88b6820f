"""encode_parts: resumable, sharded encoding of a corpus or queries table into any vector layout.

Learned sparse vectors (``irflow.retrieval.sparse``) and token embeddings
(``irflow.retrieval.late_interaction``) are cached exactly as dense embeddings are
(``irflow.encoding.embed``), through its helpers: parts named by the rows they hold, in
``<output>.parts/`` with the same cache key (model settings, exact revision or file hash, resolved
dtype, input file), the same shard row ranges, and one job (or a gather of shards) that streams them
into one Parquet file. Only the layout of a part differs: a ``VectorModel`` encodes texts and writes
them as a table.

Two things ``irflow.encoding.embed`` does for dense vectors are not done here: reusing a base
dataset's vectors for a variant's unchanged rows, and giving repeated texts one vector (both work on
fixed-size vectors). A variant's documents are encoded again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

import pyarrow as pa

from irflow.core import contracts
from irflow.core.settings_types import ModelModel
from irflow.encoding.embed import (
    ENCODE_SECONDS_KEY,
    cache_key,
    check_shards,
    concatenate,
    query_seconds,
    shard_range,
    whole_file_facts,
)
from irflow.encoding.models import SIDES, load_sized, side_prompt
from irflow.encoding.parts import encode_missing, finished_parts, owned_parts

log = logging.getLogger(__name__)


class VectorModel(Protocol):
    spec: ModelModel  # the typed ``models`` entry
    provenance: dict  # revision or file hash, device, resolved dtype

    def encode(self, texts: list[str], side: str) -> object: ...

    def table(self, ids: list[str], encoded: object) -> pa.Table: ...


@dataclass
class SideEncoder:
    """A loaded sentence-transformers encoder (``FACTORY``) with its typed ``models`` entry and
    provenance, that encodes queries and documents by separate calls."""

    FACTORY: ClassVar[str]

    model: object
    spec: ModelModel
    provenance: dict

    @classmethod
    def load(cls, entry: dict | ModelModel):
        """The encoder of a ``models`` entry: the config's dict, typed here, or the typed
        entry."""
        import sentence_transformers

        spec = ModelModel.model_validate(entry)
        model, provenance = load_sized(getattr(sentence_transformers, cls.FACTORY), spec)
        return cls(model, spec, provenance)

    def encode_side(self, texts: list[str], side: str, **options):
        """Queries through ``encode_query``, documents through ``encode_document`` (the model's
        own prefixes, or the configured prompt in their place)."""
        encode = self.model.encode_query if side == "queries" else self.model.encode_document
        return encode(
            texts,
            prompt=side_prompt(self.spec, side) or None,
            batch_size=self.spec.batch_size,
            show_progress_bar=False,
            **options,
        )


def _encode_part(model: VectorModel, ids: list[str], texts: list[str], side: str, path: Path):
    """Encode one part and write it with the seconds its encoding took."""
    started = time.perf_counter()
    encoded = model.encode(texts, side)
    seconds = time.perf_counter() - started
    table = model.table(ids, encoded)
    contracts.write_table(table.replace_schema_metadata({ENCODE_SECONDS_KEY: repr(seconds)}), path)


def encode_file(
    model: VectorModel,
    input_path: Path,
    side: str,
    out_path: Path,
    shard: tuple[int, int] = (0, 1),
) -> dict:
    """Encode the ``corpus`` or ``queries`` table at ``input_path`` into ``out_path`` (with
    ``shard`` (index, count): only that shard's rows), resuming from finished parts.

    Returns the rows, how many this call encoded and how many were resumed, and the encoding
    seconds of all of them, resumed ones included, as ``irflow.encoding.embed.embed_file`` does."""
    to_texts, _ = SIDES[side]
    source = contracts.ParquetFile(input_path)
    first, end = shard_range(source, input_path, side, shard, "encode")
    key = cache_key(model.spec, model.provenance, input_path)
    # A shard's file is temporary (deleted once gathered): keeping it would double its disk.
    with owned_parts(out_path, key, first, keep_result=shard[1] == 1) as parts:

        def encode_part(rows: pa.RecordBatch, start: int, end: int, part: Path) -> None:
            _encode_part(model, *to_texts(rows), side, part)

        encoded_rows = encode_missing(
            source,
            first,
            end,
            parts,
            model.spec.chunk_size,
            f"encode {side}",
            encode_part=encode_part,
            model=model.model,
        )
        part_paths = [path for _, _, path in finished_parts(parts)]
        encode_seconds, _ = concatenate(part_paths, out_path, (input_path, side, first, end))
    total_rows = contracts.read_metadata(out_path).num_rows
    if total_rows > encoded_rows:
        log.info(
            "resumed: %d of %d rows were already encoded", total_rows - encoded_rows, total_rows
        )
    return {
        "rows": total_rows,
        "rows_encoded": encoded_rows,
        "rows_resumed": total_rows - encoded_rows,
        "rows_reused": 0,
        "encode_seconds": encode_seconds,
    }


def gather(
    shard_paths: list[Path], manifests: list[dict], texts_path: Path, out_path: Path
) -> dict:
    """Join the shards' files, in shard order, into ``out_path``; refuses shards made with
    different settings or that do not add up to the table. Returns the whole file's facts."""
    check_shards(shard_paths, manifests, texts_path, "encoded")
    concatenate(shard_paths, out_path, (texts_path, "corpus", 0, None))
    return whole_file_facts(manifests)


def query_latency(model: VectorModel, queries_path: Path, count: int) -> dict[str, float]:
    """Seconds to encode each of the first ``count`` queries on its own, as a search would."""
    return query_seconds(lambda text: model.encode([text], "queries"), queries_path, count)
