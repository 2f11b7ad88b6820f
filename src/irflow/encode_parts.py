"""encode_parts: resumable, sharded encoding of a corpus or queries table into any vector layout.

Learned sparse vectors (``irflow.sparse``) and token embeddings (``irflow.late_interaction``)
are cached exactly as dense embeddings are (``irflow.embed``), through its helpers: parts named
by the rows they hold, in ``<output>.parts/`` with the same cache key (model settings, exact
revision or file hash, resolved dtype, input file), the same shard row ranges, and one job (or a
gather of shards) that streams them into one Parquet file. Only the layout of a part differs: a
``VectorModel`` encodes texts and writes them as a table.

Two things ``irflow.embed`` does for dense vectors are not done here: reusing a base dataset's
vectors for a variant's unchanged rows, and giving repeated texts one vector (both work on
fixed-size vectors). A variant's documents are encoded again.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from irflow import contracts
from irflow.cost import time_each
from irflow.embed import (
    ENCODE_SECONDS_KEY,
    SHARED_FACTS,
    SIDES,
    SUMMED_FACTS,
    _batches_between,
    _concatenate,
    _finished_parts,
    _missing_ranges,
    _prepare_parts,
    cache_key,
    shard_rows,
)
from irflow.errors import InputError

log = logging.getLogger(__name__)


class VectorModel(Protocol):
    spec: dict  # the ``models`` entry
    provenance: dict  # revision or file hash, device, resolved dtype

    def encode(self, texts: list[str], side: str) -> object: ...

    def table(self, ids: list[str], encoded: object) -> pa.Table: ...


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
    seconds of all of them, resumed ones included, as ``irflow.embed.embed_file`` does."""
    to_texts, _ = SIDES[side]
    source = pq.ParquetFile(input_path)
    if source.metadata.num_rows == 0:
        raise InputError(input_path, f"no rows to encode: the {side} table is empty")
    first, end = shard_rows(source.metadata.num_rows, *shard)
    if first == end:
        raise InputError(
            input_path,
            f"shard {shard[0]} of {shard[1]} would be empty: the {side} table has only "
            f"{source.metadata.num_rows} rows; use at most that many embed_shards",
        )
    parts = out_path.with_name(out_path.name + ".parts")
    _prepare_parts(parts, cache_key(model.spec, model.provenance, input_path))
    finished = [(start, stop) for start, stop, _ in _finished_parts(parts)]
    chunk_size = model.spec["chunk_size"]
    encoded_rows = 0
    for start, batch in tqdm(
        _batches_between(source, first, end, chunk_size),
        total=-(-(end - first) // chunk_size),
        desc=f"encode {side}",
        disable=None,
    ):
        for missing_start, missing_end in _missing_ranges(start, start + batch.num_rows, finished):
            rows = batch.slice(missing_start - start, missing_end - missing_start)
            part = parts / f"part-{missing_start:012d}-{missing_end:012d}.parquet"
            _encode_part(model, *to_texts(rows), side, part)
            encoded_rows += rows.num_rows
    total_rows = end - first
    if total_rows > encoded_rows:
        log.info(
            "resumed: %d of %d rows were already encoded", total_rows - encoded_rows, total_rows
        )
    part_paths = [path for _, _, path in _finished_parts(parts)]
    encode_seconds, _ = _concatenate(part_paths, out_path, input_path)
    shutil.rmtree(parts)
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
    for path, facts in zip(shard_paths, manifests):
        for key in SHARED_FACTS:
            if facts.get(key) != manifests[0].get(key):
                raise InputError(
                    path,
                    f"shard {facts['shard']} was encoded with {key} {facts.get(key)!r}, "
                    f"shard {manifests[0]['shard']} with {manifests[0].get(key)!r}; "
                    "rerun the shards so all use the same",
                )
    rows = sum(facts["rows"] for facts in manifests)
    expected = pq.ParquetFile(texts_path).metadata.num_rows
    if rows != expected:
        raise InputError(
            texts_path, f"the shards hold {rows} rows, the table {expected}: rerun them"
        )
    _concatenate(shard_paths, out_path, texts_path)
    shared = {key: manifests[0][key] for key in SHARED_FACTS if key in manifests[0]}
    summed = {key: sum(facts[key] for facts in manifests) for key in SUMMED_FACTS}
    devices = sorted({facts["device"] for facts in manifests})
    return shared | summed | {"shards": len(manifests), "device": ",".join(devices)}


def query_latency(model: VectorModel, queries_path: Path, count: int) -> dict[str, float]:
    """Seconds to encode each of the first ``count`` queries on its own, as a search would."""
    queries = pq.read_table(queries_path).slice(0, count).to_pydict()
    seconds = time_each(lambda text: model.encode([text], "queries"), queries["text"])
    return dict(zip(queries["query_id"], seconds))
