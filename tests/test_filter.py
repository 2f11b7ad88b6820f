"""filter: which documents go, why, and that judged documents are never dropped silently."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import random

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import SCHEMA, minimal_config, planned_inputs, write_beir
from pydantic import ValidationError

from irflow.core import contracts
from irflow.data import filter as filtering
from irflow.data.filter import copy_tables, filter_table_html, run_filter, summarize_filters
from irflow.data.ingest import ingest
from irflow.data.quality import FILTERS
from irflow.workflow.config import validate_config

CORPUS = [
    {"_id": "a", "title": "", "text": "   "},  # empty
    {"_id": "b", "title": "T", "text": "one two three"},
    {"_id": "c", "title": "T", "text": "one two three"},  # duplicate of b
    {"_id": "d", "title": "", "text": "w " * 50},  # long
    {"_id": "e", "title": "", "text": ""},  # empty but judged
    {"_id": "f", "title": "T", "text": "one two three"},  # duplicate, judged
]
QUERIES = [{"_id": "q1", "text": "one"}, {"_id": "q2", "text": "two"}, {"_id": "q3", "text": "x"}]
QRELS = [("q1", "e", 1), ("q1", "f", 1), ("q2", "b", 0)]
RULES = {
    "drop_empty": True,
    "drop_duplicates": True,
    "min_words": None,
    "max_words": 20,
    "judged": "flag",
}


def filtered(tmp_path, corpus=CORPUS, qrels=QRELS, base=RULES, **rules):
    folder = write_beir(tmp_path / "raw", corpus, QUERIES, qrels)
    data = tmp_path / "data"
    ingest(folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / "test.tsv", data)
    out = tmp_path / "out"
    counts = run_filter(
        data / "corpus.parquet",
        data / "queries.parquet",
        data / "qrels.parquet",
        base | rules,
        out_corpus=out / "corpus.parquet",
        out_queries=out / "queries.parquet",
        out_audit=out / "audit.parquet",
    )
    corpus = pq.read_table(out / "corpus.parquet").column("doc_id").to_pylist()
    audit = {row["doc_id"]: row for row in pq.read_table(out / "audit.parquet").to_pylist()}
    queries = pq.read_table(out / "queries.parquet").column("query_id").to_pylist()
    return corpus, audit, queries, counts


def test_drops_are_audited_and_judged_documents_flagged(tmp_path):
    corpus, audit, _, counts = filtered(tmp_path)
    assert corpus == ["b", "e", "f"]
    assert {k: (v["action"], v["reason"], v["judged"]) for k, v in audit.items()} == {
        "a": ("drop", "empty", False),
        "c": ("drop", "exact duplicate of b", False),
        "d": ("drop", "longer than 20 words", False),
        "e": ("flag", "empty", True),
        "f": ("flag", "exact duplicate of b", True),
    }
    assert {k: (v["filter"], v["value"]) for k, v in audit.items()} == {
        "a": ("empty", 0.0),
        "c": ("exact_duplicate", None),
        "d": ("max_words", 50.0),
        "e": ("empty", 0.0),
        "f": ("exact_duplicate", None),
    }
    assert counts | {"rules": None} == {
        "documents_in": 6,
        "documents_out": 3,
        "dropped": 3,
        "flagged": 2,
        "by_filter": {
            "empty": {"dropped": 1, "flagged": 1},
            "exact_duplicate": {"dropped": 1, "flagged": 1},
            "max_words": {"dropped": 1, "flagged": 0},
        },
        "queries_scored": 2,
        "rules": None,
    }


def test_an_exact_duplicate_keeps_its_first_judged_copy(tmp_path):
    """As near-duplicates do: an unjudged copy before a judged one goes, the judged one stays
    (keeping the first would leave both, the unjudged one a ready-made false negative)."""
    corpus = [
        {"_id": "early", "title": "T", "text": "same words here"},
        {"_id": "other", "title": "T", "text": "other words"},
        {"_id": "judged", "title": "T", "text": "same words here"},
        {"_id": "late", "title": "T", "text": "same words here"},
    ]
    qrels = [("q1", "judged", 1)]
    for judged in ("flag", "drop"):
        kept, audit, _, counts = filtered(tmp_path / judged, corpus, qrels, judged=judged)
        assert kept == ["other", "judged"]
        assert {k: (v["action"], v["reason"]) for k, v in audit.items()} == {
            "early": ("drop", "exact duplicate of judged"),
            "late": ("drop", "exact duplicate of judged"),
        }
        assert counts["flagged"] == 0


def test_judged_documents_can_be_dropped_explicitly(tmp_path):
    corpus, audit, _, _ = filtered(tmp_path, judged="drop")
    assert corpus == ["b"]
    assert audit["e"]["action"] == "drop" and audit["e"]["judged"]


def test_rules_can_be_switched_off(tmp_path):
    corpus, audit, _, _ = filtered(
        tmp_path, drop_empty=False, drop_duplicates=False, max_words=None, min_words=2
    )
    assert corpus == ["b", "c", "d", "e", "f"]
    assert audit["a"]["reason"] == "shorter than 2 words"


def test_a_rule_the_block_leaves_out_is_the_schemas_default(tmp_path):
    """The filter job types its block once (irflow.core.settings_types.Filter): a setting the
    block leaves out is the schema's default, drop_empty true, drop_duplicates false, judged
    flag, as the validated config holds it (the dict's reading stopped at the missing key). The
    counts keep the block as it was given: the manifest records it."""
    corpus, audit, _, counts = filtered(tmp_path, base={}, max_words=20)
    assert corpus == ["b", "c", "e", "f"]
    assert {k: (v["action"], v["reason"]) for k, v in audit.items()} == {
        "a": ("drop", "empty"),
        "d": ("drop", "longer than 20 words"),
        "e": ("flag", "empty"),
    }
    assert counts["rules"] == {"max_words": 20}


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ({"quality": {"word": {"enabled": True}}}, "quality.word"),
        ({"min_words": -1}, "min_words"),
        ({"near_duplicates": {"enabled": True, "treshold": 0.5}}, "near_duplicates.treshold"),
    ],
)
def test_a_block_the_schema_refuses_is_refused_naming_the_key(tmp_path, rules, field):
    """A misspelt filter or setting, or a bound the schema refuses, is refused by the typed
    block, naming it; read as a dict it was passed over and the corpus filtered without it."""
    with pytest.raises(ValidationError, match=field):
        filtered(tmp_path, **rules)


def test_only_judged_queries_are_scored(tmp_path):
    _, _, queries, _ = filtered(tmp_path)
    assert queries == ["q1", "q2"]  # q2's only judgement is grade 0: still judged


def schema_rules(**quality) -> dict:
    """The validated ``filter`` block with the named quality filters on."""
    config = minimal_config(
        retrievers={"r": {"type": "bm25"}},
        filter={"quality": {name: {"enabled": True} for name in quality}},
    )
    return validate_config(config, SCHEMA)["filter"]


PROSE = "The cells divide when the growth factors in the medium reach their threshold."
QUALITY_CORPUS = [
    {"_id": "good", "title": "Growth", "text": PROSE},
    {"_id": "numbers", "title": "", "text": "12 13 14 15 16 17 18 19 20 21 22"},
    {"_id": "short", "title": "", "text": "the cells"},
    {"_id": "judged", "title": "", "text": "1 2 3 4 5 6 7 8 9 10 11"},
]


def test_quality_filters_audit_every_failure_with_its_value(tmp_path):
    rules = schema_rules(words=True, words_without_letter=True, stop_words=True)
    corpus, audit_rows, _, counts = filtered(
        tmp_path, corpus=QUALITY_CORPUS, qrels=[("q1", "judged", 1)], **rules
    )
    assert corpus == ["good", "judged"]
    audit = pq.read_table(tmp_path / "out" / "audit.parquet").to_pylist()
    assert [(r["doc_id"], r["filter"], r["value"], r["action"]) for r in audit] == [
        ("numbers", "words_without_letter", 1.0, "drop"),
        ("numbers", "stop_words", 0.0, "drop"),
        ("short", "words", 2.0, "drop"),
        ("judged", "words_without_letter", 1.0, "flag"),
        ("judged", "stop_words", 0.0, "flag"),
    ]
    assert audit[0]["reason"] == "words_without_letter 1 >= 0.2"
    assert counts["dropped"] == 2 and counts["flagged"] == 1
    assert counts["by_filter"] == {
        "words_without_letter": {"dropped": 1, "flagged": 1},
        "stop_words": {"dropped": 1, "flagged": 1},
        "words": {"dropped": 1, "flagged": 0},
    }


def test_workers_decide_exactly_as_one_process(tmp_path, monkeypatch):
    """Quality filters measured in two processes, over several batches and chunks, give the
    same corpus and audit as one process."""
    monkeypatch.setattr(filtering, "BATCH_ROWS", 40)
    monkeypatch.setattr(filtering, "CHUNK_ROWS", 7)
    rng = random.Random(5)
    corpus = [
        dict(rng.choice(QUALITY_CORPUS), _id=f"d{i}") | {"title": str(rng.randint(0, 3))}
        for i in range(150)
    ]
    rules = schema_rules(words=True, words_without_letter=True, stop_words=True)
    rules |= {"drop_duplicates": True, "max_words": None}
    outputs = []
    for workers in (1, 2):
        folder = write_beir(tmp_path / f"raw{workers}", corpus, QUERIES, [("q1", "d3", 1)])
        data, out = tmp_path / f"data{workers}", tmp_path / f"out{workers}"
        ingest(
            folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / "test.tsv", data
        )
        counts = run_filter(
            *(data / f"{name}.parquet" for name in ("corpus", "queries", "qrels")),
            rules,
            out_corpus=out / "corpus.parquet",
            out_queries=out / "queries.parquet",
            out_audit=out / "audit.parquet",
            workers=workers,
        )
        audit = pq.read_table(out / "audit.parquet").to_pylist()
        kept = pq.read_table(out / "corpus.parquet").column("doc_id").to_pylist()
        outputs.append((kept, audit, counts))
    assert outputs[0] == outputs[1]
    kept, audit, counts = outputs[0]
    assert 0 < len(kept) < 150 and counts["by_filter"]["exact_duplicate"]["dropped"] > 0
    assert {row["filter"] for row in audit} >= {"words", "stop_words", "exact_duplicate"}


def test_a_document_the_basic_rules_drop_is_not_measured_further(tmp_path):
    rules = schema_rules(words=True)
    _, audit, _, _ = filtered(tmp_path, **rules)
    assert audit["a"]["filter"] == "empty"  # one row: no "words" row besides it
    rows = pq.read_table(tmp_path / "out" / "audit.parquet").column("doc_id").to_pylist()
    assert rows.count("a") == 1


def test_default_schema_rules_change_nothing(tmp_path):
    """With the schema's defaults (every new filter off) the output is what it always was."""
    corpus, audit, _, counts = filtered(tmp_path, corpus=QUALITY_CORPUS, **schema_rules())
    assert corpus == ["good", "numbers", "short", "judged"]
    assert audit == {} and "by_filter" not in counts


def test_summary_counts_each_filter_and_the_total_once_per_document(tmp_path):
    rules = schema_rules(words=True, words_without_letter=True, stop_words=True)
    filtered(tmp_path, corpus=QUALITY_CORPUS, qrels=[("q1", "judged", 1)], **rules)
    out = tmp_path / "out"
    (out / "clusters.parquet").parent.mkdir(exist_ok=True)
    pq.write_table(contracts.CLUSTERS.empty_table(), out / "clusters.parquet")
    paths = {
        "corpus": tmp_path / "data" / "corpus.parquet",
        "filtered": out / "corpus.parquet",
        "audit": out / "audit.parquet",
        "clusters": out / "clusters.parquet",
    }
    rows = summarize_filters({"tiny": paths}).to_pylist()
    # In the order the filters run; "numbers" failed two filters but is one document.
    assert [(r["filter"], r["dropped"], r["flagged"]) for r in rows] == [
        ("words", 1, 0),
        ("words_without_letter", 1, 1),
        ("stop_words", 1, 1),
        ("total", 2, 1),
    ]
    assert {(r["documents_in"], r["documents_out"], r["clusters"]) for r in rows} == {(4, 2, 0)}
    html = filter_table_html(summarize_filters({"tiny": paths}))
    assert "<th>words_without_letter</th>\n      <td>1 / 1</td>" in html
    assert "<th>documents out</th>\n      <td>2</td>" in html


def test_a_curated_dataset_copies_its_base_tables(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    sources = [base / "corpus.parquet", base / "source.json"]
    sources[0].write_bytes(b"PAR1 corpus")
    sources[1].write_text('{"checksum": "x"}')
    targets = [tmp_path / "curated" / "corpus.parquet", tmp_path / "curated" / "source.json"]
    copy_tables(sources, targets)
    assert [t.read_bytes() for t in targets] == [s.read_bytes() for s in sources]
    # Dating the copy (as Snakemake dates a job's outputs) leaves the base as it was.
    before = sources[0].stat().st_mtime_ns
    os.utime(targets[0], ns=(before + 10**9, before + 10**9))
    assert sources[0].stat().st_mtime_ns == before
    sources[0].write_bytes(b"PAR1 changed")
    copy_tables(sources, targets)
    assert targets[0].read_bytes() == b"PAR1 changed"


def arguana_head(shared, folder, documents: int):
    """ArguAna's first documents with their judgements: ArguAna has exact and near copies,
    judged and unjudged, among them."""
    source = shared / "arguana"
    with gzip.open(source / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        corpus = [json.loads(line) for line in itertools.islice(lines, documents)]
    ids = {doc["_id"] for doc in corpus}
    qrels = pd.read_csv(source / "qrels" / "test.tsv", sep="\t", dtype=str)
    qrels = qrels[qrels["corpus-id"].isin(ids)]
    queries = [json.loads(line) for line in (source / "queries.jsonl").open(encoding="utf-8")]
    asked = set(qrels["query-id"])
    return write_beir(
        folder,
        corpus,
        [q for q in queries if q["_id"] in asked],
        [tuple(row) for row in qrels.itertuples(index=False)],
    )


def test_workers_give_one_process_outputs_on_arguana(tmp_path, monkeypatch, shared_datasets):
    """Every filter on, in one process and in two workers (MinHash signatures computed there,
    the LSH index in the main process), over several batches and chunks: the same corpus,
    audit, clusters and counts, on real documents with exact and near copies."""
    monkeypatch.setattr(filtering, "BATCH_ROWS", 300)
    monkeypatch.setattr(filtering, "CHUNK_ROWS", 70)
    folder = arguana_head(shared_datasets, tmp_path / "raw", 900)
    data = tmp_path / "data"
    ingest(folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / "test.tsv", data)
    quality = {name: {"enabled": True} for name in FILTERS}
    rules = validate_config(
        minimal_config(
            retrievers={"r": {"type": "bm25"}},
            filter={
                "quality": quality,
                "near_duplicates": {"enabled": True},
                "drop_duplicates": True,
            },
        ),
        SCHEMA,
    )["filter"]
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        counts = run_filter(
            *(data / f"{name}.parquet" for name in ("corpus", "queries", "qrels")),
            rules,
            **{
                f"out_{name}": out / f"{name}.parquet"
                for name in ("corpus", "queries", "audit", "clusters")
            },
            workers=workers,
        )
        tables = [
            pq.read_table(out / f"{name}.parquet") for name in ("corpus", "audit", "clusters")
        ]
        outputs.append(([table.to_pylist() for table in tables], counts))
    assert outputs[0] == outputs[1]
    (kept, audit, clusters), counts = outputs[0]
    # The case the parallel path must get right: judged exact copies the basic rules flag
    # still join the near-duplicate search.
    actions = {(row["filter"], row["action"]) for row in audit}
    assert {("exact_duplicate", "flag"), ("near_duplicate", "flag")} <= actions
    assert len(clusters) > 10 and counts["documents_out"] == len(kept) and counts["flagged"] > 20


def test_an_expanded_copy_keeps_exactly_its_base_filtered_documents(tmp_path):
    """A docT5query copy (expand) is scored over its base's filtered corpus: its filter job
    reads the base's filtered corpus (Snakemake's dry run), and a document the base drops stays
    out even where its expanded text would pass the rules, so BM25 and BM25 + docT5query rank
    the same documents."""

    raw = write_beir(tmp_path / "raw", CORPUS, QUERIES, QRELS)
    config = {
        "datasets": {"tiny": {"source": {"type": "path", "path": str(raw)}}},
        "retrievers": {"bm25": {"type": "bm25"}},
        "filter": {"max_words": 20},
        "expand": {
            "tiny-doct5query": {"dataset": "tiny", "model": {"id": "a/doc2query"}},
            "tiny-llm": {"dataset": "tiny", "llm": {}},
        },
        "llm": {"model": "fake", "base_url": "http://127.0.0.1:9/v1"},
    }
    target = "results/datasets/tiny-doct5query/filtered/corpus.parquet"
    # In the same dry run, an llm expansion's estimate reads its base's corpus.
    estimate = "results/llm_estimate/tiny-llm.json"
    (tmp_path / "graph").mkdir()
    planned = planned_inputs(tmp_path / "graph", config, target, estimate)
    inputs = {wildcards["dataset"]: files for rule, wildcards, files in planned if rule == "filter"}
    assert "results/datasets/tiny/filtered/corpus.parquet" in inputs["tiny-doct5query"]
    estimated = [files for rule, wildcards, files in planned if rule == "expand_estimate"]
    assert estimated == [["results/datasets/tiny/corpus.parquet"]]

    # The base drops "d" (50 words, max_words 20) and keeps "b" (3 words). Expanded, "b" has
    # 23 words and "a" (empty, dropped by the base) has words: neither changes the decision.
    base, expanded = tmp_path / "base", tmp_path / "expanded"
    queries = " ".join(["what is one two three"] * 4)
    copy = [dict(doc, text=f"{doc['text']} {queries}") for doc in CORPUS]
    for folder, corpus in ((base, CORPUS), (expanded, copy)):
        written = write_beir(tmp_path / f"raw-{folder.name}", corpus, QUERIES, QRELS)
        ingest(
            written / "corpus.jsonl",
            written / "queries.jsonl",
            written / "qrels" / "test.tsv",
            folder,
        )
    kept = {}
    run_filter(
        *(base / f"{name}.parquet" for name in ("corpus", "queries", "qrels")),
        RULES,
        **{
            f"out_{name}": base / "filtered" / f"{name}.parquet"
            for name in ("corpus", "queries", "audit")
        },
    )
    counts = filtering.run_filter_as_base(
        *(expanded / f"{name}.parquet" for name in ("corpus", "queries", "qrels")),
        *(base / "filtered" / f"{name}.parquet" for name in ("corpus", "audit")),
        **{
            f"out_{name}": expanded / "filtered" / f"{name}.parquet"
            for name in ("corpus", "queries", "audit")
        },
    )
    for folder in (base, expanded):
        kept[folder.name] = pq.read_table(folder / "filtered" / "corpus.parquet").to_pylist()
    assert [d["doc_id"] for d in kept["expanded"]] == [d["doc_id"] for d in kept["base"]]
    assert [d["doc_id"] for d in kept["base"]] == ["b", "e", "f"]
    assert all(d["text"].endswith(queries) for d in kept["expanded"])  # the expanded texts
    assert counts["documents_in"] == 6 and counts["documents_out"] == 3
    # The audit is the base's: the same decisions, so filter_summary counts them alike.
    audits = [pq.read_table(f / "filtered" / "audit.parquet") for f in (base, expanded)]
    assert audits[0].equals(audits[1])
