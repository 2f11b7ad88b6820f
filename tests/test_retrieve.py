"""retrieve and index: BM25 and dense top-k on small inputs, checked against the libraries."""

from __future__ import annotations

import functools
import gc
import gzip
import inspect
import json
import logging
import re

import bm25s
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import Stemmer
from bm25_index import bm25_run
from bm25s.tokenization import Tokenizer
from conftest import index_spec, schema_defaults
from pydantic import ValidationError

import irflow.retrieval.index
from irflow.core import contracts
from irflow.core.records import check
from irflow.data.ingest import ingest
from irflow.retrieval import bm25, retrieve
from irflow.retrieval.index import index_file
from irflow.retrieval.retrieve import dense_search
from irflow.retrieval.runs import report_short_queries

BM25 = schema_defaults({"type": "bm25"})  # lucene, k1 0.9, b 0.4, en stopwords, Snowball
DOCS = [
    ("d1", "Cats", "cats purr loudly"),
    ("d2", "", "dogs bark at cats"),
    ("d3", "Fish", "fish swim"),
    ("q1", "", "cats and dogs"),
]


@pytest.fixture
def tables(tmp_path):
    corpus = tmp_path / "corpus.parquet"
    contracts.write_table(
        pa.Table.from_pylist(
            [{"doc_id": d, "title": t, "text": x} for d, t, x in DOCS], contracts.CORPUS
        ),
        corpus,
    )
    queries = tmp_path / "queries.parquet"
    contracts.write_table(
        pa.Table.from_pylist(
            [{"query_id": "q1", "text": "cats dogs"}, {"query_id": "q2", "text": "fish"}],
            contracts.QUERIES,
        ),
        queries,
    )
    return corpus, queries


def test_bm25_scores_equal_bare_bm25s(tables):
    run, timing = bm25_run(*tables, BM25, top_k=10, remove_self_matches=False, latency_queries=5)
    assert list(timing["latency"]) == ["q1", "q2"]  # every query, when fewer than asked for
    assert timing["index_bytes"] > 0
    stemmer = Stemmer.Stemmer("english")
    texts = [f"{t} {x}".strip() for _, t, x in DOCS]
    model = bm25s.BM25(method="lucene", k1=0.9, b=0.4)
    model.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    expected = model.get_scores(
        bm25s.tokenize(
            "cats dogs", stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )[0]
    )
    q1 = run[run["query_id"] == "q1"]
    assert q1["doc_id"].tolist() == ["q1", "d2", "d1"]  # d3 matches nothing and is no hit
    by_doc = dict(zip(q1["doc_id"], q1["score"]))
    for (doc_id, _, _), score in zip(DOCS, expected):
        if score > 0:
            assert by_doc[doc_id] == pytest.approx(float(score), rel=1e-6)
    assert timing["self_matches_removed"] == 0


@pytest.mark.parametrize("dataset", ["scifact", "nfcorpus", "arguana"])
def test_bm25_word_pattern_finds_what_bm25s_default_finds(shared_datasets, dataset):
    default = re.compile(inspect.signature(Tokenizer).parameters["splitter"].default).findall
    ours = re.compile(bm25.BM25S_WORDS).findall
    tricky = ["a b_c d1 x", "Ärzte straße ǅemal", "e\u0301t\u00e9 co-op can't", "_ __ 1 12 ½¼", ""]
    with gzip.open(shared_datasets / dataset / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        texts = tricky + [line.lower() for line in lines]
    assert [ours(text) for text in texts] == [default(text) for text in texts]


def test_a_bm25_entry_is_typed_once_where_the_retriever_receives_it(tables, tmp_path):
    """BM25Retriever types its entry once (irflow.core.settings_types.Bm25): what an entry
    leaves out is the schema's default, and a key the schema does not know is refused, named
    (on main the entry was read as a dict: a KeyError, and a misspelt key was ignored, its
    setting left as it was). The index records the entry as written."""
    bare = bm25.BM25Retriever({"type": "bm25"}).index(tables[0])
    assert bare.spec.stemmer == "english" and bare.spec.k1 == 0.9
    filled = bm25.BM25Retriever(BM25).index(tables[0])
    for (rows, scores), (want_rows, want_scores) in zip(
        bare.search(["cats dogs", "fish"], 3), filled.search(["cats dogs", "fish"], 3)
    ):
        assert rows.tolist() == want_rows.tolist() and scores.tolist() == want_scores.tolist()
    with pytest.raises(ValidationError, match="stemer"):
        bm25.BM25Retriever(BM25 | {"stemer": None})
    with pytest.raises(ValidationError, match="k1"):
        bm25.BM25Retriever(BM25 | {"k1": 0})
    # The index job's params: the entry's values as written, in the order they always had.
    assert bm25.INDEX_SETTINGS == ("method", "k1", "b", "delta", "stemmer", "stopwords", "fields")
    written = BM25 | {"k1": 1}  # an int, as a config may write it
    # The index job builds from its params, the entry's index settings (no type).
    bm25.build_index(tables[0], bm25.index_settings(written), tmp_path / "index")
    record = json.loads((tmp_path / "index" / bm25.SETTINGS_FILE).read_text())
    assert record["settings"] == bm25.index_settings(written)
    assert isinstance(record["settings"]["k1"], int)
    loaded = bm25.BM25Retriever.load(tmp_path / "index", written)
    assert loaded.spec.k1 == 1.0 and loaded.search(["fish"], 1)[0][0].tolist() == [2]


def test_bm25_indexing_leaves_the_cyclic_gc_as_it_found_it(tables, tmp_path):
    bm25.BM25Retriever(BM25).index(tables[0])
    assert gc.isenabled()
    with pytest.raises(FileNotFoundError):
        bm25.BM25Retriever(BM25).index(tmp_path / "missing.parquet")
    assert gc.isenabled()
    gc.disable()
    try:
        bm25.BM25Retriever(BM25).index(tables[0])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_bm25_short_queries_are_explained_as_expected(tables, caplog):
    """A BM25 query sharing a term with fewer than top_k documents is short by design: the
    manifest says so, and the log at info level; a short run without a reason (a dense
    search's) stays a warning."""
    _, timing = bm25_run(*tables, BM25, top_k=10, remove_self_matches=False)
    assert timing["short_queries"] == 2
    assert timing["short_queries_reason"] == (
        "expected: BM25 returns only the documents that share a term with the query, and these "
        "queries share one with fewer than min(top_k, corpus size) documents"
    )
    with caplog.at_level(logging.INFO, logger="irflow"):
        report_short_queries(timing, 10)
        report_short_queries(timing | {"short_queries_reason": None}, 10)
    explained, unexplained = caplog.records
    assert explained.levelno == logging.INFO
    assert explained.getMessage().endswith(f"({timing['short_queries_reason']})")
    assert unexplained.levelno == logging.WARNING
    _, timing = bm25_run(*tables, BM25, top_k=1, remove_self_matches=False)
    assert timing["short_queries"] == 0 and timing["short_queries_reason"] is None


def test_bm25_removes_self_matches_when_asked(tables):
    run, timing = bm25_run(*tables, BM25, top_k=1, remove_self_matches=True)
    assert timing["self_matches_removed"] == 1
    assert run[run["query_id"] == "q1"]["doc_id"].tolist() == ["d2"]


def corpus_and_queries(tmp_path, docs, queries):
    corpus_path, queries_path = tmp_path / "corpus.parquet", tmp_path / "queries.parquet"
    rows = [{"doc_id": d, "title": "", "text": x} for d, x in docs]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.CORPUS), corpus_path)
    rows = [{"query_id": q, "text": x} for q, x in queries]
    contracts.write_table(pa.Table.from_pylist(rows, contracts.QUERIES), queries_path)
    return corpus_path, queries_path


# "cats" is in 3 of 4 documents: robertson's idf for it, log(1.5 / 3.5), is clamped to 0 by
# bm25s, so the documents that match score 0 like the one that does not; bm25l and bm25+ give
# the fish document a positive score although it shares no term with the query.
CATS = [("d1", "cats purr"), ("d2", "cats sleep all day"), ("d3", "cats cats"), ("d4", "fish swim")]


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_bm25_hits_are_the_documents_sharing_a_term(tmp_path, method):
    spec = BM25 | {"method": method}
    paths = corpus_and_queries(tmp_path, CATS, [("q", "cats"), ("none", "birds")])
    run, _ = bm25_run(*paths, spec, top_k=10, remove_self_matches=False)
    assert set(run["query_id"]) == {"q"}  # "birds" matches nothing: no hit at all
    model = bm25s.BM25(method=method, k1=spec["k1"], b=spec["b"], delta=spec["delta"])
    stemmer = Stemmer.Stemmer("english")
    model.index(
        bm25s.tokenize([x for _, x in CATS], stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    expected = dict(zip(["d1", "d2", "d3", "d4"], model.get_scores(["cat"]).tolist()))
    del expected["d4"]
    ranked = sorted(expected, key=lambda d: (-expected[d], [-ord(c) for c in d]))
    assert run["doc_id"].tolist() == ranked
    assert run["score"].tolist() == pytest.approx([expected[d] for d in ranked], rel=1e-6)


@pytest.mark.parametrize(
    ("method", "top_k", "expected"),
    [
        # d2 and d3 tie first; trec_eval ranks the larger doc id first, so d3 is the top 1.
        ("lucene", 1, ["d3"]),
        # "cats" is in 3 of 4: every match scores 0 (idf 0). The fish document scores 0 too
        # and would rank first by its id, but it is no hit.
        ("robertson", 2, ["d3", "d2"]),
    ],
)
def test_bm25_top_k_is_taken_among_matching_documents_in_trec_eval_order(
    tmp_path, method, top_k, expected
):
    docs = [("d1", "cats purr"), ("d2", "cats"), ("d3", "cats"), ("d4", "fish swim")]
    paths = corpus_and_queries(tmp_path, docs, [("q", "cats")])
    run, _ = bm25_run(*paths, BM25 | {"method": method}, top_k, remove_self_matches=False)
    assert run["doc_id"].tolist() == expected


def embeddings(path, ids, vectors):
    vectors = np.asarray(vectors, dtype=np.float32)
    table = pa.table(
        {
            "id": ids,
            "vector": pa.FixedSizeListArray.from_arrays(vectors.reshape(-1), vectors.shape[1]),
        },
        schema=contracts.embeddings_schema(vectors.shape[1]),
    )
    contracts.write_table(table, path)


@pytest.mark.parametrize("index_type", ["flat", "hnsw"])
def test_dense_top_k_is_exact_inner_product(tmp_path, index_type):
    rng = np.random.default_rng(0)
    docs, queries = rng.normal(size=(200, 16)), rng.normal(size=(7, 16))
    doc_ids = [f"d{i:03d}" for i in range(200)]
    embeddings(tmp_path / "c.parquet", doc_ids, docs)
    embeddings(tmp_path / "q.parquet", [f"q{i}" for i in range(7)], queries)
    spec = index_spec(type=index_type)
    stats = index_file(tmp_path / "c.parquet", spec, tmp_path / "i.faiss")
    assert stats["documents"] == 200 and stats["index_bytes"] > 200 * 16 * 4
    run, timing = dense_search(
        tmp_path / "i.faiss",
        spec,
        tmp_path / "c.parquet",
        tmp_path / "q.parquet",
        top_k=10,
        remove_self_matches=False,
        batch_size=3,
        latency_queries=4,
    )
    assert list(timing["latency"]) == ["q0", "q1", "q2", "q3"]
    assert all(seconds > 0 for seconds in timing["latency"].values())
    scores = queries.astype(np.float32) @ docs.astype(np.float32).T
    for i in range(7):
        expected = [doc_ids[j] for j in np.argsort(-scores[i])[:10]]
        got = run[run["query_id"] == f"q{i}"]
        assert got["doc_id"].tolist() == expected
        assert got["rank"].tolist() == list(range(1, 11))


def clustered(rows: int, seed: int) -> np.ndarray:
    """Unit vectors around 30 centres: IVF lists of very different sizes."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(30, 16))
    vectors = centres[rng.integers(0, 30, rows)] + 0.2 * rng.normal(size=(rows, 16))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def search_run(tmp_path, spec, docs, queries, top_k, **options):
    doc_ids = [f"d{i:04d}" for i in range(len(docs))]
    embeddings(tmp_path / "c.parquet", doc_ids, docs)
    embeddings(tmp_path / "q.parquet", [f"q{i}" for i in range(len(queries))], queries)
    spec = index_spec(**spec)
    index_file(tmp_path / "c.parquet", spec, tmp_path / "i.faiss")
    settings = dict(remove_self_matches=False, batch_size=16, latency_queries=0) | options
    return dense_search(
        tmp_path / "i.faiss",
        spec,
        tmp_path / "c.parquet",
        tmp_path / "q.parquet",
        top_k=top_k,
        **settings,
    )


@pytest.mark.parametrize(
    "spec",
    [
        # 2000 rows: 51 lists of ~40 rows; one probe holds far fewer than 300 documents.
        {"type": "ivf", "nprobe": 1, "target_recall": None},
        {"type": "ivfpq", "nprobe": 2, "pq_m": 4, "pq_bits": 6, "target_recall": None},
        # faiss' HNSW returns at most efSearch rows.
        {"type": "hnsw", "ef_search": 10, "M": 8, "target_recall": None},
    ],
)
def test_approximate_indexes_return_full_runs(tmp_path, spec):
    docs, queries = clustered(2000, seed=0), clustered(40, seed=1)
    run, timing = search_run(tmp_path, spec, docs, queries, top_k=300)
    assert (run.groupby("query_id").size() == 300).all() and run["query_id"].nunique() == 40
    assert timing["short_queries"] == 0
    search = timing["search"]
    if spec["type"] == "hnsw":
        assert search["settings"] == {"ef_search": 301}  # raised to the depth
    else:
        assert search["queries_probed_wider"] > 0
        assert search["widest_settings"]["nprobe"] > spec["nprobe"]
        assert search["deepest_k"] == 301  # probing wider, not asking faiss for more rows


def run_overlap(run, reference) -> float:
    """Pairs of ``reference`` (a run) that ``run`` also holds, over all of reference's."""
    pairs = set(zip(run["query_id"], run["doc_id"]))
    theirs = list(zip(reference["query_id"], reference["doc_id"]))
    return sum(pair in pairs for pair in theirs) / len(theirs)


def test_approximate_runs_record_their_recall_against_exact_search(tmp_path, caplog):
    docs, queries = clustered(1000, seed=0), clustered(20, seed=1)
    exact, timing = search_run(tmp_path / "flat", {"type": "flat"}, docs, queries, top_k=100)
    assert timing["recall"] is None  # nothing to measure: flat is the exact search
    spec = {"type": "ivf", "nprobe": 1, "recall_queries": 20, "target_recall": None}
    run, timing = search_run(tmp_path, spec, docs, queries, top_k=100)
    recall = timing["recall"]
    # Every query sampled: the recall is the run's overlap with the flat run.
    assert recall["queries"] == 20 and recall["top_k"] == 100
    assert recall["recall"] == pytest.approx(run_overlap(run, exact)) and recall["recall"] < 0.95
    assert recall["settings"] == {"nprobe": 1, "lists": 25}
    check({"stage": "retrieve", "settings": {}, "device": "cpu", "rows": len(run)} | timing)
    assert "recall@100 against exact search" in caplog.text and "below the warning" in caplog.text
    # A sample of 10, drawn with the seed: the overlap of those queries.
    run, timing = search_run(tmp_path, spec | {"recall_queries": 10, "recall_seed": 3}, docs,
                             queries, top_k=100)  # fmt: skip
    drawn = [f"q{i}" for i in np.sort(np.random.default_rng(3).choice(20, 10, replace=False))]
    sampled = [frame[frame["query_id"].isin(drawn)] for frame in (run, exact)]
    assert timing["recall"]["recall"] == pytest.approx(run_overlap(*sampled))


@pytest.mark.parametrize(
    ("spec", "setting"),
    [
        ({"type": "ivf", "nprobe": 1}, "nprobe"),
        ({"type": "ivfpq", "nprobe": 1, "pq_m": 4, "pq_bits": 6}, "nprobe"),
        ({"type": "hnsw", "ef_search": 10, "M": 8, "ef_construction": 16}, "ef_search"),
    ],
)
def test_target_recall_raises_the_search_setting_until_it_is_met(tmp_path, spec, setting):
    docs, queries = clustered(1000, seed=0), clustered(20, seed=1)
    exact, _ = search_run(tmp_path / "flat", {"type": "flat"}, docs, queries, top_k=100)
    run, timing = search_run(tmp_path, spec, docs, queries, top_k=100)  # target 0.99: default
    recall = timing["recall"]
    tried = [step[setting] for step in recall["tried"]]
    assert len(tried) > 1 and tried == sorted(tried)  # doubled until the target was met
    assert recall["recall"] >= 0.99 > recall["tried"][0]["recall"]
    assert recall["settings"][setting] == tried[-1] == timing["search"]["settings"][setting]
    # The sample is every query here: the run searched with the setting chosen meets it too.
    assert run_overlap(run, exact) == pytest.approx(recall["recall"])


def test_dense_cut_breaks_score_ties_by_doc_id_as_trec_eval(tmp_path):
    # Eleven copies of the query's direction tie for ranks 2-12; a top 5 keeps the 4 of them
    # that trec_eval ranks first (doc id descending), not the first rows faiss returns.
    rng = np.random.default_rng(2)
    query = rng.normal(size=16)
    docs = 0.1 * rng.normal(size=(60, 16))
    docs[0], docs[[5, *range(10, 20)]] = 2 * query, query
    run, timing = search_run(tmp_path, {"type": "flat"}, docs, query[None], top_k=5)
    assert run["doc_id"].tolist() == ["d0000", "d0019", "d0018", "d0017", "d0016"]
    assert timing["search"]["queries_searched_deeper"] == 1


def test_deep_searches_go_in_bounded_query_batches(tmp_path, monkeypatch):
    docs, queries = clustered(500, seed=3), clustered(20, seed=4)
    asked = []
    original = irflow.retrieval.index.Searcher.search

    def recording(self, vectors, k, widen=0):
        asked.append(len(vectors) * k)
        return original(self, vectors, k, widen)

    monkeypatch.setattr(retrieve, "MAX_SEARCH_PAIRS", 1000)
    monkeypatch.setattr(irflow.retrieval.index.Searcher, "search", recording)
    run, _ = search_run(tmp_path, {"type": "flat"}, docs, queries, top_k=200, batch_size=20)
    assert max(asked) <= 1000 and len(run) == 20 * 200


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_bm25_indexed_in_batches_scores_as_bm25s_on_the_whole_corpus(tmp_path, monkeypatch, method):
    # Read two documents at a time, with one document of no text and one of stopwords only
    # (both have no tokens, and still count towards the average document length).
    docs = [
        ("d1", "cats purr and cats sleep"),
        ("d2", ""),
        ("d3", "the and of"),
        ("d4", "dogs bark at cats"),
        ("d5", "fish swim"),
        ("d6", "Dogs chase cats, fish flee"),
    ]
    queries = [("q1", "cats dogs cats"), ("q2", "fish"), ("q3", "the")]
    paths = corpus_and_queries(tmp_path, docs, queries)
    batch_sizes = []
    document_texts = contracts.document_texts

    def spy(titles, texts):
        batch_sizes.append(len(texts))
        return document_texts(titles, texts)

    monkeypatch.setattr(bm25, "BM25_BATCH_ROWS", 2)
    monkeypatch.setattr(contracts, "document_texts", spy)
    spec = BM25 | {"method": method}
    run, _ = bm25_run(*paths, spec, top_k=10, remove_self_matches=False)
    assert batch_sizes == [2, 2, 2]  # never the whole corpus at once
    model = bm25s.BM25(method=method, k1=spec["k1"], b=spec["b"], delta=spec["delta"])
    stemmer = Stemmer.Stemmer("english")
    model.index(
        bm25s.tokenize([x for _, x in docs], stopwords="en", stemmer=stemmer, show_progress=False),
        show_progress=False,
    )
    for query_id, text in queries:
        tokens = bm25s.tokenize(
            text, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )[0]
        got = run[run["query_id"] == query_id]
        expected = model.get_scores(tokens) if tokens else np.zeros(len(docs))
        sharing = [i for i, (_, x) in enumerate(docs) if set(tokens) & set(stem_words(x))]
        assert sorted(got["doc_id"]) == sorted(docs[i][0] for i in sharing)
        by_doc = dict(zip(got["doc_id"], got["score"]))
        for i in sharing:  # the same float32 sums, bit for bit
            assert by_doc[docs[i][0]] == float(expected[i])


METHODS = ["lucene", "robertson", "atire", "bm25l", "bm25+"]


@pytest.fixture(scope="module")
def shared_corpora(shared_datasets, tmp_path_factory):
    """Each full shared corpus as irflow's corpus table, with its texts as the index reads them."""
    corpora = {}
    for name in ("scifact", "nfcorpus", "arguana"):
        folder, out = shared_datasets / name, tmp_path_factory.mktemp(name)
        ingest(folder / "corpus.jsonl.gz", folder / "queries.jsonl", folder / "qrels/test.tsv", out)
        table = pq.read_table(out / "corpus.parquet")
        titles, texts = table.column("title").to_pylist(), table.column("text").to_pylist()
        corpora[name] = out / "corpus.parquet", contracts.document_texts(titles, texts)
    return corpora


@pytest.fixture(scope="module")
def bare_tokens(shared_corpora):
    """Each shared corpus's texts as the bare bm25s index takes them, all at once: (token ids,
    vocabulary). Tokenised once per corpus, as the BM25 variants share a tokenizer; the
    vocabulary is a copy each time, since bm25s.BM25.index adds its empty token to it."""

    @functools.cache
    def tokenized(dataset: str) -> tuple[list[list[int]], dict]:
        bare = bm25.BM25Retriever(BM25)
        token_ids = bare._token_ids(shared_corpora[dataset][1], update_vocab=True)
        return token_ids, bare.tokenizer.get_vocab_dict()

    def tokens(dataset: str) -> tuple[list[list[int]], dict]:
        token_ids, vocabulary = tokenized(dataset)
        return token_ids, dict(vocabulary)

    return tokens


def score_matrix(retriever):
    matrix = retriever.model.scores
    arrays = [matrix["data"], matrix["indices"], matrix["indptr"], retriever.zero_scoring_terms]
    nonoccurrence = retriever.model.nonoccurrence_array
    return [(a.dtype, a.tobytes()) for a in arrays] + [
        None if nonoccurrence is None else nonoccurrence.tobytes()
    ]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dataset", ["scifact", "nfcorpus", "arguana"])
def test_bm25_streamed_index_is_bm25s_index_bit_for_bit(
    shared_corpora, bare_tokens, dataset, method
):
    corpus, texts = shared_corpora[dataset]
    spec = BM25 | {"method": method}
    ours = bm25.BM25Retriever(spec).index(corpus)  # 4096 rows a batch: 1 to 3 batches
    bare = bm25.BM25Retriever(spec)  # the same tokens, all at once, into bm25s.BM25.index
    bare.model = bm25s.BM25(method=method, k1=spec["k1"], b=spec["b"], delta=spec["delta"])
    bare.model.index(bare_tokens(dataset), show_progress=False)
    matrix = bare.model.scores
    bare.zero_scoring_terms = np.zeros(len(matrix["indptr"]) - 1, dtype=bool)
    zero_postings = np.flatnonzero(matrix["data"] <= 0)
    bare.zero_scoring_terms[np.searchsorted(matrix["indptr"], zero_postings, "right") - 1] = True
    assert ours.model.scores["num_docs"] == matrix["num_docs"] == len(texts)
    assert score_matrix(ours) == score_matrix(bare)
    if method == "robertson":  # terms in over half the documents: idf 0
        assert ours.zero_scoring_terms.any()


@pytest.mark.parametrize("method", ["lucene", "bm25l"])
def test_bm25_index_is_the_same_in_many_small_batches_as_in_one(
    shared_corpora, monkeypatch, method
):
    corpus, texts = shared_corpora["nfcorpus"]
    spec = BM25 | {"method": method}
    monkeypatch.setattr(bm25, "BM25_BATCH_ROWS", len(texts))
    whole = bm25.BM25Retriever(spec).index(corpus)
    monkeypatch.setattr(bm25, "BM25_BATCH_ROWS", 500)  # 8 batches, the last one short
    batched = bm25.BM25Retriever(spec).index(corpus)
    assert score_matrix(batched) == score_matrix(whole)
    queries = texts[:50]
    for (rows, scores), (rows_whole, scores_whole) in zip(
        batched.search(queries, 100), whole.search(queries, 100)
    ):
        assert rows.tolist() == rows_whole.tolist() and scores.tobytes() == scores_whole.tobytes()


def stem_words(text):
    return bm25s.tokenize(
        text,
        stopwords="en",
        stemmer=Stemmer.Stemmer("english"),
        return_ids=False,
        show_progress=False,
    )[0]


def test_bm25_hits_include_documents_matching_only_a_term_of_idf_zero(tmp_path):
    # robertson: "cats" (3 of 4 documents) scores 0, "swim" more; all four documents match.
    paths = corpus_and_queries(tmp_path, CATS, [("q", "cats swim")])
    run, _ = bm25_run(*paths, BM25 | {"method": "robertson"}, 10, remove_self_matches=False)
    assert run["doc_id"].tolist() == ["d4", "d3", "d2", "d1"]
    assert run["score"].tolist()[1:] == [0.0, 0.0, 0.0]


# One variant per corpus: the default (Snowball stems: queries map through the stems alone), no
# stemmer and no stopwords (the word vocabulary), bm25l (scores for absent terms).
SAVED_VARIANTS = {
    "scifact": BM25,
    "nfcorpus": BM25 | {"stemmer": None, "stopwords": None},
    "arguana": BM25 | {"method": "bm25l"},
}


@pytest.mark.parametrize("dataset", sorted(SAVED_VARIANTS))
def test_a_saved_index_searched_memory_mapped_is_the_index_built_in_the_job(
    shared_corpora, tmp_path, dataset
):
    """The index_bm25 job saves the index once; a search job loads it memory-mapped and finds
    the same hits with the same scores, bit for bit, as a search of the index built in memory."""
    corpus, texts = shared_corpora[dataset]
    spec = SAVED_VARIANTS[dataset]
    built = bm25.BM25Retriever(spec).index(corpus)
    assert built.save(tmp_path / "index") == sum(
        f.stat().st_size for f in (tmp_path / "index").iterdir()
    )
    loaded = bm25.BM25Retriever.load(tmp_path / "index", spec)
    assert isinstance(loaded.model.scores["data"], np.memmap)
    assert isinstance(loaded.model.scores["indices"], np.memmap)
    assert loaded.doc_ids.equals(built.doc_ids)
    # Corpus texts as queries: long ones, so most of the vocabulary is looked up, and words
    # the index does not hold ("zzyzx").
    queries = [f"{text} zzyzx" for text in texts[:150]]
    for (rows, scores), (rows_built, scores_built) in zip(
        loaded.search(queries, 100), built.search(queries, 100)
    ):
        assert rows.tolist() == rows_built.tolist()
        assert scores.tobytes() == scores_built.tobytes()


def test_an_index_built_with_other_settings_is_refused(tables, tmp_path):
    bm25.BM25Retriever(BM25).index(tables[0]).save(tmp_path / "index")
    with pytest.raises(ValueError, match=r"index: BM25 index built with .*'k1': 0.9.* searched "
                       r"with .*'k1': 1.2.*rebuild it"):  # fmt: skip
        bm25.BM25Retriever.load(tmp_path / "index", BM25 | {"k1": 1.2})


def test_an_index_is_saved_whole_or_not_at_all(tables, tmp_path, monkeypatch):
    folder = tmp_path / "index"
    retriever = bm25.BM25Retriever(BM25).index(tables[0])
    retriever.save(folder)
    first = sorted(f.name for f in folder.iterdir())
    assert {"doc_ids.parquet", "irflow.index.json", "params.index.json"} <= set(first)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bm25.contracts, "write_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bm25.BM25Retriever(BM25 | {"k1": 1.2}).index(tables[0]).save(folder)
    # The saved index is untouched and nothing half-written is left beside it.
    assert sorted(f.name for f in tmp_path.iterdir()) == [
        "corpus.parquet",
        "index",
        "queries.parquet",
    ]
    assert json.loads((folder / "irflow.index.json").read_text())["settings"]["k1"] == 0.9
