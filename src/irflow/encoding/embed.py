"""embed: texts -> sentence-transformers embeddings, streamed and resumable.

The input is encoded in chunks, each written as its own Parquet part as soon as it is done,
held by one job at a time and resumed after a kill (``irflow.encoding.parts``). The cache key of
the parts is the model revision, prompt, max length, resolved dtype, backend and the input's
bytes: a different key discards them rather than mixing results. Each part records the seconds
its encoding took, so the throughput of a resumed job counts every row against the time spent
on it; the output records their sum, so a job that starts from it (its last result, kept for
an input written again unchanged) does too. The file written must hold exactly the input's
ids, in order, and a job's counts are its rows.

A dataset derived from another (a position-controlled variant, a curated copy, a benchmark
generated over its corpus) shares most of its texts with it. Given the other dataset's texts
and embeddings (``Reuse``), a row whose id and text (as the model reads it) are the same there
takes its vector from there instead of being encoded: equal to encoding it again up to the
float noise that batching causes anyway. Parts record how many rows they reused, so throughput
counts only encoded rows. The match is one DuckDB join of the two tables' (id, text digest)
pairs, done once per job and written in row order, so each part reads only its own rows'
vectors.

A large corpus is embedded in shards: shard i of N holds rows [i·R/N, (i+1)·R/N) of the R
input rows and is an independent, resumable job (a GPU each on a cluster). ``gather`` streams
the shards, in order, into the one embeddings file that a single job would have written, and
refuses shards that disagree on the model, its dtype or the input they were cut from.

Every pass over a whole table streams it: the joins and sorts run in DuckDB, which spills to
disk beyond ``DUCKDB_MEMORY_LIMIT``, so a job's memory does not grow with the corpus.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from irflow.core import contracts
from irflow.core.atomic import atomic_path
from irflow.core.errors import InputError
from irflow.core.fingerprint import file_md5, value_md5
from irflow.core.settings_types import ModelModel
from irflow.core.timing import time_each
from irflow.encoding.models import SIDES, Encoder, result_settings, side_prompt
from irflow.encoding.parts import batches_between, encode_missing, finished_parts, owned_parts

if TYPE_CHECKING:
    import duckdb

log = logging.getLogger(__name__)


# Part of the cache key: parts written in another layout (an older irflow) are discarded.
PARTS_LAYOUT = "row-range+reused"
ENCODE_SECONDS_KEY = b"irflow.encode_seconds"
REUSED_ROWS_KEY = b"irflow.reused_rows"
# Rows per record batch when embeddings are streamed from one file to another.
EMBEDDING_BATCH_ROWS = 65536
# Memory DuckDB may hold while it matches texts and vectors; beyond it, it spills to disk.
DUCKDB_MEMORY_LIMIT = "512MB"
# The id column of each side's table; an encoded file names its rows in column "id".
ID_COLUMNS = {"corpus": "doc_id", "passages": "passage_id", "queries": "query_id"}


def _digest(text: str) -> bytes:
    return hashlib.md5(text.encode()).digest()


def _write_digests(
    texts_path: Path, side: str, path: Path, first: int = 0, end: int | None = None
) -> None:
    """Stream the ``contracts.DIGESTS`` of rows [first, end) (default: all) of ``texts_path`` to
    ``path``."""
    to_texts, _ = SIDES[side]
    source = contracts.ParquetFile(
        texts_path, pre_buffer=False, buffer_size=contracts.STREAM_BUFFER_BYTES
    )
    end = source.metadata.num_rows if end is None else end
    with contracts.parquet_writer(path, contracts.DIGESTS) as writer:
        for start, batch in batches_between(source, first, end, EMBEDDING_BATCH_ROWS):
            ids, texts = to_texts(batch)
            columns = [
                pa.array(range(start, start + len(ids)), pa.int64()),
                pa.array(ids, pa.string()),
                pa.array(map(_digest, texts), pa.binary(16)),
            ]
            writer.write_batch(pa.record_batch(columns, schema=contracts.DIGESTS))


@contextmanager
def _spilling_duckdb(work_dir: Path) -> Iterator[tuple[duckdb.DuckDBPyConnection, Path]]:
    """A DuckDB connection that holds at most ``DUCKDB_MEMORY_LIMIT``, and a temporary folder
    in ``work_dir`` (removed afterwards) where it spills and its inputs can be written."""
    with tempfile.TemporaryDirectory(dir=work_dir, prefix=".duckdb-") as scratch:
        spill = Path(scratch) / "spill"
        config = {
            "memory_limit": DUCKDB_MEMORY_LIMIT,
            "temp_directory": str(spill),
            "threads": 1,
            "preserve_insertion_order": False,  # every query whose order matters sorts
        }
        import duckdb  # here: every dry run imports this module (through irflow.derived.expand)

        with duckdb.connect(config=config) as db:
            yield db, Path(scratch)


class Reuse:
    """Vectors computed before for the same ids and texts, e.g. by the dataset a variant was
    built from."""

    def __init__(self, texts_path: Path, embeddings_path: Path, side: str):
        self.texts_path, self.embeddings_path, self.side = texts_path, embeddings_path, side

    def match(self, input_path: Path, first: int, end: int, work_dir: Path) -> ReusedVectors:
        """The known vectors of rows [first, end) of ``input_path`` whose id and text are
        unchanged, written in row order to ``work_dir``."""
        out = work_dir / "reused.parquet"
        dim = contracts.read_schema(self.embeddings_path).field("vector").type.list_size
        with _spilling_duckdb(work_dir) as (db, scratch):
            _write_digests(input_path, self.side, scratch / "rows.parquet", first, end)
            _write_digests(self.texts_path, self.side, scratch / "known.parquet")
            # Joined, then sorted: in one statement DuckDB 2.0 ran out of memory at 2 M rows.
            matched = db.sql(
                "SELECT rows.row_index, vectors.vector FROM read_parquet($rows) AS rows "
                "JOIN read_parquet($known) AS known USING (id, digest) "
                "JOIN read_parquet($vectors) AS vectors USING (id)",
                params={
                    "rows": str(scratch / "rows.parquet"),
                    "known": str(scratch / "known.parquet"),
                    "vectors": str(self.embeddings_path),
                },
            )
            _write_result(matched, scratch / "matched.parquet")
            in_row_order = db.sql(
                "SELECT row_index, vector FROM read_parquet($matched) ORDER BY row_index",
                params={"matched": str(scratch / "matched.parquet")},
            )
            _write_result(in_row_order, out)
        return ReusedVectors(out, dim)


def _write_result(relation: duckdb.DuckDBPyRelation, path: Path) -> None:
    """Stream a DuckDB query's result, a record batch at a time, into a Parquet file."""
    with (
        relation.to_arrow_reader(EMBEDDING_BATCH_ROWS) as result,
        contracts.parquet_writer(path, result.schema) as writer,
    ):
        for batch in result:
            writer.write_batch(batch)


class ReusedVectors:
    """The rows a job reuses and their vectors, read forward a batch at a time."""

    def __init__(self, path: Path, dim: int):
        self.batches, self.dim = contracts.stream_batches(path, EMBEDDING_BATCH_ROWS), dim
        self.rows = np.empty(0, np.int64)
        self.vectors = np.empty((0, dim), np.float32)

    def take(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions from ``start``, vectors) of the reused rows in [start, end); rows before
        ``start`` are skipped for good, so calls must come in row order."""
        rows, vectors = [], []
        while True:
            lo, hi = np.searchsorted(self.rows, [start, end])
            rows.append(self.rows[lo:hi] - start)
            vectors.append(self.vectors[lo:hi])
            self.rows, self.vectors = self.rows[hi:], self.vectors[hi:]
            batch = None if len(self.rows) else next(self.batches, None)
            if batch is None:
                return np.concatenate(rows), np.concatenate(vectors)
            self.rows = batch.column("row_index").to_numpy()
            # DuckDB writes the vectors as variable-size lists, all of length dim.
            self.vectors = batch.column("vector").flatten().to_numpy().reshape(-1, self.dim)


def vector_settings(spec: ModelModel, provenance: dict) -> tuple[dict, dict]:
    """(settings, model identity) that make a loaded model's vectors (``spec``, its typed
    ``models`` entry): its result settings with the dtype and similarity in effect, and its
    revision or files' MD5."""
    # The dtype the model runs in, not the configured one: "auto" is float16 on a GPU and
    # float32 elsewhere, and the two must never share parts. Likewise the similarity in effect
    # of a dense model (the model's own when the config sets none): cosine parts hold unit
    # vectors, dot parts not. Sparse and ColBERT models have none.
    settings = result_settings(spec) | {
        "dtype": provenance["dtype"],
        "similarity": provenance.get("similarity"),
    }
    identity = {k: v for k, v in provenance.items() if k in ("revision", "files_md5")}
    return settings, identity


def cache_key(spec: ModelModel, provenance: dict, input_path: Path) -> str:
    return value_md5([PARTS_LAYOUT, *vector_settings(spec, provenance), file_md5(input_path)])


def shard_rows(total_rows: int, shard: int, shards: int) -> tuple[int, int]:
    """[first, end) of shard ``shard`` (from 0) of ``shards`` over ``total_rows`` rows."""
    return shard * total_rows // shards, (shard + 1) * total_rows // shards


def shard_range(
    source: contracts.ParquetFile, input_path: Path, side: str, shard: tuple[int, int], verb: str
) -> tuple[int, int]:
    """[first, end) of ``shard`` over the table; refuses an empty table or an empty shard."""
    if source.metadata.num_rows == 0:
        raise InputError(input_path, f"no rows to {verb}: the {side} table is empty")
    first, end = shard_rows(source.metadata.num_rows, *shard)
    if first == end:
        raise InputError(
            input_path,
            f"shard {shard[0]} of {shard[1]} would be empty: the {side} table has only "
            f"{source.metadata.num_rows} rows; use at most that many embed_shards",
        )
    return first, end


def embed_file(
    encoder: Encoder,
    input_path: Path,
    side: str,
    out_path: Path,
    reuse: Reuse | None = None,
    shard: tuple[int, int] = (0, 1),
) -> dict:
    """Embed the ``corpus``, ``passages`` or ``queries`` table at ``input_path`` into
    ``out_path``, taking unchanged rows' vectors from ``reuse`` when given; with ``shard``
    (index, count), only that shard's rows.

    Returns the rows written, how many were handled by this call and how many were resumed
    from finished parts, how many of all rows were reused rather than encoded, and
    ``encode_seconds``: the encoding time of every row, resumed ones included, so that
    (rows − rows_reused) / encode_seconds is the throughput.
    """
    to_texts, _ = SIDES[side]
    prompt = side_prompt(encoder.spec, side)
    source = contracts.ParquetFile(input_path)
    first, end = shard_range(source, input_path, side, shard, "embed")
    key = cache_key(encoder.spec, encoder.provenance, input_path)
    # A shard's file is temporary (deleted once gathered): keeping it would double its disk.
    with owned_parts(out_path, key, first, keep_result=shard[1] == 1) as parts:
        reused = reuse.match(input_path, first, end, parts) if reuse is not None else None

        def encode_part(rows: pa.RecordBatch, start: int, end: int, part: Path) -> None:
            known = reused.take(start, end) if reused is not None else None
            _encode_part(encoder, *to_texts(rows), prompt, part, known)

        chunk_size = encoder.spec.chunk_size
        encoded_rows = encode_missing(
            source,
            first,
            end,
            parts,
            chunk_size,
            f"embed {side}",
            encode_part=encode_part,
            model=encoder.model,
        )
        part_paths = [path for _, _, path in finished_parts(parts)]
        # A shard's copies of a text may be in another shard: the gather unifies them.
        same_text = SameTextSameVector(input_path, side, parts) if shard[1] == 1 else None
        if same_text and same_text.copies:
            log.info("%d rows repeat an earlier row's text and take its vector", same_text.copies)
        encode_seconds, reused_rows = concatenate(
            part_paths, out_path, (input_path, side, first, end), same_text
        )
    total_rows = contracts.read_metadata(out_path).num_rows
    resumed_rows = total_rows - encoded_rows
    if resumed_rows:
        log.info("resumed: %d of %d rows were already embedded", resumed_rows, total_rows)
    return {
        "rows": total_rows,
        "rows_encoded": encoded_rows,
        "rows_resumed": resumed_rows,
        "rows_reused": reused_rows,
        "encode_seconds": encode_seconds,
    }


# Shard manifest facts that must be the same in every shard of one embeddings file.
SHARED_FACTS = (
    "dataset_checksum",
    "settings",
    "model",
    "revision",
    "files_md5",
    "dtype",
    "similarity",
    "similarity_from",
    "max_seq_length",
    "backend",
    # A ColBERT's lengths that applied (irflow.retrieval.late_interaction.applied_lengths).
    "query_length",
    "queries_padded_to",
    "document_length",
)
SUMMED_FACTS = ("rows", "rows_encoded", "rows_resumed", "rows_reused", "encode_seconds")
# Summed where the shards count them: a ColBERT's texts cut to its lengths.
COUNTED_FACTS = ("texts_truncated",)


def gather(
    shard_paths: list[Path], manifests: list[dict], texts_path: Path, side: str, out_path: Path
) -> dict:
    """Join the shards' embeddings, in shard order, into ``out_path``; returns the facts of
    the whole file: those all shards share, the summed row counts and encoding seconds, and
    the devices the shards ran on."""
    check_shards(shard_paths, manifests, texts_path, "embedded")
    same_text = SameTextSameVector(texts_path, side, out_path.parent)
    concatenate(shard_paths, out_path, (texts_path, side, 0, None), same_text)
    return whole_file_facts(manifests)


def check_shards(
    shard_paths: list[Path], manifests: list[dict], texts_path: Path, verb: str
) -> None:
    """Refuse shards made with different settings, whose files do not hold the rows their
    manifests count, or that do not add up to the table."""
    expected_rows = contracts.ParquetFile(texts_path).metadata.num_rows
    for path, facts in zip(shard_paths, manifests):
        written = contracts.read_metadata(path).num_rows
        if written != facts["rows"]:
            raise InputError(
                path,
                f"holds {written} rows, its manifest counts {facts['rows']}: "
                f"rerun shard {facts['shard']}",
            )
        for key in SHARED_FACTS:
            if facts.get(key) != manifests[0].get(key):
                raise InputError(
                    path,
                    f"shard {facts['shard']} was {verb} with {key} {facts.get(key)!r}, "
                    f"shard {manifests[0]['shard']} with {manifests[0].get(key)!r}; "
                    "rerun the shards so all use the same",
                )
    rows = sum(facts["rows"] for facts in manifests)
    if rows != expected_rows:
        raise InputError(
            texts_path, f"the shards hold {rows} rows, the table {expected_rows}: rerun them"
        )


def whole_file_facts(manifests: list[dict]) -> dict:
    """The facts all shards share, the summed row (and cut text) counts and encoding seconds,
    the devices."""
    shared = {key: manifests[0][key] for key in SHARED_FACTS if key in manifests[0]}
    counted = tuple(key for key in COUNTED_FACTS if key in manifests[0])
    summed = {key: sum(facts[key] for facts in manifests) for key in SUMMED_FACTS + counted}
    devices = sorted({facts["device"] for facts in manifests})
    return shared | summed | {"shards": len(manifests), "device": ",".join(devices)}


def _encode_part(
    encoder: Encoder,
    ids: list[str],
    texts: list[str],
    prompt: str,
    path: Path,
    known: tuple[np.ndarray, np.ndarray] | None,
):
    """Encode one part, but for the rows ``known`` gives (positions, vectors), and write it
    with the seconds its encoding took and the rows it reused."""
    positions, known_vectors = known if known is not None else (np.empty(0, np.int64), None)
    todo = np.setdiff1d(np.arange(len(ids)), positions)
    started = time.perf_counter()
    encoded = encoder.encode([texts[i] for i in todo], prompt) if len(todo) else None
    seconds = time.perf_counter() - started
    dim = (encoded if encoded is not None else known_vectors).shape[1]
    vectors = np.empty((len(ids), dim), np.float32)
    if len(todo):
        vectors[todo] = encoded
    if len(positions):
        vectors[positions] = known_vectors
    table = pa.table(
        {"id": ids, "vector": contracts.vector_array(vectors)},
        schema=contracts.embeddings_schema(vectors.shape[1]),
    )
    metadata = {
        ENCODE_SECONDS_KEY: repr(seconds).encode(),
        REUSED_ROWS_KEY: str(len(positions)).encode(),
    }
    contracts.write_table(table.replace_schema_metadata(metadata), path)


def query_latency(encoder: Encoder, queries_path: Path, count: int) -> dict[str, float]:
    """Seconds to encode each of the first ``count`` queries on its own, as a search would."""
    prompt = encoder.spec.query_prompt
    return query_seconds(lambda text: encoder.encode([text], prompt), queries_path, count)


def query_seconds(
    encode_one: Callable[[str], object], queries_path: Path, count: int
) -> dict[str, float]:
    queries = contracts.read_table(queries_path).slice(0, count).to_pydict()
    seconds = time_each(encode_one, queries["text"])
    return dict(zip(queries["query_id"], seconds))


class SameTextSameVector:
    """Gives every row whose text (as the model reads it) occurs earlier in the table the
    vector of that earlier row.

    A transformer's output depends, at about 1e-7, on the padding of the batch a text lands
    in, and sentence-transformers sorts each call's texts by length with an unstable sort, so
    two copies of one text can get vectors that differ in the last bits. Duplicates then
    never tie, and trec_eval's tie order (doc id descending) stops deciding between them: on
    ArguAna, whose corpus holds 48 pairs of identical documents, that moved all-MiniLM-L6-v2's
    nDCG@10 from MTEB's 0.50167 to 0.50188. With one vector per text the result no longer
    depends on batch size, chunk size, shards or library versions.

    Only the rows of repeated texts are listed (found by DuckDB), and only the vector of each
    repeated text's first copy is held, until its last copy has passed.
    """

    def __init__(self, texts_path: Path, side: str, work_dir: Path):
        with _spilling_duckdb(work_dir) as (db, scratch):
            digests = str(scratch / "digests.parquet")
            _write_digests(texts_path, side, Path(digests))
            plan = db.execute(
                "WITH repeated AS (SELECT digest, min(row_index) AS source, "
                "max(row_index) AS last FROM read_parquet($digests) "
                "GROUP BY digest HAVING count(*) > 1) "
                "SELECT row_index, source, last FROM read_parquet($digests) "
                "JOIN repeated USING (digest) ORDER BY row_index",
                {"digests": digests},
            ).fetchnumpy()
        # Each row of a repeated text, the first and the last row with that text.
        self.rows, self.sources, self.lasts = (
            np.asarray(plan[column], np.int64) for column in ("row_index", "source", "last")
        )
        self.copies = int(np.count_nonzero(self.rows != self.sources))
        self.vectors: dict[int, np.ndarray] = {}  # by first row, of texts with copies to come

    def apply(self, batch: pa.RecordBatch, start: int) -> pa.RecordBatch:
        """``batch``, rows ``start`` on of the table, with copies given their original's vector;
        batches must come in row order."""
        lo, hi = np.searchsorted(self.rows, [start, start + batch.num_rows])
        rows, sources, lasts = self.rows[lo:hi], self.sources[lo:hi], self.lasts[lo:hi]
        if not len(rows):
            return batch
        matrix = contracts.vector_matrix(batch.column("vector"))
        originals = rows == sources
        for row in rows[originals]:
            self.vectors[row] = matrix[row - start].copy()
        if originals.all():
            return batch
        matrix = matrix.copy()
        for row, source in zip(rows[~originals], sources[~originals]):
            matrix[row - start] = self.vectors[source]
        for source in sources[rows == lasts]:
            del self.vectors[source]
        column = batch.schema.get_field_index("vector")
        return batch.set_column(column, "vector", contracts.vector_array(matrix))


def concatenate(
    part_paths: list[Path],
    out_path: Path,
    rows: tuple[Path, str, int, int | None],
    same_text: SameTextSameVector | None = None,
) -> tuple[float, int]:
    """Stream the parts, in order and a record batch at a time, into one Parquet file that
    appears atomically; with ``same_text``, copies of a text get one vector. ``rows`` (input
    table, side, first row, end row or None for its last) are the rows the file must hold.

    Returns the encode seconds and reused rows the parts recorded (none for shards, whose
    totals are in their manifests). An id that occurs twice is refused:
    the vectors are looked up by id. So is a file whose ids are not those of ``rows``.
    """
    input_path = rows[0]
    encode_seconds, reused_rows = 0.0, 0
    for part in part_paths:
        metadata = contracts.read_schema(part).metadata or {}
        encode_seconds += float(metadata.get(ENCODE_SECONDS_KEY, 0))
        reused_rows += int(metadata.get(REUSED_ROWS_KEY, 0))
    totals = {ENCODE_SECONDS_KEY: repr(encode_seconds), REUSED_ROWS_KEY: str(reused_rows)}
    schema = contracts.read_schema(part_paths[0]).with_metadata(totals)
    start = 0
    with atomic_path(out_path) as tmp:
        with contracts.parquet_writer(tmp, schema) as writer:
            for part in part_paths:
                for batch in contracts.stream_batches(part, EMBEDDING_BATCH_ROWS):
                    writer.write_batch(same_text.apply(batch, start) if same_text else batch)
                    start += batch.num_rows
        with _spilling_duckdb(out_path.parent) as (db, _):
            repeated, example = db.execute(
                "SELECT count(*), arg_min(id, first) FROM (SELECT id, min(file_row_number) AS "
                "first FROM read_parquet($path, file_row_number = true) GROUP BY id "
                "HAVING count(*) > 1)",
                {"path": str(tmp)},
            ).fetchone()
        if repeated:
            raise InputError(
                input_path,
                f"{repeated} id(s) occur more than once, e.g. {example!r}; "
                "embeddings are looked up by id",
            )
        _check_ids(tmp, out_path, *rows)
    return encode_seconds, reused_rows


def _check_ids(
    written: Path, out_path: Path, input_path: Path, side: str, first: int, end: int | None
) -> None:
    """Refuse ``written`` (to become ``out_path``) unless its ids are those of rows
    [first, end) of ``input_path``, in order."""
    source = contracts.ParquetFile(input_path)
    end = source.metadata.num_rows if end is None else end
    expected = (
        batch.column(0)
        for _, batch in batches_between(
            source, first, end, EMBEDDING_BATCH_ROWS, [ID_COLUMNS[side]]
        )
    )
    found = (
        batch.column(0)
        for batch in contracts.ParquetFile(written).iter_batches(
            EMBEDDING_BATCH_ROWS, columns=["id"]
        )
    )
    ids_in = (id_ for column in found for id_ in column.to_pylist())
    ids_expected = (id_ for column in expected for id_ in column.to_pylist())
    for row, (got, wanted) in enumerate(itertools.zip_longest(ids_in, ids_expected)):
        if got != wanted:
            rows = contracts.read_metadata(written).num_rows
            raise InputError(
                out_path,
                f"holds {rows} rows, but rows {first} to {end} of {input_path} are "
                f"{end - first}; its row {row} is {got!r}, the input's {wanted!r}: "
                "embed it again",
            )


def read_embeddings(path: Path, ids: Iterable[str] | None = None) -> tuple[list[str], np.ndarray]:
    """(ids, float32 matrix) of an embeddings file; with ``ids``, only the rows of those ids.

    The filter is applied while the file is scanned, so only the selected rows are held.
    """
    selection = None if ids is None else pc.field("id").isin(pa.array(list(ids), pa.string()))
    table = contracts.read_table(path, filters=selection)
    matrix = contracts.vector_matrix(table.column("vector").combine_chunks())
    return table.column("id").to_pylist(), np.ascontiguousarray(matrix, dtype=np.float32)
