"""filter: drop empty, out-of-bounds, duplicate and low-quality documents; pick the queries to
score.

Every decision lands in an audit table with the filter that made it, the value it measured and
a readable reason. A judged document is never dropped silently: by default it is kept and
flagged, so published numbers stay comparable.

The basic rules (empty, word bounds, exact duplicates) decide first and alone, as they always
have. A document they keep is then measured by every enabled quality filter
(``irflow.data.quality``), each failure its own audit row, so the audit tells how many documents
each filter would remove on its own. Near-duplicates (``irflow.data.dedup``) are found last, among
the documents still kept, because a cluster needs the whole corpus.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import shutil
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from irflow.core import contracts
from irflow.core.atomic import atomic_path
from irflow.core.errors import InputError
from irflow.core.settings_types import Filter
from irflow.data.dedup import NearDuplicateFinder
from irflow.data.quality import Document, build_checks, check_order, failed_checks

if TYPE_CHECKING:  # a dry run imports this module (deciding_rules): datasketch is the job's
    from datasketch import LeanMinHash

BATCH_ROWS = 50_000

# The basic rules' names in the audit, in the order they decide.
BASIC_FILTERS = ("empty", "min_words", "max_words", "exact_duplicate")
# A failed rule: (filter name, measured value or None, reason).
Failure = tuple[str, float | None, str]


def _digest(title: str, text: str) -> bytes:
    return hashlib.blake2b(f"{title}\0{text}".encode(), digest_size=16).digest()


def _duplicate_keepers(corpus_path: Path, judged: set[str]) -> dict[bytes, tuple[int, str]]:
    """For each distinct (title, text), the copy kept: the first judged copy in corpus order,
    else the first copy, as for near-duplicates (``irflow.data.dedup``). Its position and doc_id."""
    keepers: dict[bytes, tuple[int, str, bool]] = {}
    position = 0
    for batch in contracts.stream_batches(corpus_path, BATCH_ROWS):
        for doc_id, title, text in zip(
            *(batch.column(n).to_pylist() for n in contracts.CORPUS.names)
        ):
            digest, is_judged = _digest(title, text), doc_id in judged
            kept = keepers.get(digest)
            if kept is None or (is_judged and not kept[2]):
                keepers[digest] = (position, doc_id, is_judged)
            position += 1
    return {digest: (position, doc_id) for digest, (position, doc_id, _) in keepers.items()}


def _decide(
    position: int, title: str, text: str, rules: Filter, keepers: dict[bytes, tuple[int, str]]
) -> Failure | None:
    """The basic rule that drops a document, or None to keep it."""
    words = len(title.split()) + len(text.split())
    if rules.drop_empty and words == 0:
        return "empty", float(words), "empty"
    if rules.min_words is not None and words < rules.min_words:
        return "min_words", float(words), f"shorter than {rules.min_words} words"
    if rules.max_words is not None and words > rules.max_words:
        return "max_words", float(words), f"longer than {rules.max_words} words"
    if rules.drop_duplicates:
        kept_position, kept_id = keepers[_digest(title, text)]
        if kept_position != position:
            return "exact_duplicate", None, f"exact duplicate of {kept_id}"
    return None


def _near_duplicate_finder(rules: Filter) -> NearDuplicateFinder | None:
    spec = rules.near_duplicates
    if not spec.enabled:
        return None
    return NearDuplicateFinder(
        shingle_words=spec.shingle_words,
        permutations=spec.permutations,
        threshold=spec.threshold,
        seed=spec.seed,
    )


def _texts_at(corpus_path: Path, positions: set[int]) -> dict[int, str]:
    """The document texts at these corpus rows."""
    texts, offset = {}, 0
    for batch in contracts.stream_batches(corpus_path, BATCH_ROWS, ["title", "text"]):
        wanted = [p - offset for p in positions if offset <= p < offset + batch.num_rows]
        if wanted:
            titles, bodies = batch.column("title"), batch.column("text")
            for i in wanted:
                texts[offset + i] = contracts.document_text(titles[i].as_py(), bodies[i].as_py())
        offset += batch.num_rows
    return texts


# Documents one worker measures per task: enough that sending them costs little beside
# measuring them, few enough that the workers share a batch evenly.
CHUNK_ROWS = 500
# What is measured of a document: the quality checks it fails and its MinHash signature.
Measured = tuple[list[Failure], "LeanMinHash | None"]
_worker: list = []  # a worker process's (checks, finder)


def _measure_documents(
    items: Iterable[tuple[str, bool]], checks: list, finder: NearDuplicateFinder | None
) -> Iterator[Measured]:
    """For each (text, whether to run the checks), the failed checks and the signature (None
    without near-duplicates), both from one ``Document``: the text is split once."""
    for text, check in items:
        doc = Document(text)
        yield (
            failed_checks(doc, checks) if check else [],
            finder.signature(doc) if finder is not None else None,
        )


def _start_worker(rules: Filter) -> None:
    """A worker builds its own checks: they hold lambdas, which do not pickle."""
    _worker[:] = build_checks(rules.quality), _near_duplicate_finder(rules)


def _measure(items: list[tuple[str, bool]]) -> list[Measured]:
    return list(_measure_documents(items, *_worker))


@contextmanager
def _measurer(
    rules: Filter, checks: list, finder: NearDuplicateFinder | None, workers: int
) -> Iterator[Callable[[list], Iterator[Measured]]]:
    """A function from (text, check) pairs to what ``_measure_documents`` finds, in order,
    computed in ``workers`` processes when more than one (the measures and MinHash are pure
    Python: one core each). The near-duplicate index stays in this process: it is sequential."""
    if workers <= 1:
        yield lambda items: _measure_documents(items, checks, finder)
        return
    # fork: spawn would rerun a Snakemake script's top level in every worker. The workers
    # only measure the texts they are sent; they touch no Arrow thread pool.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, context, _start_worker, (rules,)) as pool:

        def measure(items: list) -> Iterator[Measured]:
            chunks = [items[i : i + CHUNK_ROWS] for i in range(0, len(items), CHUNK_ROWS)]
            # map sends every chunk at once and yields them in order: this process indexes
            # one chunk's signatures while the workers measure the next.
            return (measured for part in pool.map(_measure, chunks) for measured in part)

        yield measure


def deciding_rules(rules: dict) -> dict:
    """The ``filter`` block without the settings of filters that are off: what decides the
    filtered corpus. A job's params are this, so a new or changed setting of a filter that is
    off reruns no filter job, nor the embeddings and runs after it."""
    quality = rules.get("quality") or {}
    enabled = {
        name: spec
        for name, spec in quality.items()
        if isinstance(spec, dict) and spec.get("enabled")
    }
    if enabled:
        enabled["below"] = quality.get("below", "strict")
    near_duplicates = rules.get("near_duplicates") or {}
    return rules | {
        "quality": enabled,
        "near_duplicates": near_duplicates if near_duplicates.get("enabled") else {},
    }


def filter_corpus(
    corpus_path: Path, judged: set[str], rules: Filter, out_path: Path, workers: int = 1
) -> tuple[pa.Table, pa.Table, dict]:
    """Decide every document, then write the kept ones; return the audit table, the
    near-duplicate clusters and the counts. The quality filters and the near-duplicate
    signatures run in ``workers`` processes, ``CHUNK_ROWS`` documents at a time; the outputs are
    those of one process."""
    checks = build_checks(rules.quality)
    finder = _near_duplicate_finder(rules)
    flag_judged = rules.judged == "flag"
    measuring = bool(checks) or finder is not None
    audit: list[tuple[int, dict]] = []  # (corpus row, audit row)
    keep: list[bool] = []
    # Which copy of a duplicate stays needs every copy's judgement: one pass ahead.
    keepers = _duplicate_keepers(corpus_path, judged) if rules.drop_duplicates else {}

    def record(position: int, doc_id: str, is_judged: bool, failures: list[Failure]) -> str:
        action = "flag" if is_judged and flag_judged else "drop"
        for name, value, reason in failures:
            row = {"doc_id": doc_id, "action": action, "reason": reason, "judged": is_judged}
            audit.append((position, row | {"filter": name, "value": value}))
        return action

    with _measurer(rules, checks, finder, workers) as measure:
        for batch in contracts.stream_batches(corpus_path, BATCH_ROWS):
            doc_ids, titles, texts = (batch.column(n).to_pylist() for n in contracts.CORPUS.names)
            start = len(keep)
            basics = [
                _decide(start + i, title, text, rules, keepers)
                for i, (title, text) in enumerate(zip(titles, texts))
            ]
            judgeds = [doc_id in judged for doc_id in doc_ids]
            # The basic rules decide first and alone: only what they keep is checked; a judged
            # document they flag still joins the near-duplicate search.
            wanted = [
                (measuring and not basic) or (finder is not None and flag_judged and is_judged)
                for basic, is_judged in zip(basics, judgeds)
            ]
            documents = contracts.document_texts(titles, texts) if any(wanted) else texts
            measured = measure(
                [(d, not basic) for d, basic, w in zip(documents, basics, wanted) if w]
            )
            for doc_id, basic, is_judged, w in zip(doc_ids, basics, judgeds, wanted):
                position = len(keep)
                failures, signature = next(measured) if w else ([], None)
                failures = [basic] if basic else failures
                kept = not failures or record(position, doc_id, is_judged, failures) == "flag"
                keep.append(kept)
                if kept and finder is not None:
                    finder.add(position, doc_id, signature, is_judged)

    clusters = contracts.CLUSTERS.empty_table()
    if finder is not None and (candidates := finder.candidates()):
        clusters = finder.clusters(_texts_at(corpus_path, candidates))
        for row in clusters.to_pylist():
            if not row["kept"]:
                reason = f"near duplicate of {row['cluster']} (Jaccard {row['jaccard']:.3f})"
                failure = ("near_duplicate", row["jaccard"], reason)
                action = record(row["position"], row["doc_id"], row["judged"], [failure])
                keep[row["position"]] = action == "flag"

    refuse_empty_corpus(corpus_path, keep)
    offset = 0
    with atomic_path(out_path) as tmp, contracts.parquet_writer(tmp, contracts.CORPUS) as writer:
        for batch in contracts.stream_batches(corpus_path, BATCH_ROWS):
            mask = pa.array(keep[offset : offset + batch.num_rows], pa.bool_())
            writer.write_batch(batch.filter(mask))
            offset += batch.num_rows

    audit.sort(key=lambda item: item[0])  # corpus order; near-duplicates were decided last
    rows = [row for _, row in audit]
    order = [*BASIC_FILTERS, *(check.name for check in checks), "near_duplicate"]
    counts = _counts(keep, rows, clusters, order)
    return pa.Table.from_pylist(rows, contracts.AUDIT), clusters, counts


def refuse_empty_corpus(corpus_path: Path, keep: list[bool]) -> None:
    """Every retriever family searches the filtered corpus: an empty one is refused here, for
    all of them (BM25 scored an empty corpus 0 and averaged it in; the dense path refused it
    only when it embedded)."""
    if not keep:
        raise InputError(
            corpus_path,
            "the corpus holds no documents, so there is nothing to retrieve; check the "
            "dataset's corpus file (the one its source.json beside this file names)",
        )
    if not any(keep):
        raise InputError(
            corpus_path,
            f"the filters drop all {len(keep)} documents of the corpus, so there is nothing to "
            f"retrieve; loosen the filter block",
        )


def _counts(keep: list[bool], audit: list[dict], clusters: pa.Table, order: list[str]) -> dict:
    """Documents in, out, dropped and flagged, and per filter (in the order they run) the
    documents it dropped and the judged ones it flagged (a document failing two filters counts
    under both)."""
    actions = {row["doc_id"]: row["action"] for row in audit}
    by_filter = {name: {"dropped": 0, "flagged": 0} for name in order}
    for row in audit:
        by_filter[row["filter"]]["dropped" if row["action"] == "drop" else "flagged"] += 1
    by_filter = {name: tally for name, tally in by_filter.items() if any(tally.values())}
    counts = {
        "documents_in": len(keep),
        "documents_out": sum(keep),
        "dropped": sum(1 for a in actions.values() if a == "drop"),
        "flagged": sum(1 for a in actions.values() if a == "flag"),
    }
    if by_filter:
        counts["by_filter"] = by_filter
    if clusters.num_rows:
        counts["near_duplicate_clusters"] = len(set(clusters.column("cluster").to_pylist()))
    return counts


def queries_to_score(queries_path: Path, qrels_path: Path) -> pa.Table:
    """Queries with at least one judgement in the split, as BEIR evaluates them."""
    queries = contracts.read_table(queries_path)
    judged = contracts.read_table(qrels_path, columns=["query_id"]).column("query_id").unique()
    return queries.filter(pc.is_in(queries.column("query_id"), value_set=judged))


def run_filter(
    corpus: Path,
    queries: Path,
    qrels: Path,
    rules: dict,
    *,
    out_corpus: Path,
    out_queries: Path,
    out_audit: Path,
    out_clusters: Path | None = None,
    workers: int = 1,
) -> dict:
    """Filter a dataset's corpus as ``rules`` (the job's params: the ``filter`` block as
    ``deciding_rules`` gives it) say, typed once, here (irflow.core.settings_types.Filter: a
    setting the block leaves out is the schema's default); keep the queries to score. The
    counts returned hold ``rules`` as given, the manifest's record of them."""
    judged = set(contracts.read_table(qrels, columns=["doc_id"]).column("doc_id").to_pylist())
    typed = Filter.model_validate(rules)
    audit, clusters, counts = filter_corpus(corpus, judged, typed, out_corpus, workers)
    contracts.write_table(audit, out_audit, contracts.AUDIT)
    if out_clusters is not None:
        contracts.write_table(clusters, out_clusters, contracts.CLUSTERS)
    scored = queries_to_score(queries, qrels)
    contracts.write_table(scored, out_queries, contracts.QUERIES)
    return counts | {"queries_scored": scored.num_rows, "rules": rules}


def run_filter_as_base(
    corpus: Path,
    queries: Path,
    qrels: Path,
    base_corpus: Path,
    base_audit: Path,
    *,
    out_corpus: Path,
    out_queries: Path,
    out_audit: Path,
    base_clusters: Path | None = None,
    out_clusters: Path | None = None,
) -> dict:
    """Filter a document-expanded copy (``expand``: docT5query, doc2query--) as its base was
    filtered: keep exactly the base's filtered documents, with the copy's expanded texts.

    Filtering the expanded text on its own would judge other texts (generated queries add
    words, and can make an empty or short document pass), so the copy would rank another
    corpus than its base and BM25 + docT5query would not be comparable to BM25. The audit and
    clusters are the base's: its decisions, which the filter summary then counts alike."""
    kept = contracts.read_table(base_corpus, columns=["doc_id"]).column("doc_id").combine_chunks()
    documents_out = 0
    with atomic_path(out_corpus) as tmp:
        with contracts.parquet_writer(tmp, contracts.CORPUS) as writer:
            for batch in contracts.stream_batches(corpus, BATCH_ROWS):
                batch = batch.filter(pc.is_in(batch.column("doc_id"), value_set=kept))
                writer.write_batch(batch)
                documents_out += batch.num_rows
        if documents_out != len(kept):
            raise InputError(
                corpus,
                f"{len(kept) - documents_out} of the {len(kept)} documents kept in "
                f"{base_corpus} are missing from this expanded copy; expand it again from its base",
            )
    documents_in = contracts.ParquetFile(corpus).metadata.num_rows
    copy_tables([base_audit], [out_audit])
    audit = contracts.read_table(out_audit).to_pylist()
    clusters = contracts.CLUSTERS.empty_table()
    if out_clusters is not None:
        copy_tables([base_clusters], [out_clusters])
        clusters = contracts.read_table(out_clusters)
    order = list(dict.fromkeys(row["filter"] for row in audit))
    scored = queries_to_score(queries, qrels)
    contracts.write_table(scored, out_queries, contracts.QUERIES)
    return _counts([], audit, clusters, order) | {
        "documents_in": documents_in,
        "documents_out": documents_out,
        "queries_scored": scored.num_rows,
        "documents_as": str(base_corpus),
    }


def copy_tables(sources: list[Path], targets: list[Path]) -> None:
    """Give a curated dataset its base dataset's tables, each replaced atomically.

    Copies, not hard links: Snakemake sets the modification time of a job's outputs, and on a
    hard link that would date the base dataset's files too, so the base would be filtered and
    everything after it recomputed on the next run."""
    for source, target in zip(sources, targets):
        with atomic_path(target) as tmp:
            shutil.copyfile(source, tmp)


def summarize_filters(datasets: dict[str, dict[str, Path]]) -> pa.Table:
    """Per dataset and filter, the documents it dropped and the judged ones it flagged (a
    document failing two filters counts under both; "total" counts each document once), with
    the corpus sizes before and after and the number of near-duplicate clusters.

    ``datasets`` maps a dataset to its ``corpus``, ``filtered`` corpus, ``audit`` and
    ``clusters`` files."""
    rows = []
    for dataset, paths in datasets.items():
        audit = contracts.read_table(paths["audit"]).to_pylist()
        clusters = contracts.read_table(paths["clusters"], columns=["cluster"]).column("cluster")
        shared = {
            "dataset": dataset,
            "documents_in": contracts.ParquetFile(paths["corpus"]).metadata.num_rows,
            "documents_out": contracts.ParquetFile(paths["filtered"]).metadata.num_rows,
            "clusters": len(pc.unique(clusters)),
        }
        tallies: dict[str, dict[str, int]] = {}
        for row in audit:
            tally = tallies.setdefault(row["filter"], {"dropped": 0, "flagged": 0})
            tally["dropped" if row["action"] == "drop" else "flagged"] += 1
        actions = {row["doc_id"]: row["action"] for row in audit}
        tallies["total"] = {
            "dropped": sum(1 for a in actions.values() if a == "drop"),
            "flagged": sum(1 for a in actions.values() if a == "flag"),
        }
        rows += [shared | {"filter": name} | tallies[name] for name in sorted(tallies, key=_order)]
    return pa.Table.from_pylist(rows, contracts.FILTER_SUMMARY)


def _order(name: str) -> tuple:
    """Basic rules in the order they decide, quality filters by name, near-duplicates (decided
    last), then the total."""
    if name in BASIC_FILTERS:
        return (0, (BASIC_FILTERS.index(name),))
    if name in ("near_duplicate", "total"):
        return (2 if name == "near_duplicate" else 3, ())
    return (1, check_order(name))


def filter_table_html(summary: pa.Table) -> str:
    """The report's table: a row per filter, a column per dataset, each cell "dropped /
    flagged", then the corpus sizes and the near-duplicate clusters."""
    rows = summary.to_pylist()
    datasets = list(dict.fromkeys(row["dataset"] for row in rows))
    filters = sorted({row["filter"] for row in rows}, key=_order)
    cells = {
        (row["filter"], row["dataset"]): f"{row['dropped']} / {row['flagged']}" for row in rows
    }
    table = {name: [cells.get((name, d), "–") for d in datasets] for name in filters}
    first = {row["dataset"]: row for row in rows}
    for label, column in (
        ("documents in", "documents_in"),
        ("documents out", "documents_out"),
        ("near-duplicate clusters", "clusters"),
    ):
        table[label] = [str(first[d][column]) for d in datasets]
    frame = pd.DataFrame.from_dict(table, orient="index", columns=datasets)
    frame.index.name = "filter (dropped / judged flagged)"
    return frame.to_html()
