"""negatives: mine hard negatives from a system's run, after Arctic-Embed (§3.6).

Training triples come from a training split: each export names its ``split`` (``train`` by
default). When that is the split the workflow scores, the system's run is mined; otherwise this
stage retrieves the split's judged queries itself with the system's searcher (a retriever whose
family opens one: any but an imported run), on the same filtered corpus. Mining the
scored split turns evaluation queries into training data, so it is logged as a warning.

For every judged query, the candidates are the run's top ``top_k`` documents, in rank order:

- judged positives (relevance >= ``min_relevance``) are never negatives;
- a candidate scoring above the ``false_negative_filter``'s cap is dropped, as a likely
  unjudged positive (a false negative). Two methods, each named after its source:

  ``absolute`` (Arctic-Embed §3.6, Algorithm 1): a fixed ``max_score``. "We applied a score
  threshold to discard the hard negatives [...] We found that using an upper threshold rather
  than a specific rank helped account for the fact that some queries admit much harder top-k
  negatives than others." The threshold is on the teacher's scale (cosine for an embedding
  model; unbounded for BM25).

  ``relative_to_positive`` (NV-Retriever's TopK-PercPos, Moreira et al. 2024, as NV-Embed
  states it): "max_negative_score_threshold = pos_score * percentage_margin", with a 95 %
  margin. For a negative positive score irflow caps at ``positive - |positive| * (1 -
  ratio)``, the same margin below the positive (``pos_score * ratio`` would lie above it);

  ``none`` is plain top-k mining (NV-Retriever's "naive Top-K", which it finds worse);
- a candidate missing from the (filtered) corpus is dropped;
- with ``near_duplicate_jaccard`` set (irflow's variant; null by default, as Arctic-Embed
  "applied only an upper threshold" (arctic-embed.txt, line 57)), a near-duplicate of any of the
  query's positives (exact Jaccard similarity of word shingles, as ``irflow.data.dedup``
  measures it, at least that value) is dropped: an unjudged copy of a positive is a false
  negative, and the first one the run finds;

and only then are the ``num_negatives`` best-ranked survivors kept, so a triple comes up short
only when the candidates ran out. With ``consistency`` set, a triple whose query and positive
fail Arctic-Embed's consistency filter (``irflow.data.consistency``) is then left out.

A positive the run did not retrieve (outside its depth) is not dropped: a BM25 or dense teacher
scores it directly (``PositiveScores`` on the scored split, the searcher's ``score_pairs`` on
another: bm25s over the same corpus and variant, or the inner product of the vectors, a
document's best passage for passage models), so its cap and
its margin are known. (With the teacher that made the run every candidate scores at least as
much, so under ``relative_to_positive`` it keeps no negative and is counted in
``triples_without_negatives``; under ``absolute`` and ``none`` it makes its triple.) Other
systems (fusion, reranked, sparse, late-interaction, external runs) are not scored directly:
under ``relative_to_positive`` such a positive yields no triple, counted as
``positives_not_scored`` and logged as a warning.

Arctic-Embed mines with an embedding model as the teacher and keeps 10 negatives per query; any
system of the workflow can be the teacher here, BM25 included.

One triple per (query, positive) is written as Parquet, with ids, ranks and scores, and as the
JSONL that sentence-transformers trains from (``datasets.load_dataset("json")``): ``n-tuple``
rows (query, positive, negative_1 .. negative_n; triples short of ``num_negatives`` are left
out of the JSONL) or ``triplet`` rows (query, positive, negative), one per negative. Triplet rows
repeat (query, positive), so with MultipleNegativesRankingLoss a batch holding two of them
makes a positive an in-batch negative of its own query unless the batches avoid duplicates
(sentence-transformers' ``BatchSamplers.NO_DUPLICATES``). With ``scores`` each row also holds
``label``: the positive's score minus each negative's, as MarginMSELoss distils from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from irflow.core import contracts
from irflow.core.atomic import atomic_path
from irflow.core.config import all_datasets, missing_key, register_check, system_kinds
from irflow.core.errors import InputError
from irflow.core.settings_types import Consistency, FalseNegativeFilter, Negatives
from irflow.data.consistency import similarities
from irflow.data.dedup import jaccard, shingles
from irflow.data.ingest import read_qrels
from irflow.data.layouts import dataset_files
from irflow.encoding.embed import read_embeddings
from irflow.retrieval.bm25 import BM25Retriever
from irflow.retrieval.retrieve import best_row_scores, retrieve_judged
from irflow.retrieval.runs import SearchRequest

# Word shingles for the near-duplicate test, as irflow.data.dedup's default.
SHINGLE_WORDS = 5
# The prefix of a negatives job's inputs that are its searcher's files (another split).
SEARCHER_FILES = "search_"


def score_cap(method: FalseNegativeFilter, positive_score: float | None) -> float | None:
    """The highest score a negative may have for this positive under the
    ``false_negative_filter`` ``method``; None for no cap."""
    if method.method == "absolute":
        return method.max_score
    if method.method == "relative_to_positive":
        return positive_score - abs(positive_score) * (1 - method.ratio)
    return None


def _positives(qrels: pa.Table, min_relevance: int) -> dict[str, list[str]]:
    positives: dict[str, list[str]] = {}
    for query_id, doc_id, relevance in zip(
        *(qrels.column(c).to_pylist() for c in ("query_id", "doc_id", "relevance"))
    ):
        if relevance >= min_relevance:
            positives.setdefault(query_id, []).append(doc_id)
    return positives


def _ranked(run: pa.Table) -> dict[str, list[tuple[str, float, int]]]:
    """Each query's hits as (doc_id, score, rank), best first."""
    run = run.sort_by([("query_id", "ascending"), ("rank", "ascending")])
    ranked: dict[str, list[tuple[str, float, int]]] = {}
    for query_id, doc_id, score, rank in zip(
        *(run.column(c).to_pylist() for c in ("query_id", "doc_id", "score", "rank"))
    ):
        ranked.setdefault(query_id, []).append((doc_id, score, rank))
    return ranked


def candidate_ids(run: pa.Table, qrels: pa.Table, settings: Negatives) -> set[str]:
    """The documents whose texts ``mine`` reads: the positives and the top ``top_k``."""
    top = run.filter(pc.less_equal(run.column("rank"), settings.top_k))
    return set(top.column("doc_id").to_pylist()) | {
        doc_id for ids in _positives(qrels, settings.min_relevance).values() for doc_id in ids
    }


def mine(
    run: pa.Table,
    qrels: pa.Table,
    documents: dict[str, str],
    settings: Negatives,
    score_positives: Callable[[list[tuple[str, str]]], dict[tuple[str, str], float]] | None = None,
) -> tuple[list[dict], dict[str, int]]:
    """Triples of ids and scores: (query_id, positive_id, positive_score, positive_rank,
    negatives as (doc_id, score, rank)), and counts of what was dropped and why. ``documents``
    holds the text of every document of ``candidate_ids`` that is in the corpus;
    ``score_positives`` (see ``PositiveScores``) scores the (query, positive) pairs the run
    did not retrieve, or is None when the system cannot."""
    positives = _positives(qrels, settings.min_relevance)
    ranked = _ranked(run)
    method = settings.false_negative_filter
    threshold = settings.near_duplicate_jaccard
    grams: dict[str, set[str]] = {}

    def shingled(doc_id: str) -> set[str]:
        if doc_id not in grams:
            grams[doc_id] = shingles(documents[doc_id], SHINGLE_WORDS)
        return grams[doc_id]

    hits_of = {
        query_id: {doc_id: (score, rank) for doc_id, score, rank in hits}
        for query_id, hits in ranked.items()
    }
    unretrieved = [
        (query_id, doc_id)
        for query_id, doc_ids in positives.items()
        for doc_id in doc_ids
        if doc_id in documents and doc_id not in hits_of.get(query_id, {})
    ]
    direct = score_positives(unretrieved) if score_positives and unretrieved else {}
    counts = dict.fromkeys(
        [
            "queries",
            "queries_without_positive",
            "triples",
            "negatives",
            "candidates_positive",
            "candidates_above_cap",
            "candidates_not_in_corpus",
            "candidates_near_duplicate",
            "positives_not_retrieved",
            "positives_scored_directly",
            "positives_not_scored",
            "positives_not_in_corpus",
            "triples_without_negatives",
            "triples_short",
        ],
        0,
    )
    counts["positives_not_retrieved"] = len(unretrieved)
    counts["positives_scored_directly"] = len(direct)
    triples = []
    for query_id in sorted(ranked.keys() | positives.keys()):
        counts["queries"] += 1
        if query_id not in positives:
            counts["queries_without_positive"] += 1
            continue
        positive_ids = set(positives[query_id])
        hits = ranked.get(query_id, [])
        candidates = [hit for hit in hits if hit[2] <= settings.top_k]
        counts["candidates_positive"] += sum(1 for hit in candidates if hit[0] in positive_ids)
        candidates = [hit for hit in candidates if hit[0] not in positive_ids]
        in_corpus = [hit for hit in candidates if hit[0] in documents]
        counts["candidates_not_in_corpus"] += len(candidates) - len(in_corpus)
        candidates = in_corpus
        if threshold is not None:
            # A copy of any positive is a false negative, whichever positive the triple holds.
            known = [p for p in positive_ids if p in documents]
            distinct = [
                hit
                for hit in candidates
                if all(jaccard(shingled(hit[0]), shingled(p)) < threshold for p in known)
            ]
            counts["candidates_near_duplicate"] += len(candidates) - len(distinct)
            candidates = distinct
        for positive_id in positives[query_id]:
            if positive_id not in documents:
                counts["positives_not_in_corpus"] += 1
                continue
            positive_score, positive_rank = hits_of.get(query_id, {}).get(
                positive_id, (direct.get((query_id, positive_id)), None)
            )
            if positive_score is None:
                counts["positives_not_scored"] += 1
                if method.method == "relative_to_positive":
                    # Without the positive's score its cap is unknown: no triple rather than
                    # one whose negatives may be harder than the positive.
                    continue
            cap = score_cap(method, positive_score)
            allowed = [hit for hit in candidates if cap is None or hit[1] <= cap]
            counts["candidates_above_cap"] += len(candidates) - len(allowed)
            chosen = allowed[: settings.num_negatives]
            if not chosen:
                counts["triples_without_negatives"] += 1
                continue
            counts["triples_short"] += len(chosen) < settings.num_negatives
            triples.append(
                {
                    "query_id": query_id,
                    "positive_id": positive_id,
                    "positive_score": positive_score,
                    "positive_rank": positive_rank,
                    "negatives": chosen,
                }
            )
            counts["triples"] += 1
            counts["negatives"] += len(chosen)
    return triples, counts


class PositiveScores:
    """Scores (query, document) pairs with the teacher that made the run, for the positives it
    did not retrieve: BM25 through bm25s with the index its run searched (the scores the run
    holds), a dense retriever as the inner product of the stored query and document vectors (a
    document's best passage for passage models: MaxP, as ``dense_search``). ``stored`` holds
    BM25's ``bm25_index`` folder, or a dense retriever's ``queries``, ``documents`` (and
    ``passages``) vector files."""

    def __init__(self, retriever: dict, queries: pa.Table, stored: dict):
        self.retriever, self.stored = retriever, stored
        self.query_texts = dict(
            zip(queries.column("query_id").to_pylist(), queries.column("text").to_pylist())
        )

    @classmethod
    def of(cls, retriever, queries, stored=None) -> PositiveScores | None:
        """The scorer for ``retriever`` (None when the system is not a retriever, or not one
        that can be scored directly)."""
        if retriever is None or retriever["type"] not in ("bm25", "dense") or not stored:
            return None
        return cls(retriever, queries, stored)

    def __call__(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], float]:
        if self.retriever["type"] == "bm25":
            retriever = BM25Retriever.load(self.stored["bm25_index"], self.retriever)
            return retriever.score_pairs(self.query_texts, pairs)
        query_ids, query_matrix = read_embeddings(
            self.stored["queries"], {query_id for query_id, _ in pairs}
        )
        vectors = dict(zip(query_ids, query_matrix))
        passages = self.stored.get("passages")
        return best_row_scores(vectors, self.stored["documents"], passages, pairs)


def _texts(table: pa.Table, id_column: str, ids: set[str], document: bool) -> dict[str, str]:
    wanted = pa.array(sorted(ids), pa.string())
    table = table.filter(pc.is_in(table.column(id_column), value_set=wanted))
    keys = table.column(id_column).to_pylist()
    if document:
        texts = contracts.document_texts(
            table.column("title").to_pylist(), table.column("text").to_pylist()
        )
    else:
        texts = table.column("text").to_pylist()
    return dict(zip(keys, texts))


def with_texts(triples: list[dict], queries: pa.Table, documents: dict[str, str]) -> pa.Table:
    """The ``contracts.NEGATIVES`` table: the triples with query and document texts as models read
    them (``contracts.document_text``)."""
    query_texts = _texts(queries, "query_id", {t["query_id"] for t in triples}, document=False)
    rows = [
        {
            "query_id": triple["query_id"],
            "query": query_texts[triple["query_id"]],
            "positive_id": triple["positive_id"],
            "positive": documents[triple["positive_id"]],
            "positive_score": triple["positive_score"],
            "positive_rank": triple["positive_rank"],
            "negative_ids": [doc_id for doc_id, _, _ in triple["negatives"]],
            "negatives": [documents[doc_id] for doc_id, _, _ in triple["negatives"]],
            "negative_scores": [score for _, score, _ in triple["negatives"]],
            "negative_ranks": [rank for _, _, rank in triple["negatives"]],
        }
        for triple in triples
    ]
    return pa.Table.from_pylist(rows, contracts.NEGATIVES)


def consistent(table: pa.Table, spec: Consistency | None) -> tuple[pa.Table, int]:
    """The triples whose (query, positive) pass Arctic-Embed's consistency filter
    (``irflow.data.consistency``: the cosine of their mean word vectors at least
    ``min_similarity``), and how many did not; all of them when ``spec`` is None."""
    if spec is None or table.num_rows == 0:
        return table, 0
    pairs = list(zip(table.column("query").to_pylist(), table.column("positive").to_pylist()))
    scores = similarities(pairs, spec.vectors, spec.max_words)
    keep = pa.array([score >= spec.min_similarity for score in scores])
    return table.filter(keep), table.num_rows - sum(keep.to_pylist())


def jsonl_rows(table: pa.Table, settings: Negatives) -> tuple[list[dict], int]:
    """Rows of sentence-transformers' training formats (columns by position: anchor,
    positive, negatives), and how many triples were left out of them."""
    rows, left_out = [], 0
    for row in table.to_pylist():
        base = {"query": row["query"], "positive": row["positive"]}
        margins = None
        if settings.scores:
            if row["positive_score"] is None:
                left_out += 1  # no margin to distil without the positive's score
                continue
            margins = [row["positive_score"] - score for score in row["negative_scores"]]
        if settings.format == "triplet":
            for i, negative in enumerate(row["negatives"]):
                label = {} if margins is None else {"label": margins[i]}
                rows.append(base | {"negative": negative} | label)
        elif len(row["negatives"]) == settings.num_negatives:
            # n-tuple: every row needs the same columns, so a triple with fewer negatives
            # than asked for is left out of the JSONL (it stays in the Parquet).
            label = {} if margins is None else {"label": margins}
            rows.append(
                base | {f"negative_{i}": n for i, n in enumerate(row["negatives"], start=1)} | label
            )
        else:
            left_out += 1
    return rows, left_out


def write_jsonl(rows: list[dict], path: Path) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def split_qrels(source: dict, split: str, queries: pa.Table) -> pa.Table:
    """The judgements of ``split`` from the dataset's own folder (``source`` is its
    source.json record), for a split other than the one the workflow ingested."""
    if source["layout"] != "beir":
        raise InputError(
            source["qrels"], f"split {split!r}: only BEIR-layout datasets have other splits here"
        )
    qrels_path = dataset_files(Path(source["qrels"]).parents[1], split)[2]
    query_ids = set(queries.column("query_id").to_pylist())
    # Documents are checked by mine against the filtered corpus, so any id is accepted here.
    rows, _ = read_qrels(qrels_path, _Everything(), query_ids, "drop")
    if not rows:
        raise InputError(qrels_path, f"no judgements of known queries in split {split!r}")
    return pa.Table.from_pylist(rows, contracts.QRELS)


class _Everything:
    """Every id is known: ``read_qrels`` then drops only rows of unknown queries."""

    def __contains__(self, item) -> bool:
        return True


@dataclass
class Teacher:
    """The mining system's ``run`` of the split's judged queries, their ``qrels``, and
    ``score_positives`` (see ``mine``), which scores the positives the run did not retrieve
    (None where the system scores none)."""

    run: pa.Table
    qrels: pa.Table
    score_positives: Callable | None = None

    @classmethod
    def searching(
        cls, queries: pa.Table, source: Path, split: str, searcher, request: SearchRequest
    ) -> Teacher:
        """The teacher of a split the workflow's runs do not cover: the judgements of
        ``split`` from the dataset's folder (``source``, its source.json) and ``searcher``'s
        run of their queries (a retriever family's, irflow.retrieval.runs.QuerySearcher),
        which scores missing positives where it can (``score_pairs``)."""
        qrels = split_qrels(json.loads(Path(source).read_text()), split, queries)
        run = retrieve_judged(queries, qrels, searcher, request)
        scores = getattr(searcher, "scores_pairs", False)
        scorer = partial(searcher.score_pairs, queries) if scores else None
        return cls(run, qrels, scorer)


def run_negatives(
    queries: pa.Table, corpus: Path, spec: dict, teacher: Teacher, outputs: tuple[Path, Path]
) -> dict:
    """Mine and write one export from ``teacher`` (its run, judgements and scorer) to
    ``outputs``: the Parquet and the JSONL file. ``spec`` is the export's validated config
    block (the job's params), typed once here."""
    settings = Negatives.model_validate(spec)
    out_parquet, out_jsonl = outputs
    ids = candidate_ids(teacher.run, teacher.qrels, settings)
    documents = _texts(contracts.read_table(corpus), "doc_id", ids, document=True)
    triples, counts = mine(teacher.run, teacher.qrels, documents, settings, teacher.score_positives)
    table = with_texts(triples, queries, documents)
    table, counts["triples_inconsistent"] = consistent(table, settings.consistency)
    contracts.write_table(table, out_parquet, contracts.NEGATIVES)
    rows, left_out = jsonl_rows(table, settings)
    write_jsonl(rows, out_jsonl)
    counts |= {"split": settings.split, "jsonl_rows": len(rows), "jsonl_left_out": left_out}
    return counts


@register_check
def _negatives_problems(config: dict) -> list[str]:
    """The negatives blocks: a known dataset (the config's own or a derived one, of any kind)
    and system."""
    problems = []
    datasets = all_datasets(config)
    systems = system_kinds(config)
    for name, spec in config["negatives"].items():
        if spec["dataset"] not in datasets:
            path = f"negatives.{name}.dataset"
            problems.append(missing_key(path, spec["dataset"], "datasets", datasets))
        if spec["system"] not in systems:
            path = f"negatives.{name}.system"
            problems.append(missing_key(path, spec["system"], "systems", systems))
    return problems
