"""The Parquet contracts between stages.

Every stage reads and writes only these tables, so a stage can be replaced without
its neighbours knowing. Each table is a plain Parquet file that DuckDB reads directly.

corpus      doc_id, title, text                                one row per document
queries     query_id, text                                     one row per query
qrels       query_id, doc_id, relevance, span_start, span_end  one row per judgement;
            the span columns are character offsets of the relevant passage in the
            document text, null when the collection gives none. A dataset ingested
            from the PosIR layout has two more columns on the row that carries the
            span, else null: doc_tokens, the judged document's length in tokens as
            the collection states it (PosIR's pos_token_length, counted on the
            English original so that translations share length buckets), which the
            position analysis buckets by; and doc_chars, the length in characters of
            the text the span counts (PosIR's pos_char_length, which a translation's
            own text need not have), which relative positions divide by. A dataset
            made from another (variant, expansion, quality control) writes the five
            columns
audit       doc_id, action, reason, judged, filter, value      one row per filter decision:
            the filter's name and the value it measured (null when none, e.g. an
            exact duplicate); a document failing several quality filters has a row
            for each (see irflow.data.filter)
passages    passage_id, doc_id, title, text                    a document's passages for
            the long-document strategies, in corpus order (see irflow.data.passages)
embeddings  id, vector (fixed-size list of float32)            queries, documents or
            passages
run         query_id, doc_id, score, rank                      rank 1 is best; order and
            rank follow trec_eval (score descending, then doc_id descending); a
            document appears at most once per query;
            file metadata ``irflow.lineage`` (JSON) says how the run was made, e.g. the
            first-stage run a reranker read
per_query   query_id, metric, value                            trec_eval metric names;
            gm_* values are logs, as trec_eval keeps them per query
summary     dataset, system, metric, value, queries, seed      each metric over the judged
            queries as trec_eval aggregates it: mean, sum for num_*, geometric mean for
            gm_*; quality metrics only (cost is its own table); seed: the seed a dataset
            was made under, where it was made under several (irflow.core.seeds), else null

Tables of the analysis stages (one file each, not read by another stage's contract):
clusters       dataset's near-duplicate clusters: cluster (the kept doc_id), doc_id, position,
               kept, judged, jaccard, estimated_jaccard, size (see irflow.data.dedup)
filter_summary dataset, filter, dropped, flagged, documents_in, documents_out, clusters
               (see irflow.data.filter)
negatives      query_id, query, positive_id, positive, positive_score, negative_ids,
               negatives, negative_scores, negative_ranks: hard-negative training triples
               (see irflow.derived.negatives)
significance   family, dataset, metric, system_a, system_b, queries, mean_a, mean_b,
               b_minus_a (mean_b - mean_a: positive when b wins; a is the baseline when there
               is one), t_statistic and effect_size (d_z) of b - a, t and randomization
               p-values raw and Holm-corrected, randomization_p_floor (2 / (permutations + 1))
               and whether a p sits at it (see irflow.evaluation.significance)
correlations   kind, left, right, metric, systems, spearman(_p), kendall(_p); kind is
               datasets, metrics, benchmarks, reference or buckets (see irflow.analyses.correlate)
bootstrap      left, right, draw, sampled_queries, whole_datasets, every_query, spearman,
               kendall, seed: one row per subsampling draw of each seed (irflow.core.seeds)
position_bins  dataset, system, bucket, metric, bin, bin_start, bin_end, mean_ndcg,
               queries, excluded: the mean score of every relative-position bin of every
               length bucket (see irflow.analyses.position); dataset is a positionalize block for
               variants
psi            dataset, system, bucket, metric, mean_ndcg, mean_ndcg_queries, psi, psi_low,
               psi_high, psi_every_bin, bins_used, bins_excluded, trend, slope, queries,
               reason: one row per length bucket and one, bucket "all", for them pooled
               (its mean_ndcg is the mean over every scored query; see irflow.analyses.position)
query_types    dataset, system, metric, query_type, scored_queries, share, then psi's columns
               from bucket on: psi of each query type's queries alone (PosIR's Table 6 types;
               see irflow.analyses.query_types)
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from irflow.core.atomic import atomic_path
from irflow.core.errors import DamagedFileError


def document_text(title: str | None, text: str) -> str:
    """A document as every model reads it: title, a space, text, as BEIR and MTEB build it.

    One definition, because cached document embeddings are reused by rerankers and must
    have been computed from the same string.
    """
    return f"{title or ''} {text}".strip()


def document_texts(titles: list, texts: list) -> list[str]:
    return [document_text(title, text) for title, text in zip(titles, texts)]


CORPUS = pa.schema([("doc_id", pa.string()), ("title", pa.string()), ("text", pa.string())])
PASSAGES = pa.schema(
    [
        ("passage_id", pa.string()),
        ("doc_id", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
    ]
)
QUERIES = pa.schema([("query_id", pa.string()), ("text", pa.string())])
QRELS = pa.schema(
    [
        ("query_id", pa.string()),
        ("doc_id", pa.string()),
        ("relevance", pa.int32()),
        ("span_start", pa.int64()),
        ("span_end", pa.int64()),
    ]
)
QRELS_POSIR = QRELS.append(pa.field("doc_tokens", pa.int64())).append(
    pa.field("doc_chars", pa.int64())
)
AUDIT = pa.schema(
    [
        ("doc_id", pa.string()),
        ("action", pa.string()),
        ("reason", pa.string()),
        ("judged", pa.bool_()),
        ("filter", pa.string()),
        ("value", pa.float64()),
    ]
)
RUN = pa.schema(
    [
        ("query_id", pa.string()),
        ("doc_id", pa.string()),
        ("score", pa.float64()),
        ("rank", pa.int32()),
    ]
)
PER_QUERY = pa.schema([("query_id", pa.string()), ("metric", pa.string()), ("value", pa.float64())])
SUMMARY = pa.schema(
    [
        ("dataset", pa.string()),
        ("system", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("queries", pa.int64()),
        ("seed", pa.int64()),
    ]
)
# The analysis tables that may have no row (one system: no pair to test or rank), typed all
# the same, so that their DuckDB views have the columns' types and not "NULL".
# Each (dataset, system, metric) beside a published value (irflow.evaluation.published).
PUBLISHED = pa.schema(
    [
        ("dataset", pa.string()),
        ("system", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("published", pa.float64()),
        ("delta", pa.float64()),
        ("tolerance", pa.float64()),
        ("within", pa.bool_()),
        ("reproduction", pa.bool_()),
        ("published_system", pa.string()),
        ("differs", pa.string()),
        ("source", pa.string()),
    ]
)
# Each (dataset, system) a failed run has no score for, and why (irflow.workflow.run_end).
MISSING = pa.schema([("dataset", pa.string()), ("system", pa.string()), ("reason", pa.string())])
SIGNIFICANCE = pa.schema(
    [(name, pa.string()) for name in ("dataset", "metric", "system_a", "system_b")]
    + [("queries", pa.int64())]
    + [
        (name, pa.float64())
        for name in (
            "mean_a",
            "mean_b",
            "b_minus_a",
            "t_statistic",
            "t_p_value",
            "randomization_p_value",
            "effect_size",
            "t_p_holm",
            "randomization_p_holm",
            "randomization_p_floor",
        )
    ]
    + [("randomization_p_at_floor", pa.bool_()), ("randomization_p_holm_at_floor", pa.bool_())]
    + [("randomization_p_holm_text", pa.string()), ("significant", pa.bool_())]
    + [("family", pa.string())]
)
CORRELATIONS = pa.schema(
    [("left", pa.string()), ("right", pa.string()), ("systems", pa.int64())]
    + [(name, pa.float64()) for name in ("spearman", "spearman_p", "kendall", "kendall_p")]
    + [("kind", pa.string()), ("metric", pa.string())]
)
BOOTSTRAP = pa.schema(
    [
        ("draw", pa.int64()),
        ("sampled_queries", pa.int64()),
        ("whole_datasets", pa.int64()),
        ("every_query", pa.bool_()),
        ("spearman", pa.float64()),
        ("kendall", pa.float64()),
        ("left", pa.string()),
        ("right", pa.string()),
        ("seed", pa.int64()),
    ]
)
LINEAGE_KEY = b"irflow.lineage"


def embeddings_schema(dim: int) -> pa.Schema:
    return pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32(), dim))])


# The tables of the other stages, by the stage that writes them.

# irflow.derived.llm.cache: one row per chat completion received.
LLM_CACHE = pa.schema(
    [
        ("key", pa.string()),
        ("model", pa.string()),
        ("request", pa.string()),  # canonical JSON of what the key hashes
        ("content", pa.string()),
        ("finish_reason", pa.string()),
        ("response_model", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("created_at", pa.string()),
    ]
)
# irflow.derived.negatives: one row per (query, positive) with its mined hard negatives.
NEGATIVES = pa.schema(
    [
        ("query_id", pa.string()),
        ("query", pa.string()),
        ("positive_id", pa.string()),
        ("positive", pa.string()),
        # Scored directly when the run did not retrieve the positive; null when the system
        # cannot score it (see PositiveScores).
        ("positive_score", pa.float64()),
        ("positive_rank", pa.int32()),  # null when the run did not retrieve the positive
        ("negative_ids", pa.list_(pa.string())),
        ("negatives", pa.list_(pa.string())),
        ("negative_scores", pa.list_(pa.float64())),
        ("negative_ranks", pa.list_(pa.int32())),
    ]
)
# irflow.retrieval.sparse: one row per document or query, its non-zero terms (vocabulary ids,
# ascending) and weights.
SPARSE = pa.schema(
    [("id", pa.string()), ("indices", pa.list_(pa.int32())), ("values", pa.list_(pa.float32()))]
)


def tokens_schema(dim: int) -> pa.Schema:
    """irflow.retrieval.late_interaction: each text's token vectors."""
    return pa.schema([("id", pa.string()), ("vectors", pa.list_(pa.list_(pa.float32(), dim)))])


# irflow.data.dedup: the near-duplicate clusters the filter found.
CLUSTERS = pa.schema(
    [
        ("cluster", pa.string()),  # the doc_id of the document the cluster keeps
        ("doc_id", pa.string()),
        ("position", pa.int64()),  # row number in the corpus
        ("kept", pa.bool_()),
        ("judged", pa.bool_()),
        ("jaccard", pa.float64()),  # exact Jaccard similarity of shingle sets to the kept one
        # The MinHash estimate of the same, when LSH compared the two; else null.
        ("estimated_jaccard", pa.float64()),
        ("size", pa.int64()),
    ]
)
# irflow.data.filter: per dataset and filter, the documents dropped and flagged.
FILTER_SUMMARY = pa.schema(
    [
        ("dataset", pa.string()),
        ("filter", pa.string()),  # "total": documents any filter dropped or flagged
        ("dropped", pa.int64()),
        ("flagged", pa.int64()),
        ("documents_in", pa.int64()),
        ("documents_out", pa.int64()),
        ("clusters", pa.int64()),  # near-duplicate clusters found
    ]
)
# irflow.encoding.embed: each row's number in its table, id, and the digest of its text as the model
# reads it.
DIGESTS = pa.schema([("row_index", pa.int64()), ("id", pa.string()), ("digest", pa.binary(16))])
# irflow.derived.generate: how a generated dataset was made (generation/<name>.parquet).
GENERATION_TABLES = {
    # Each generated hard negative: the query it was written for and its source document.
    "negatives": pa.schema(
        [
            ("doc_id", pa.string()),
            ("query_id", pa.string()),
            ("source_doc_id", pa.string()),
            ("number", pa.int32()),
        ]
    ),
    # Per query: character, scenario, attributes, the query before and after each rewrite.
    "generation": pa.schema(
        [
            ("query_id", pa.string()),
            ("doc_id", pa.string()),
            ("character", pa.string()),
            ("scenario", pa.string()),
            ("query_length", pa.string()),
            ("query_type", pa.string()),
            ("information_type", pa.string()),
            ("expression_style", pa.string()),
            ("first_query", pa.string()),
            ("rewrites", pa.list_(pa.string())),
            ("query", pa.string()),
            ("first_query_overlap", pa.float64()),
            ("query_overlap", pa.float64()),
            ("negatives_requested", pa.int32()),
            ("negatives", pa.int32()),
            ("split", pa.string()),
        ]
    ),
    # Each sampled document that gave no query: the step, the reason, the detail.
    "dropped": pa.schema(
        [
            ("doc_id", pa.string()),
            ("step", pa.string()),
            ("reason", pa.string()),
            ("detail", pa.string()),
        ]
    ),
}


def vector_matrix(vectors: pa.Array) -> np.ndarray:
    """An embeddings ``vector`` column (one fixed-size-list array) as a rows x dim matrix; a
    view of the Arrow buffer where it can be."""
    return vectors.flatten().to_numpy(zero_copy_only=False).reshape(-1, vectors.type.list_size)


def vector_array(matrix: np.ndarray) -> pa.FixedSizeListArray:
    """A rows x dim matrix as an embeddings ``vector`` column."""
    return pa.FixedSizeListArray.from_arrays(matrix.reshape(-1), matrix.shape[1])


# Every Parquet file irflow writes carries a CRC-32 of each page, and every read checks them: a
# flipped bit in a data page otherwise decodes as a different value, read without a word (a
# bit flipped in a run moved SciFact's Recall@100 from 0.9127 to 0.9079). The footer has no
# checksum, but a damaged footer does not decode. Only here does irflow call pyarrow's or
# pandas' Parquet reader and writer (tests/test_contracts.py checks): a file is read through
# read_table, read_frame, ParquetFile, stream_batches, read_metadata or read_schema, and
# written through write_table, write_rows, write_frame, write_file or parquet_writer.
WRITE_CHECKSUMS = {"write_page_checksum": True}
VERIFY_CHECKSUMS = {"page_checksum_verification": True}


@contextmanager
def reading(path: str | Path) -> Iterator[None]:
    """Report a file that does not read back whole (not Parquet, truncated, a page that fails
    its checksum) as a DamagedFileError naming it; an error of the system (a missing file, no
    permission) is raised as it is."""
    try:
        yield
    except DamagedFileError:
        raise
    except (OSError, pa.ArrowException) as error:
        # pyarrow reports what it cannot decode as ArrowInvalid or a bare OSError; a missing
        # file or a refused permission comes as a subclass of OSError, or with an errno.
        if isinstance(error, OSError) and (type(error) is not OSError or error.errno):
            raise
        raise DamagedFileError(path, str(error)) from error


class ParquetFile(pq.ParquetFile):
    """A Parquet file to read in parts: pyarrow's ParquetFile (``options`` are its own), that
    verifies page checksums and names the file when it is damaged."""

    def __init__(self, path: str | Path, **options):
        self.path = path
        with reading(path):
            super().__init__(path, **options, **VERIFY_CHECKSUMS)

    def read(self, *args, **kwargs) -> pa.Table:
        with reading(self.path):
            return super().read(*args, **kwargs)

    def read_row_group(self, *args, **kwargs) -> pa.Table:
        with reading(self.path):
            return super().read_row_group(*args, **kwargs)

    def read_row_groups(self, *args, **kwargs) -> pa.Table:
        with reading(self.path):
            return super().read_row_groups(*args, **kwargs)

    def iter_batches(self, *args, **kwargs) -> Iterator[pa.RecordBatch]:
        with reading(self.path):
            yield from super().iter_batches(*args, **kwargs)


def read_table(path: str | Path, columns: list[str] | None = None, **options) -> pa.Table:
    """A Parquet file as one table (``options``: pq.read_table's, e.g. ``filters``)."""
    with reading(path):
        return pq.read_table(path, columns=columns, **options, **VERIFY_CHECKSUMS)


def table_of(source: str | Path | pa.Table) -> pa.Table:
    """``source`` itself where it is a table in memory (a job's own, not yet written), else the
    Parquet file it names, read whole."""
    return source if isinstance(source, pa.Table) else read_table(source)


def read_frame(path: str | Path, columns: list[str] | None = None, **options) -> pd.DataFrame:
    """A Parquet file as a pandas DataFrame, as pd.read_parquet reads it."""
    with reading(path):
        return pd.read_parquet(path, columns=columns, **options, **VERIFY_CHECKSUMS)


def read_metadata(path: str | Path) -> pq.FileMetaData:
    """A Parquet file's footer: rows, row groups, sizes."""
    with reading(path):
        return pq.read_metadata(path)


def read_schema(path: str | Path) -> pa.Schema:
    with reading(path):
        return pq.read_schema(path)


# Bytes read from a Parquet file at a time by ``stream_batches``.
STREAM_BUFFER_BYTES = 1 << 22


def stream_batches(
    path: str | Path, batch_rows: int, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """A Parquet file's record batches, read through a small buffer: memory stays at a batch,
    where pyarrow's default pre-buffering reads whole column chunks ahead (1 GB more for a
    million 256-dimension vectors)."""
    source = ParquetFile(path, pre_buffer=False, buffer_size=STREAM_BUFFER_BYTES)
    yield from source.iter_batches(batch_rows, columns=columns)


def parquet_writer(where: str | Path, schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of ``schema`` tables to ``where`` (a temporary path: see atomic_path), with
    page checksums."""
    return pq.ParquetWriter(where, schema, **WRITE_CHECKSUMS)


def write_file(table: pa.Table, where: str | Path) -> None:
    """Write ``table`` to ``where`` as it is, with page checksums: a file in a folder that is
    itself written atomically, or a temporary path."""
    pq.write_table(table, where, **WRITE_CHECKSUMS)


def write_table(table: pa.Table, path: str | Path, schema: pa.Schema | None = None) -> None:
    """Write ``table`` to ``path`` atomically, cast to ``schema`` when one is given.

    The file appears under its final name only once complete, so a killed job never
    leaves a truncated Parquet that a later stage could mistake for a result.
    """
    if schema is not None:
        metadata = table.schema.metadata
        table = table.select(schema.names).cast(schema)
        if metadata:
            table = table.replace_schema_metadata(metadata)
    with atomic_path(path) as tmp:
        write_file(table, tmp)


def write_rows(rows: Iterable[dict], schema: pa.Schema, path: str | Path, batch_rows: int) -> int:
    """Stream rows into a Parquet file in batches of ``batch_rows``, atomically as
    ``write_table``; returns the number of rows."""
    count = 0
    with atomic_path(path) as tmp, parquet_writer(tmp, schema) as writer:
        rows = iter(rows)
        while batch := list(itertools.islice(rows, batch_rows)):
            writer.write_table(pa.Table.from_pylist(batch, schema))
            count += len(batch)
        if count == 0:
            writer.write_table(schema.empty_table())
    return count


def write_frame(frame, path: str | Path, schema: pa.Schema | None = None) -> None:
    """``write_table`` for a pandas DataFrame (its index is not kept)."""
    write_table(pa.Table.from_pandas(frame, preserve_index=False), path, schema)


def with_lineage(table: pa.Table, lineage: dict) -> pa.Table:
    metadata = dict(table.schema.metadata or {})
    metadata[LINEAGE_KEY] = json.dumps(lineage, sort_keys=True).encode()
    return table.replace_schema_metadata(metadata)


def read_lineage(path: str | Path) -> dict:
    metadata = read_schema(path).metadata or {}
    return json.loads(metadata.get(LINEAGE_KEY, b"{}"))
