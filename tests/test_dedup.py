"""Near-duplicates: MinHash LSH finds known near-copies, keeps a deterministic member, and the
filter stage drops (or flags) the others with their Jaccard similarity in the audit."""

from __future__ import annotations

import random

import pyarrow.parquet as pq
import pytest
from conftest import write_beir
from datasketch import LeanMinHash, MinHash

from irflow.data.dedup import NearDuplicateFinder, jaccard, lsh_bands, shingles
from irflow.data.filter import run_filter
from irflow.data.ingest import ingest
from irflow.data.quality import Document

VOCABULARY = [f"term{i}" for i in range(5000)]


def words(seed: int, count: int = 60) -> list[str]:
    return random.Random(seed).sample(VOCABULARY, count)


BASE = words(1)
ONE_WORD_CHANGED = BASE[:30] + ["changed"] + BASE[31:]  # 5 of 56 shingles differ
TAIL_DROPPED = BASE[:-2]  # 54 of 56 shingles
UNRELATED = words(2)
HALF_SHARED = BASE[:30] + words(3, 30)  # Jaccard about 0.3


def text(tokens: list[str]) -> str:
    return " ".join(tokens)


def find(documents: list[tuple[str, list[str], bool]], **settings) -> list[dict]:
    finder = NearDuplicateFinder(**settings)
    for position, (doc_id, tokens, judged) in enumerate(documents):
        finder.add(position, doc_id, finder.signature(Document(text(tokens))), judged)
    texts = {p: text(tokens) for p, (_, tokens, _) in enumerate(documents)}
    return finder.clusters(texts).to_pylist()


def test_shingles_are_lowercase_word_ngrams_without_punctuation():
    assert shingles("The cat, the HAT.", 2) == {"the cat", "cat the", "the hat"}
    assert shingles(Document("Too short"), 5) == {"too short"}
    assert shingles(Document(" ... "), 5) == set()


def test_known_near_duplicates_form_one_cluster_kept_by_corpus_order():
    rows = find(
        [
            ("unrelated", UNRELATED, False),
            ("base", BASE, False),
            ("half", HALF_SHARED, False),
            ("changed", ONE_WORD_CHANGED, False),
            ("tail", TAIL_DROPPED, False),
        ]
    )
    assert [(r["cluster"], r["doc_id"], r["kept"], r["size"]) for r in rows] == [
        ("base", "base", True, 3),
        ("base", "changed", False, 3),
        ("base", "tail", False, 3),
    ]
    exact = {r["doc_id"]: r["jaccard"] for r in rows}
    assert exact["base"] == 1.0
    assert exact["changed"] == pytest.approx(51 / 61)  # 56 shingles each, 51 shared
    assert exact["tail"] == pytest.approx(54 / 56)
    for row in rows:  # 128 permutations estimate within a few hundredths
        assert row["estimated_jaccard"] == pytest.approx(row["jaccard"], abs=0.12)


def pairs_at(changes: int, count: int, offset: int) -> list[tuple]:
    """``count`` pairs of 200-word documents, the second with ``changes`` words replaced far
    apart (each replacement changes 5 of 196 shingles)."""
    documents = []
    for i in range(count):
        base = words(offset + i, 200)
        copy = list(base)
        for k in range(changes):
            copy[10 + 20 * k] = f"changed{k}"
        documents += [(f"a{i}", base, False), (f"b{i}", copy, False)]
    return documents


def test_pairs_just_above_the_threshold_are_all_found_and_confirmed_exactly():
    # 4 changes: Jaccard 176 / 216 = 0.815; datasketch's default banding (9 x 13) finds such a
    # pair with probability about 0.5, the recall-tuned one (21 x 6) with 0.9995.
    near = pairs_at(4, 150, offset=100)
    rows = find(near)
    assert len(rows) == 300
    assert [r["jaccard"] for r in rows if not r["kept"]] == [pytest.approx(176 / 216)] * 150
    # 9 changes: Jaccard 151 / 241 = 0.627. LSH proposes some of these pairs; the exact
    # Jaccard turns every one down.
    far = pairs_at(9, 150, offset=400)
    finder = NearDuplicateFinder()
    for position, (doc_id, tokens, judged) in enumerate(far):
        finder.add(position, doc_id, finder.signature(Document(text(tokens))), judged)
    assert finder.candidates()  # proposed
    assert finder.clusters({p: text(t) for p, (_, t, _) in enumerate(far)}).num_rows == 0


def test_the_banding_is_tuned_for_recall_at_the_threshold():
    assert lsh_bands(0.8, 128) == (21, 6)
    for threshold in (0.5, 0.7, 0.8, 0.9):
        bands, rows = lsh_bands(threshold, 128)
        assert bands * rows <= 128 and 1 - (1 - threshold**rows) ** bands >= 0.99
        # One more row per band would miss more than 1 % of the pairs at the threshold.
        more = 128 // (rows + 1)
        assert 1 - (1 - threshold ** (rows + 1)) ** more < 0.99


def test_near_copies_index_one_representative():
    """A thousand near-copies of one document: one is indexed, each other is compared with it
    once, and all form one cluster."""
    base = words(9, 100)
    documents = [("base", base, False)] + [
        (f"c{i}", [*base[:-1], f"last{i}"], False) for i in range(1000)
    ]
    finder = NearDuplicateFinder()
    for position, (doc_id, tokens, judged) in enumerate(documents):
        finder.add(position, doc_id, finder.signature(Document(text(tokens))), judged)
    assert len(finder._signatures) == 1 and len(finder._pairs) == 1000
    groups = finder.groups({p: text(t) for p, (_, t, _) in enumerate(documents)})
    assert [len(group) for group in groups] == [1001]


def test_a_judged_document_is_kept_even_when_it_comes_later():
    rows = find([("base", BASE, False), ("changed", ONE_WORD_CHANGED, True)])
    assert {r["doc_id"]: r["kept"] for r in rows} == {"base": False, "changed": True}
    assert {r["cluster"] for r in rows} == {"changed"}


def test_the_threshold_decides():
    documents = [("base", BASE, False), ("changed", ONE_WORD_CHANGED, False)]
    assert find(documents, threshold=0.95) == []
    assert len(find(documents, threshold=0.7)) == 2


def test_clusters_do_not_depend_on_hash_order():
    documents = [
        ("base", BASE, False),
        ("changed", ONE_WORD_CHANGED, False),
        ("tail", TAIL_DROPPED, False),
    ]
    first = find(documents, seed=1)
    assert find(documents, seed=1) == first
    assert [r["doc_id"] for r in find(documents, seed=7) if r["kept"]] == ["base"]
    # The earliest member is the keeper whichever order the documents come in.
    reordered = find(list(reversed(documents)))
    assert [r["doc_id"] for r in reordered if r["kept"]] == ["tail"]


def test_exact_jaccard_helper():
    assert jaccard({"a", "b"}, {"b", "c"}) == 1 / 3
    assert jaccard(set(), set()) == 1.0


NEAR_RULES = {
    "drop_empty": True,
    "drop_duplicates": False,
    "min_words": None,
    "max_words": None,
    "judged": "flag",
    "near_duplicates": {
        "enabled": True,
        "shingle_words": 5,
        "permutations": 128,
        "threshold": 0.8,
        "seed": 1,
    },
}


def filter_near_duplicates(tmp_path, corpus: list[dict], qrels: list[tuple], **rules) -> dict:
    """Ingest ``corpus`` with one query judged by ``qrels`` and run the filter with
    NEAR_RULES (and ``rules``); its outputs go to ``tmp_path / "out"``."""
    folder = write_beir(tmp_path / "raw", corpus, [{"_id": "q", "text": "x"}], qrels)
    data, out = tmp_path / "data", tmp_path / "out"
    ingest(folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / "test.tsv", data)
    return run_filter(
        data / "corpus.parquet",
        data / "queries.parquet",
        data / "qrels.parquet",
        NEAR_RULES | rules,
        out_corpus=out / "corpus.parquet",
        out_queries=out / "queries.parquet",
        out_audit=out / "audit.parquet",
        out_clusters=out / "clusters.parquet",
    )


def test_filter_drops_near_duplicates_and_flags_judged_ones(tmp_path):
    corpus = [
        {"_id": "base", "title": "", "text": text(BASE)},
        {"_id": "changed", "title": "", "text": text(ONE_WORD_CHANGED)},
        {"_id": "tail", "title": "", "text": text(TAIL_DROPPED)},
        {"_id": "other", "title": "", "text": text(UNRELATED)},
    ]
    out = tmp_path / "out"
    counts = filter_near_duplicates(tmp_path, corpus, [("q", "tail", 1)])
    # "tail" is judged, so it is kept; "base" and "changed" go.
    assert pq.read_table(out / "corpus.parquet").column("doc_id").to_pylist() == ["tail", "other"]
    audit = pq.read_table(out / "audit.parquet").to_pylist()
    assert [(r["doc_id"], r["action"], r["filter"]) for r in audit] == [
        ("base", "drop", "near_duplicate"),
        ("changed", "drop", "near_duplicate"),
    ]
    assert audit[0]["value"] == pytest.approx(54 / 56)
    assert audit[0]["reason"] == "near duplicate of tail (Jaccard 0.964)"
    clusters = pq.read_table(out / "clusters.parquet").to_pylist()
    assert {(r["cluster"], r["doc_id"], r["kept"]) for r in clusters} == {
        ("tail", "base", False),
        ("tail", "changed", False),
        ("tail", "tail", True),
    }
    assert counts["near_duplicate_clusters"] == 1
    assert counts["by_filter"] == {"near_duplicate": {"dropped": 2, "flagged": 0}}


def test_judged_near_duplicates_are_flagged_not_dropped(tmp_path):
    corpus = [
        {"_id": "base", "title": "", "text": text(BASE)},
        {"_id": "changed", "title": "", "text": text(ONE_WORD_CHANGED)},
    ]
    qrels = [("q", "base", 1), ("q", "changed", 1)]
    out = tmp_path / "out"
    counts = filter_near_duplicates(tmp_path, corpus, qrels)
    assert pq.read_table(out / "corpus.parquet").num_rows == 2
    (row,) = pq.read_table(out / "audit.parquet").to_pylist()
    assert (row["doc_id"], row["action"], row["judged"]) == ("changed", "flag", True)
    assert counts["flagged"] == 1 and counts["dropped"] == 0


def test_a_judged_document_the_basic_rules_flag_joins_the_near_duplicate_search(tmp_path):
    """A judged exact copy is flagged by the exact-duplicate rule and kept, so it is still
    someone's near-duplicate: it joins the cluster and is flagged again there."""
    corpus = [
        {"_id": "base", "title": "", "text": text(BASE)},
        {"_id": "copy", "title": "", "text": text(BASE)},
        {"_id": "changed", "title": "", "text": text(ONE_WORD_CHANGED)},
    ]
    qrels = [("q", "base", 1), ("q", "copy", 1)]
    filter_near_duplicates(tmp_path, corpus, qrels, drop_duplicates=True)
    out = tmp_path / "out"
    clusters = pq.read_table(out / "clusters.parquet").to_pylist()
    assert {(r["cluster"], r["doc_id"], r["kept"]) for r in clusters} == {
        ("base", "base", True),
        ("base", "copy", False),
        ("base", "changed", False),
    }
    audit = pq.read_table(out / "audit.parquet").to_pylist()
    assert [(r["doc_id"], r["filter"], r["action"]) for r in audit] == [
        ("copy", "exact_duplicate", "flag"),
        ("copy", "near_duplicate", "flag"),
        ("changed", "near_duplicate", "drop"),
    ]


def test_a_signature_is_datasketchs_minhash_of_the_sorted_shingles():
    """Signatures reuse one draw of the permutations; each still equals the MinHash datasketch
    builds afresh for the seed (so clusters and estimates are what they were)."""
    finder = NearDuplicateFinder(permutations=64, seed=7)
    for tokens in (BASE, UNRELATED, ["one", "word"]):
        fresh = MinHash(num_perm=64, seed=7)
        fresh.update_batch([g.encode() for g in sorted(shingles(text(tokens), 5))])
        assert finder.signature(Document(text(tokens))) == LeanMinHash(fresh)
    assert finder.signature(Document(" ... ")) is None
