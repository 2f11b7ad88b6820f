"""A deterministic, arbitrarily large BEIR-layout corpus recombined from real sentences.

Scale benchmarks need a million-document corpus with real language and judgements that still
mean something. This script builds one from the shared corpora (SciFact, NFCorpus, ArguAna by
default):

* Every source text is split into sentences (a full stop, question or exclamation mark, then
  whitespace, then an upper-case letter, digit, quote or bracket).
* Queries: the sources' real test queries that have at least one relevant document, shuffled
  per source with the seed and taken in turn from each source until ``--queries`` are chosen
  (so no source dominates; a source that runs out leaves its turns to the others).
* Relevant documents: each source document judged relevant (grade > 0) to a chosen query is
  *planted* once, at a seeded random position of the corpus, as its own title plus its leading
  k sentences (all of them when it has fewer). Every chosen query is judged, with its original
  grade, against the planted copy of each of its relevant source documents, whichever query
  caused the planting.
* Background documents: a random sentence of the background pool (source sentences in corpus
  order), the title of its document, and k sentences sampled, in order and without repeats,
  from the ``WINDOW`` consecutive pool sentences starting at it. Neighbouring sentences mostly
  come from one or two source texts, so documents read as topical rather than random. A draw
  whose text was already written (about 1% of a million, mostly three-sentence ones) is drawn
  again, so no background document repeats another's text. The background never holds a
  sentence of a chosen query's relevant documents, nor of the query's own document (ArguAna's
  queries are corpus documents), so no unjudged document copies judged material: a query's
  relevant set is complete by construction, as far as the source judgements were.
* k is drawn uniformly from ``SENTENCES`` (3 to 5), which gives about 95 words (title and
  text) per document on average; background sentences are limited to ``SENTENCE_WORDS`` words
  to drop splitting failures (tables, reference lists).

Document ids are ``d`` plus seven digits in corpus order, query ids ``q`` plus six digits;
``sources.tsv`` maps each query to its source dataset and original id. The same sources, seed
and arguments give byte-identical files (numpy's PCG64 stream; gzip headers carry no name or
time). The corpus is streamed through gzip in batches, so memory holds the sentence pool, one
batch and an 8-byte digest per document, never the corpus; the folder is built under a
temporary name and renamed into place only when complete.

    .venv/bin/python benchmarks/scale/make_corpus.py --out /work/scale_data/msm1m
    .venv/bin/python benchmarks/scale/make_corpus.py --out /tmp/small --documents 5000 \\
        --queries 50 --sources ../shared/datasets/scifact

A JSON summary (documents, queries, qrels, mean words, seconds) is printed and written to
``summary.json`` in the folder.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from _folders import building, refuse_existing

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SOURCES = [
    REPO.parent / "shared" / "datasets" / name for name in ("scifact", "nfcorpus", "arguana")
]
SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
SENTENCES = (3, 5)
SENTENCE_WORDS = (5, 45)
WINDOW = 16
# Documents generated per numpy call; bounds memory and keeps the per-document Python work small.
BATCH = 20_000


@dataclass
class Source:
    name: str
    # doc id -> (title, sentences)
    documents: dict[str, tuple[str, list[str]]]
    queries: dict[str, str]
    # query id -> {doc id: grade}, relevant (grade > 0) documents only
    relevant: dict[str, dict[str, int]]


@dataclass
class Plan:
    """What goes where: chosen queries, planted documents and the background sentence pool."""

    queries: list[tuple[str, str, str]] = field(default_factory=list)  # (source, id, text)
    # (source, doc id) of each planted document, in planting order
    planted: list[tuple[str, str]] = field(default_factory=list)
    # per chosen query: {planted index: grade}
    judgements: list[dict[int, int]] = field(default_factory=list)
    pool: list[str] = field(default_factory=list)
    pool_words: list[int] = field(default_factory=list)
    # per pool sentence: index into titles of the document it came from
    pool_title: list[int] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)


def read_jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def split_sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_BOUNDARY.split(" ".join(text.split())) if s]


def load_source(folder: Path) -> Source:
    corpus_file = next(
        p for p in (folder / "corpus.jsonl.gz", folder / "corpus.jsonl") if p.exists()
    )
    documents = {
        str(doc["_id"]): (" ".join(doc.get("title", "").split()), split_sentences(doc["text"]))
        for doc in read_jsonl(corpus_file)
    }
    queries = {str(q["_id"]): q["text"] for q in read_jsonl(folder / "queries.jsonl")}
    relevant: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / "test.tsv").open() as f:
        next(f)  # header
        for line in f:
            query_id, doc_id, grade = line.rstrip("\n").split("\t")
            # Only documents that can be planted count: present and with some text.
            if int(grade) > 0 and documents.get(doc_id, ("", []))[1] and query_id in queries:
                relevant.setdefault(query_id, {})[doc_id] = int(grade)
    return Source(folder.name, documents, queries, relevant)


def choose_queries(sources: list[Source], count: int, rng: np.random.Generator) -> list:
    """(source, query id) pairs, seeded shuffle per source, taken from the sources in turn."""
    queues = []
    for source in sources:
        ids = sorted(source.relevant)
        queues.append([(source, ids[i]) for i in rng.permutation(len(ids))])
    chosen = []
    depth = 0
    while len(chosen) < count and any(depth < len(q) for q in queues):
        chosen += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return chosen[:count]


def make_plan(sources: list[Source], query_count: int, rng: np.random.Generator) -> Plan:
    plan = Plan()
    planted_index: dict[tuple[str, str], int] = {}
    excluded: set[tuple[str, str]] = set()
    for source, query_id in choose_queries(sources, query_count, rng):
        plan.queries.append((source.name, query_id, source.queries[query_id]))
        excluded.add((source.name, query_id))
        for doc_id in sorted(source.relevant[query_id]):
            key = (source.name, doc_id)
            if key not in planted_index:
                planted_index[key] = len(plan.planted)
                plan.planted.append(key)
    excluded.update(plan.planted)
    # Judge every chosen query against all planted documents relevant to it, not just the ones
    # it planted itself (NFCorpus queries share many relevant documents).
    by_name = {source.name: source for source in sources}
    for name, query_id, _ in plan.queries:
        grades = by_name[name].relevant[query_id]
        plan.judgements.append({planted_index[(name, d)]: g for d, g in grades.items()})

    low, high = SENTENCE_WORDS
    for source in sources:
        for doc_id, (title, sentences) in source.documents.items():
            if (source.name, doc_id) in excluded:
                continue
            kept = [s for s in sentences if low <= len(s.split()) <= high]
            if not kept:
                continue
            plan.titles.append(title)
            plan.pool += kept
            plan.pool_words += [len(s.split()) for s in kept]
            plan.pool_title += [len(plan.titles) - 1] * len(kept)
    return plan


def background_batch(pool_title: np.ndarray, size: int, rng: np.random.Generator) -> tuple:
    """Per document: title index, sentence indices (flat, split by counts), sentence counts.

    ``pool_title`` holds the title index of each pool sentence.
    """
    pool_size = len(pool_title)
    counts = rng.integers(SENTENCES[0], SENTENCES[1] + 1, size)
    starts = rng.integers(0, pool_size, size)
    # The k window offsets with the smallest random keys are a uniform k-subset; reading the
    # mask row by row keeps them in text order.
    ranks = rng.random((size, WINDOW)).argsort(axis=1).argsort(axis=1)
    rows, offsets = np.nonzero(ranks < counts[:, None])
    sentences = (starts[rows] + offsets) % pool_size
    return pool_title[starts], sentences, counts


def text_key(text: str) -> int:
    # A stable digest (str hashes change per process), so redraws are reproducible.
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def write_corpus(
    path: Path, plan: Plan, sources: dict[str, Source], documents: int, rng: np.random.Generator
) -> tuple[list[str], float]:
    """Stream the corpus; returns the id of each planted document and the mean word count."""
    positions = rng.choice(documents, size=len(plan.planted), replace=False)
    planted_at = {int(p): i for i, p in enumerate(positions)}
    pool, pool_words, titles = plan.pool, plan.pool_words, plan.titles
    title_words = [len(title.split()) for title in titles]
    pool_title = np.asarray(plan.pool_title)
    seen: set[int] = set()
    total_words = 0
    dumps = json.JSONEncoder(ensure_ascii=False).encode
    # No file name or time in the gzip header, so equal content gives equal bytes. Level 1: at
    # level 6 compression is most of the run time, for files only 15% smaller.
    with open(path, "wb") as raw, gzip.GzipFile("", "wb", 1, raw, mtime=0) as out:
        for first in range(0, documents, BATCH):
            size = min(BATCH, documents - first)
            title_ids, sentence_ids, counts = background_batch(pool_title, size, rng)
            title_ids, sentence_ids = title_ids.tolist(), sentence_ids.tolist()
            lines = []
            end = 0
            for row, count in enumerate(counts.tolist()):
                begin, end = end, end + count
                planted = planted_at.get(first + row)
                if planted is not None:
                    # A planted document takes the place of the background one drawn for it.
                    name, source_id = plan.planted[planted]
                    title, sentences = sources[name].documents[source_id]
                    text = " ".join(sentences[:count])
                    total_words += len(title.split()) + len(text.split())
                    seen.add(text_key(text))
                else:
                    title_id, chosen = title_ids[row], sentence_ids[begin:end]
                    text = " ".join([pool[i] for i in chosen])
                    # Three sentences out of a window repeat a draw for about 1% of a million
                    # documents: draw again until the text is new.
                    while (key := text_key(text)) in seen:
                        extra_titles, extra_sentences, _ = background_batch(pool_title, 1, rng)
                        title_id, chosen = int(extra_titles[0]), extra_sentences.tolist()
                        text = " ".join([pool[i] for i in chosen])
                    seen.add(key)
                    title = titles[title_id]
                    total_words += title_words[title_id] + sum([pool_words[i] for i in chosen])
                lines.append(dumps({"_id": f"d{first + row:07d}", "title": title, "text": text}))
            out.write(("\n".join(lines) + "\n").encode("utf-8"))
    planted_ids = [f"d{int(p):07d}" for p in positions]
    return planted_ids, total_words / documents


def make_corpus(
    out: Path, documents: int, queries: int, seed: int, source_folders: list[Path]
) -> dict:
    started = time.perf_counter()
    refuse_existing(out)
    rng = np.random.default_rng(seed)
    sources = [load_source(folder) for folder in source_folders]
    plan = make_plan(sources, queries, rng)
    if len(plan.planted) > documents // 2:
        raise SystemExit(
            f"{len(plan.planted)} relevant documents to plant into {documents}: "
            "lower --queries or raise --documents"
        )

    with building(out) as work:
        (work / "qrels").mkdir()
        planted_ids, mean_words = write_corpus(
            work / "corpus.jsonl.gz", plan, {s.name: s for s in sources}, documents, rng
        )
        query_lines, source_lines, qrel_lines = [], ["query-id\tsource\tsource-query-id"], []
        for number, ((name, source_id, text), grades) in enumerate(
            zip(plan.queries, plan.judgements)
        ):
            query_id = f"q{number:06d}"
            query_lines.append(json.dumps({"_id": query_id, "text": text}, ensure_ascii=False))
            source_lines.append(f"{query_id}\t{name}\t{source_id}")
            judged = sorted((planted_ids[i], g) for i, g in grades.items())
            qrel_lines += [f"{query_id}\t{doc_id}\t{grade}" for doc_id, grade in judged]
        (work / "queries.jsonl").write_text("\n".join(query_lines) + "\n", encoding="utf-8")
        (work / "sources.tsv").write_text("\n".join(source_lines) + "\n", encoding="utf-8")
        (work / "qrels" / "test.tsv").write_text(
            "\n".join(["query-id\tcorpus-id\tscore", *qrel_lines]) + "\n", encoding="utf-8"
        )
        summary = {
            "documents": documents,
            "queries": len(query_lines),
            "qrels": len(qrel_lines),
            "planted_documents": len(planted_ids),
            "background_sentences": len(plan.pool),
            "mean_words": round(mean_words, 2),
            "seed": seed,
            "sources": [folder.name for folder in source_folders],
            "seconds": round(time.perf_counter() - started, 2),
        }
        (work / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to create")
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sources", type=Path, nargs="+", default=DEFAULT_SOURCES)
    args = parser.parse_args()
    summary = make_corpus(args.out, args.documents, args.queries, args.seed, args.sources)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
