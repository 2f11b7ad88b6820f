"""index: document embeddings -> a faiss index, built from the embeddings file in batches, and
the search settings that make it return full runs.

faiss row i is row i of the embeddings Parquet; retrieval maps rows back to doc ids. Every
type ranks by inner product, which is the model's own similarity either way
(``irflow.encoding.models.resolve_similarity``): the embed job stores unit vectors for a cosine
model and the model's vectors as they come for a dot-product one.

Types: ``flat`` (exact inner product), ``hnsw`` (graph), ``ivf`` (inverted lists of full
vectors) and ``ivfpq`` (inverted lists of product-quantised codes, for corpora whose vectors do
not fit in memory). The embeddings are read one record batch at a time and added as they come,
so the build never holds a second copy of the matrix: what it holds is the index itself, plus,
for the IVF types, a training sample of evenly spaced rows. ``ivfpq`` with ``refine`` (the
default) keeps the full vectors beside the codes and re-scores ``refine_factor`` × k candidates
exactly (faiss' ``IndexRefineFlat``). With ``mmap`` an index is searched memory-mapped from its
file, so only the lists a query probes and the vectors it re-scores are read.

Only the build settings (``BUILD_SETTINGS``) make the index file; ``nprobe``, ``ef_search``,
``refine_factor`` and ``mmap`` are how it is searched, so changing them rebuilds nothing.
An approximate search can come back short of k: an IVF query's probed lists may hold fewer
than k vectors, and HNSW returns at most efSearch. ``Searcher`` searches HNSW with
efSearch >= k, and a query that came back short is searched again with twice the probes
(``widen``), up to every list, rather than with a larger k, which cannot help.

A flat index with ``shard_rows`` is not built: it is searched from the embeddings file a
shard at a time (``irflow.retrieval.exact_search``), so no job holds every vector.

How far an approximate run is from the exact one is measured, not assumed: exact search
(``irflow.retrieval.exact_search.ExactSearcher``) over the embeddings file for a sample of
queries, and ``irflow.retrieval.recall.calibrate``
doubles ``nprobe`` or ``efSearch`` (``Searcher.raised``) until the sample's recall reaches
``target_recall`` (irflow.retrieval.retrieve).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from irflow.core import contracts
from irflow.core.atomic import atomic_path
from irflow.core.config import register_check
from irflow.core.errors import InputError
from irflow.core.progress import LoggedProgress
from irflow.core.settings_types import Index

# faiss (0.2 s) is imported where an index is built or searched: every dry run imports this
# module, for its config check and the index rule's params.
if TYPE_CHECKING:
    import faiss

log = logging.getLogger(__name__)

IVF_TYPES = ("ivf", "ivfpq")
# faiss' k-means warns below 39 training points per centroid (and samples at most 256 each):
# the list count is capped so that every list gets at least that many.
MIN_TRAIN_ROWS_PER_LIST = 39
TRAIN_ROWS_PER_LIST = 64
READ_BATCH_ROWS = 65536
# Settings that only change how an index is searched, never the index file.
SEARCH_SETTINGS = (
    "nprobe",
    "ef_search",
    "refine_factor",
    "mmap",
    "recall_queries",
    "recall_seed",
    "target_recall",
)


def build_settings(spec: dict) -> dict:
    """The settings an index file depends on (the index rule's params)."""
    return {key: value for key, value in spec.items() if key not in SEARCH_SETTINGS}


def pq_training_rows(spec: Index) -> int:
    """faiss trains each PQ sub-quantiser's 2^pq_bits centroids on the training rows; with
    fewer rows than centroids it stops with an assertion deep inside the build."""
    return 2**spec.pq_bits


def vector_batches(embeddings_path: Path, step: int = 1) -> Iterator[np.ndarray]:
    """The embeddings as float32 matrices, one record batch at a time; with ``step``, only
    every ``step``-th row of the file."""
    offset = 0
    for batch in contracts.stream_batches(embeddings_path, READ_BATCH_ROWS, ["vector"]):
        matrix = contracts.vector_matrix(batch.column("vector"))
        first = -offset % step
        offset += len(matrix)
        yield np.ascontiguousarray(matrix[first::step], dtype=np.float32)


def training_rows(spec: Index, rows: int) -> int:
    """Rows available for training: ``train_rows`` when set, at most every row."""
    return min(rows, spec.train_rows or rows)


def list_count(spec: Index, rows: int) -> int:
    """``nlist``, or faiss' rule of thumb of about 4·√rows, capped so that each list has
    ``MIN_TRAIN_ROWS_PER_LIST`` training rows; at least 1."""
    wanted = spec.nlist or 4 * math.isqrt(rows)
    return max(1, min(wanted, training_rows(spec, rows) // MIN_TRAIN_ROWS_PER_LIST))


def empty_index(spec: Index, dim: int, rows: int) -> faiss.Index:
    import faiss

    if spec.type == "flat":
        return faiss.IndexFlatIP(dim)
    if spec.type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, spec.M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = spec.ef_construction
        return index
    quantizer = faiss.IndexFlatIP(dim)
    nlist = list_count(spec, rows)
    if spec.type == "ivf":
        return faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    if dim % spec.pq_m:
        raise ValueError(f"ivfpq: pq_m {spec.pq_m} must divide the dimension {dim}")
    index = faiss.IndexIVFPQ(
        quantizer, dim, nlist, spec.pq_m, spec.pq_bits, faiss.METRIC_INNER_PRODUCT
    )
    return faiss.IndexRefineFlat(index) if spec.refine else index


def ivf_part(index: faiss.Index) -> faiss.IndexIVF | None:
    """The inverted-file index inside ``index`` (itself, or the base of a refine), if any."""
    import faiss

    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexRefine):
        index = faiss.downcast_index(index.base_index)
    return index if isinstance(index, faiss.IndexIVF) else None


def train_sample_rows(spec: Index, rows: int, nlist: int) -> int:
    """``train_rows`` (at most every row), or by default 64 per list; for ivfpq at least
    2^pq_bits."""
    wanted = training_rows(spec, rows) if spec.train_rows else TRAIN_ROWS_PER_LIST * nlist
    if spec.type == "ivfpq":
        wanted = max(wanted, pq_training_rows(spec))
    return min(rows, wanted)


def train_sample(embeddings_path: Path, spec: Index, rows: int, nlist: int) -> np.ndarray:
    """Evenly spaced rows, about ``train_sample_rows`` of them: deterministic and spread over
    the whole file, whatever order the corpus is in."""
    step = max(1, rows // train_sample_rows(spec, rows, nlist))
    return np.concatenate(list(vector_batches(embeddings_path, step)))


def build_index(embeddings_path: Path, spec: Index) -> tuple[faiss.Index, dict]:
    """The index and what its build chose: lists asked for and made, training rows."""
    metadata = contracts.ParquetFile(embeddings_path).metadata
    rows = metadata.num_rows
    if rows == 0:
        raise InputError(embeddings_path, "no embeddings to index")
    if spec.type == "ivfpq" and training_rows(spec, rows) < pq_training_rows(spec):
        raise InputError(
            embeddings_path,
            f"ivfpq with pq_bits {spec.pq_bits} trains {pq_training_rows(spec)} centroids "
            f"per sub-quantiser and needs at least that many training rows; there are "
            f"{training_rows(spec, rows)} (of {rows} rows). Use type flat or ivf for a corpus "
            "this small, or fewer pq_bits",
        )
    dim = contracts.read_schema(embeddings_path).field("vector").type.list_size
    index = empty_index(spec, dim, rows)
    facts = {"documents": rows}
    if spec.type in IVF_TYPES:
        wanted = spec.nlist or 4 * math.isqrt(rows)
        nlist = ivf_part(index).nlist
        if nlist < wanted:
            log.warning(
                "%s: %d lists instead of %d: %d training rows give each list at least %d",
                embeddings_path,
                nlist,
                wanted,
                training_rows(spec, rows),
                MIN_TRAIN_ROWS_PER_LIST,
            )
        sample = train_sample(embeddings_path, spec, rows, nlist)
        # faiss' k-means keeps at most max_points_per_centroid (256) rows per list of those it
        # is given, drawn at random: raised so that a user's train_rows are all used.
        clustering = ivf_part(index).cp
        per_list = math.ceil(len(sample) / nlist)
        clustering.max_points_per_centroid = max(clustering.max_points_per_centroid, per_list)
        # faiss' k-means reports no progress: a line before and after, with its size and time.
        log.info("train %s: %d lists on %d rows", embeddings_path, nlist, len(sample))
        started = time.perf_counter()
        index.train(sample)
        log.info(
            "train %s: %d lists on %d rows in %.1f s",
            embeddings_path,
            nlist,
            len(sample),
            time.perf_counter() - started,
        )
        facts |= {"lists_wanted": wanted, "train_rows": len(sample)}
    reserve_storage(index, rows)
    with LoggedProgress(desc=f"index {embeddings_path}", total=rows, unit="rows") as progress:
        for matrix in vector_batches(embeddings_path):
            index.add(matrix)
            progress.update(len(matrix))
    return index, facts


def reserve_storage(index: faiss.Index, rows: int) -> None:
    """Allocate, once, the storage ``rows`` added vectors will fill.

    faiss keeps a flat index's vectors (also HNSW's and a refine's) and HNSW's links in
    ``std::vector``s that ``add`` resizes, and a vector that outgrows its capacity moves to one
    twice as large: old and new copies are held at once, so a build peaked at about twice its
    vectors past each power of two (1,511 MiB at 1,048,576 x 256, 2,539 MiB at 1,114,112).
    Resizing to the final size and back keeps the capacity (``resize`` never shrinks it), so
    every ``add`` fills memory allocated here. The bytes faiss stores are unchanged.

    HNSW's links: faiss gives a node level l with probability M^-l (1 - 1/M) and it keeps
    2·M links on level 0 and M on each level above, M·(2 + 1/(M - 1)) on average; two per
    node more than the 2·M + 1 this rounds to leaves a margin that a large corpus does not
    exceed. IVF lists grow one list at a time, so no single reallocation doubles the index."""
    import faiss

    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexRefine):
        index = faiss.downcast_index(index.refine_index)
    if isinstance(index, faiss.IndexHNSW):
        hnsw = index.hnsw
        _reserve(hnsw.neighbors, rows * (hnsw.nb_neighbors(0) + 2))
        _reserve(hnsw.levels, rows)
        _reserve(hnsw.offsets, rows + 1)
        index = faiss.downcast_index(index.storage)
    if isinstance(index, faiss.IndexFlatCodes):
        _reserve(index.codes, rows * index.code_size)


def _reserve(vector, size: int) -> None:
    """``std::vector::reserve``, which faiss' Python API does not expose, by two resizes."""
    kept = vector.size()
    vector.resize(size)
    vector.resize(kept)


def load_index(path: Path, spec: Index) -> faiss.Index:
    import faiss

    # IO_FLAG_MMAP_IFC maps a flat index's vectors, the refine vectors and the IVF lists.
    return faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC if spec.mmap else 0)


@dataclass
class Searcher:
    """An index with its search settings; ``widen`` levels double the IVF lists probed (up
    to every list) or HNSW's efSearch (up to every vector)."""

    index: faiss.Index
    spec: Index

    def __post_init__(self):
        ivf = ivf_part(self.index)
        self.lists = ivf.nlist if ivf is not None else 0

    @property
    def size(self) -> int:
        return self.index.ntotal

    @property
    def approximate(self) -> bool:
        return self.spec.type != "flat"

    def raised(self, k: int) -> Searcher:
        """This index searched with twice the IVF lists or HNSW efSearch (for depth ``k``)."""
        if self.lists:
            return Searcher(self.index, self.spec.model_copy(update={"nprobe": self.probes(1)}))
        return Searcher(
            self.index, self.spec.model_copy(update={"ef_search": self.ef_search(k, 1)})
        )

    def can_widen(self, k: int, widen: int = 0) -> bool:
        if self.lists:
            return self.probes(widen) < self.lists
        if self.spec.type == "hnsw":
            return self.ef_search(k, widen) < self.size
        return False

    def probes(self, widen: int) -> int:
        return min(self.lists, self.spec.nprobe << widen)

    def ef_search(self, k: int, widen: int) -> int:
        """At least k: faiss' HNSW returns at most efSearch results and does not raise it."""
        return min(max(self.spec.ef_search, k) << widen, max(self.size, k))

    def parameters(self, k: int, widen: int):
        import faiss

        if self.spec.type == "hnsw":
            return faiss.SearchParametersHNSW(efSearch=self.ef_search(k, widen))
        if not self.lists:
            return None
        probing = faiss.SearchParametersIVF(nprobe=self.probes(widen))
        if isinstance(faiss.downcast_index(self.index), faiss.IndexRefine):
            return faiss.IndexRefineSearchParameters(
                k_factor=self.spec.refine_factor, base_index_params=probing
            )
        return probing

    def search(self, queries: np.ndarray, k: int, widen: int = 0):
        return self.index.search(queries, k, params=self.parameters(k, widen))

    def settings(self, k: int, widen: int = 0) -> dict:
        """The search settings in effect at ``widen`` for depth ``k``, for the manifest."""
        if self.spec.type == "hnsw":
            return {"ef_search": self.ef_search(k, widen)}
        if self.lists:
            return {"nprobe": self.probes(widen), "lists": self.lists}
        return {}


def index_file(embeddings_path: Path, settings: dict, out_path: Path) -> dict:
    """Build the index of ``settings`` (the index rule's params: its build settings) and
    write it to ``out_path``; its manifest facts."""
    import faiss

    started = time.perf_counter()
    index, facts = build_index(embeddings_path, Index.model_validate(settings))
    index_seconds = time.perf_counter() - started
    with atomic_path(out_path) as tmp:
        faiss.write_index(index, str(tmp))
    ivf = ivf_part(index)
    return {
        "index": settings,
        "dimension": index.d,
        "lists": ivf.nlist if ivf is not None else None,
        **facts,
        "index_seconds": index_seconds,
        "index_bytes": out_path.stat().st_size,
        "faiss_version": faiss.__version__,
    }


@register_check
def _index_problems(config: dict) -> list[str]:
    """Training settings faiss cannot build from: too few rows for the PQ centroids, or for
    the lists asked for (irflow would cap nlist; both being explicit is a contradiction)."""
    problems = []
    for name, block in config["indexes"].items():
        spec = Index.model_validate(block)
        if spec.shard_rows and spec.type != "flat":
            problems.append(
                f"config key 'indexes.{name}.shard_rows': only a flat index is searched in "
                f"shards; a {spec.type} index is searched whole (remove shard_rows)"
            )
        rows = spec.train_rows
        if spec.type not in IVF_TYPES or rows is None:
            continue
        if spec.type == "ivfpq" and rows < pq_training_rows(spec):
            problems.append(
                f"config key 'indexes.{name}.train_rows': {rows} rows cannot train the "
                f"{pq_training_rows(spec)} centroids of pq_bits {spec.pq_bits}; give at least "
                f"{pq_training_rows(spec)}"
            )
        if spec.nlist is not None and rows < MIN_TRAIN_ROWS_PER_LIST * spec.nlist:
            problems.append(
                f"config key 'indexes.{name}.nlist': {spec.nlist} lists need at least "
                f"{MIN_TRAIN_ROWS_PER_LIST * spec.nlist} training rows "
                f"({MIN_TRAIN_ROWS_PER_LIST} a list); train_rows is {rows}"
            )
    return problems
