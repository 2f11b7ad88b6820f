"""embed: texts -> sentence-transformers embeddings, streamed and resumable.

The input is encoded in chunks; each chunk is written as its own Parquet part as soon as it
is done, so memory stays bounded and a killed job resumes from the last finished chunk. The
parts sit in ``<output>.parts/`` with the cache key that produced them; a different key (a
new model revision, prompt, max length or input) discards them rather than mixing results.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from irflow import contracts
from irflow.cost import time_each
from irflow.errors import InputError
from irflow.fingerprint import file_md5, folder_md5, value_md5

log = logging.getLogger(__name__)

# Settings that change the vectors; batch size and device do not (beyond float noise).
RESULT_SETTINGS = (
    "id",
    "revision",
    "query_prompt",
    "document_prompt",
    "max_seq_length",
    "normalize",
    "dtype",
)


def pick_device(requested: str = "auto") -> str:
    import torch

    if requested != "auto":
        return requested
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def resolve_model(spec: dict) -> tuple[str, dict]:
    """Local folder or Hugging Face snapshot -> (path, provenance with the exact revision)."""
    if Path(spec["id"]).is_dir():
        return spec["id"], {"model": spec["id"], "files_md5": folder_md5(spec["id"])}
    from huggingface_hub import snapshot_download

    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    path = snapshot_download(spec["id"], revision=spec["revision"], local_files_only=offline)
    # Snapshot folders are named by the commit they hold.
    return path, {"model": spec["id"], "revision": Path(path).name}


def load_model(factory, spec: dict, **options) -> tuple[object, dict]:
    """Build a sentence-transformers model (``factory``) on the configured device and dtype.

    dtype "auto" means float16 on a GPU, float32 elsewhere. Returns the model and its
    provenance: the exact revision or file hash, device and dtype.
    """
    import torch

    path, provenance = resolve_model(spec)
    device = pick_device(spec["device"])
    model = factory(path, device=device, **options)
    dtype = spec["dtype"]
    if dtype == "auto":
        dtype = "float16" if device.startswith("cuda") else "float32"
    model.to(getattr(torch, dtype))
    return model, provenance | {"device": device, "dtype": dtype}


@dataclass
class Encoder:
    """A loaded model with the settings that apply to it."""

    model: object
    spec: dict
    device: str
    provenance: dict

    @classmethod
    def load(cls, spec: dict) -> Encoder:
        from sentence_transformers import SentenceTransformer

        model, provenance = load_model(SentenceTransformer, spec)
        if spec["max_seq_length"] is not None:
            model.max_seq_length = spec["max_seq_length"]
        provenance["max_seq_length"] = model.max_seq_length
        return cls(model, spec, provenance["device"], provenance)

    def encode(self, texts: list[str], prompt: str) -> np.ndarray:
        vectors = self.model.encode(
            texts,
            prompt=prompt or None,
            batch_size=self.spec["batch_size"],
            normalize_embeddings=self.spec["normalize"],
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.astype(np.float32, copy=False)


def document_texts(batch: pa.RecordBatch) -> tuple[list[str], list[str]]:
    """(ids, title + " " + text) as BEIR and MTEB build document inputs."""
    titles, texts = batch.column("title").to_pylist(), batch.column("text").to_pylist()
    return batch.column("doc_id").to_pylist(), contracts.document_texts(titles, texts)


def query_texts(batch: pa.RecordBatch) -> tuple[list[str], list[str]]:
    return batch.column("query_id").to_pylist(), batch.column("text").to_pylist()


def cache_key(spec: dict, provenance: dict, input_path: Path) -> str:
    settings = {key: spec[key] for key in RESULT_SETTINGS}
    identity = {k: v for k, v in provenance.items() if k in ("revision", "files_md5")}
    return value_md5([settings, identity, file_md5(input_path)])


def _prepare_parts(parts: Path, key: str) -> None:
    key_file = parts / "key.json"
    if parts.exists() and (not key_file.exists() or json.loads(key_file.read_text()) != key):
        log.info("discarding partial embeddings in %s: made with other settings", parts)
        shutil.rmtree(parts)
    parts.mkdir(parents=True, exist_ok=True)
    key_file.write_text(json.dumps(key))


def embed_file(encoder: Encoder, input_path: Path, side: str, out_path: Path) -> dict:
    """Embed the ``corpus`` or ``queries`` table at ``input_path`` into ``out_path``."""
    to_texts, prompt = {
        "corpus": (document_texts, encoder.spec["document_prompt"]),
        "queries": (query_texts, encoder.spec["query_prompt"]),
    }[side]
    source = pq.ParquetFile(input_path)
    chunk_size = encoder.spec["chunk_size"]
    parts = out_path.with_name(out_path.name + ".parts")
    _prepare_parts(parts, cache_key(encoder.spec, encoder.provenance, input_path))

    if source.metadata.num_rows == 0:
        raise InputError(input_path, f"no rows to embed: the {side} table is empty")
    chunks = -(-source.metadata.num_rows // chunk_size)
    resumed = encoded = 0
    encode_seconds = 0.0
    for index, batch in enumerate(
        tqdm(source.iter_batches(chunk_size), total=chunks, desc=f"embed {side}", disable=None)
    ):
        part = parts / f"part-{index:06d}.parquet"
        if part.exists():
            resumed += 1
            continue
        ids, texts = to_texts(batch)
        started = time.perf_counter()
        vectors = encoder.encode(texts, prompt)
        encode_seconds += time.perf_counter() - started
        encoded += len(texts)
        dim = vectors.shape[1]
        table = pa.table(
            {"id": ids, "vector": pa.FixedSizeListArray.from_arrays(vectors.reshape(-1), dim)},
            schema=contracts.embeddings_schema(dim),
        )
        contracts.write_table(table, part)
    if resumed:
        log.info("resumed: %d of %d chunks were already embedded", resumed, chunks)
    rows = _concatenate(sorted(parts.glob("part-*.parquet")), out_path)
    shutil.rmtree(parts)
    return {
        "rows": rows,
        "chunks": chunks,
        "chunks_resumed": resumed,
        "rows_encoded": encoded,
        "encode_seconds": encode_seconds,
    }


def query_latency(encoder: Encoder, queries_path: Path, count: int) -> dict[str, float]:
    """Seconds to encode each of the first ``count`` queries on its own, as a search would."""
    queries = pq.read_table(queries_path).slice(0, count).to_pydict()
    prompt = encoder.spec["query_prompt"]
    seconds = time_each(lambda text: encoder.encode([text], prompt), queries["text"])
    return dict(zip(queries["query_id"], seconds))


def _concatenate(part_paths: list[Path], out_path: Path) -> int:
    """Stream the parts, in order, into one Parquet file that appears atomically."""
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    schema = pq.read_schema(part_paths[0])
    rows = 0
    with pq.ParquetWriter(tmp, schema) as writer:
        for part in part_paths:
            table = pq.read_table(part)
            rows += table.num_rows
            writer.write_table(table)
    tmp.replace(out_path)
    return rows


def read_embeddings(path: Path) -> tuple[list[str], np.ndarray]:
    table = pq.read_table(path)
    vector = table.column("vector").combine_chunks()
    dim = vector.type.list_size
    matrix = vector.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
    return table.column("id").to_pylist(), np.ascontiguousarray(matrix, dtype=np.float32)
