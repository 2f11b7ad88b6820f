"""bm25: lexical BM25 (bm25s), indexed once per dataset and variant, searched memory-mapped.

The index job (rules/index.smk, ``index_bm25``) builds bm25s' score matrix of the filtered corpus
in two streamed passes and saves it with ``bm25s.BM25.save`` (its score matrix as .npy files),
beside the tokenizer's vocabulary (``Tokenizer.save_vocab``), the corpus's doc ids and irflow's
own per-term record; every job that searches BM25 (retrieve, qc_candidates, negatives) loads it
with ``bm25s.BM25.load(mmap=True)``: the matrix stays on disk and the pages a query reads are
paged in, so no job tokenises the corpus again. The scores are bm25s' own, bit for bit, whether
the matrix is built in the job or loaded.

Every part of the variant (scoring method, k1, b, delta, stemmer, stopwords, fields) comes from
config. A BM25 hit is a document that shares at least one term with the query, whatever its
score: ``robertson`` gives a term found in more than half the documents idf 0 (bm25s clamps it
there), and ``bm25l``/``bm25+`` give every document a positive score, so the score alone cannot
say which documents matched.
"""

from __future__ import annotations

import gc
import json
import tempfile
import time
from contextlib import contextmanager
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from irflow.core import contracts
from irflow.core.atomic import atomic_path
from irflow.core.progress import LoggedProgress
from irflow.core.settings_types import Bm25
from irflow.retrieval.runs import top_with_ties

# The words bm25s' default pattern, r"(?u)\b\w\w+\b", finds: every maximal run of two or more
# word characters (leftmost-first matching cannot start a match inside a run). Without the
# boundary checks the regex, most of tokenising, runs about a quarter faster.
BM25S_WORDS = r"\w\w+"

# Documents are read and tokenised this many at a time: only their token ids are kept, never
# the whole corpus as Python strings.
BM25_BATCH_ROWS = 4096


def _document_postings(token_ids: list[list[int]], vocabulary: int) -> tuple:
    """Each document's distinct terms (int32, ascending) and their counts (float32), document
    after document; and per document its length in tokens and its number of distinct terms."""
    lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
    tokens = np.fromiter(chain.from_iterable(token_ids), dtype=np.int64, count=lengths.sum())
    documents = np.repeat(np.arange(len(token_ids)), lengths)
    vocabulary = max(vocabulary, 1)
    pairs, counts = np.unique(documents * vocabulary + tokens, return_counts=True)
    distinct = np.bincount(pairs // vocabulary, minlength=len(token_ids))
    terms = (pairs % vocabulary).astype(np.int32)
    return terms, counts.astype(np.float32), lengths, distinct


@contextmanager
def _without_cyclic_gc():
    """Building a BM25 index makes millions of small objects (each batch's token lists) and no
    reference cycles, so the cyclic collector's passes over them find nothing. (It took a fifth
    of SciFact's indexing time when every document's token array was kept.)"""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# The keys of a bm25 retriever entry: those that set its scores, bm25s.BM25's arguments; and
# those that determine its index, every key of its type (irflow.core.settings_types.Bm25, in
# the schema's order) but ``type``: its scores' and its terms' (the tokenizer's stemmer and
# stopwords, the fields it reads), the index job's params, so a changed k1 or b rebuilds that
# variant's index and nothing else.
SCORING_SETTINGS = ("method", "k1", "b", "delta")
INDEX_SETTINGS = tuple(key for key in Bm25.model_fields if key != "type")
# Beside bm25s' own files (BM25.save: the score matrix as .npy, vocab.index.json,
# params.index.json): the corpus's doc ids by row, the terms with a posting scoring <= 0, and
# the settings the index was built with, checked against the searching job's.
DOC_IDS_FILE, ZERO_SCORING_FILE, SETTINGS_FILE = (
    "doc_ids.parquet",
    "zero_scoring_terms.npy",
    "irflow.index.json",
)


def index_footprint(folder: Path) -> dict:
    """What a search of the saved index holds: its ``documents``, the bytes of its score matrix
    (``matrix_bytes``, mapped) and of its vocabulary file (``vocabulary_bytes``, read whole)."""
    folder = Path(folder)
    record = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
    matrix = ("data.csc.index.npy", "indices.csc.index.npy")  # bm25s.BM25.save's names
    return {
        "documents": record["documents"],
        "matrix_bytes": sum((folder / name).stat().st_size for name in matrix),
        "vocabulary_bytes": (folder / "vocab.index.json").stat().st_size,
    }


def index_settings(entry: dict) -> dict:
    """The part of a bm25 retriever entry its index depends on, as the config writes it: the
    index job's params and what its index records (irflow.index.json)."""
    return {key: entry[key] for key in INDEX_SETTINGS}


def bm25_model(spec: Bm25):
    """bm25s' BM25, empty, with the scoring of a bm25 retriever entry ``spec``: the one place
    irflow builds one (the index job here, positionalize's near-misses)."""
    import bm25s

    return bm25s.BM25(**spec.model_dump(include=set(SCORING_SETTINGS)))


def stemmer_of(spec: Bm25):
    """The stemmer of a bm25 retriever entry (PyStemmer's, by its ``stemmer`` language), or
    None where it names none."""
    if not spec.stemmer:
        return None
    import Stemmer

    return Stemmer.Stemmer(spec.stemmer)


class BM25Retriever:
    """bm25s over a corpus table, with the variant fully set by ``entry`` (a bm25 retriever
    entry, or its ``index_settings``: the index job's params, without its ``type``), typed once
    here as ``spec`` (irflow.core.settings_types.Bm25): built from the corpus (``index``) and
    saved (``save``), or loaded memory-mapped from a saved index (``load``)."""

    def __init__(self, entry: dict):
        from bm25s.tokenization import Tokenizer

        self.entry, self.spec = entry, Bm25.model_validate({"type": "bm25"} | dict(entry))
        # bm25s.tokenize's splitting, lowercasing, stopwords and stemming, with one vocabulary
        # kept across batches and then used for the queries. allow_empty=False: an empty
        # document has no tokens, as with bm25s.tokenize, rather than an "" token.
        self.tokenizer = Tokenizer(
            splitter=BM25S_WORDS, stopwords=self.spec.stopwords, stemmer=stemmer_of(self.spec)
        )

    def _token_ids(self, texts: list[str], update_vocab: bool) -> list[list[int]]:
        return self.tokenizer.tokenize(
            texts, update_vocab=update_vocab, show_progress=False, allow_empty=False
        )

    @_without_cyclic_gc()
    def index(self, corpus_path: Path):
        """bm25s' index of the corpus, bit for bit, built in two streamed passes so that memory
        holds the score matrix and one batch, never every document's tokens.

        Pass one tokenises the corpus batch by batch and writes each document's postings (its
        distinct terms and their counts) to two temporary files (``tempfile``'s folder:
        ``TMPDIR``, 8 bytes a posting). Pass two reads them back in document order, scores
        each batch with bm25s' own idf and term-frequency functions, and places the scores
        into bm25s' sparse matrix (CSC: a column per term, documents ascending in it) by a
        counting sort over the document frequencies, so the matrix is the only full-size array.
        """
        self.model = bm25_model(self.spec)
        with tempfile.TemporaryFile() as terms, tempfile.TemporaryFile() as counts:
            lengths, distinct, frequencies = self._write_postings(corpus_path, terms, counts)
            terms.seek(0)
            counts.seek(0)
            self._score_postings(terms, counts, lengths, distinct, frequencies)
        self.model.vocab_dict = self.tokenizer.get_vocab_dict()
        # One Arrow array: ids become strings only for the rows a run keeps.
        doc_ids = contracts.read_table(corpus_path, columns=["doc_id"]).column("doc_id")
        self.doc_ids = doc_ids.combine_chunks()
        return self

    def _write_postings(self, corpus_path: Path, terms, counts) -> tuple:
        """Pass one: each document's postings, in corpus order, to the files ``terms`` (int32
        term ids) and ``counts`` (float32, bm25s' type for term frequencies). Returns each
        document's length in tokens and number of distinct terms, and each term's document
        frequency."""
        columns = ["title", "text"] if self.spec.fields == "title+text" else ["text"]
        lengths, distinct, frequencies = [], [], np.zeros(0, dtype=np.int64)
        documents = contracts.read_metadata(corpus_path).num_rows
        batches = contracts.stream_batches(corpus_path, BM25_BATCH_ROWS, columns)
        with LoggedProgress(desc="bm25 tokenise", total=documents, unit="documents") as progress:
            for batch in batches:
                texts = batch.column("text").to_pylist()
                if self.spec.fields == "title+text":
                    texts = contracts.document_texts(batch.column("title").to_pylist(), texts)
                token_ids = self._token_ids(texts, update_vocab=True)
                vocabulary = len(self.tokenizer.get_vocab_dict())
                batch_terms, batch_counts, batch_lengths, batch_distinct = _document_postings(
                    token_ids, vocabulary
                )
                batch_terms.tofile(terms)
                batch_counts.tofile(counts)
                lengths.append(batch_lengths)
                distinct.append(batch_distinct)
                grown = np.bincount(batch_terms, minlength=vocabulary)
                grown[: len(frequencies)] += frequencies
                frequencies = grown
                progress.update(batch.num_rows)
        vocabulary = len(self.tokenizer.get_vocab_dict())
        frequencies = np.pad(frequencies, (0, vocabulary - len(frequencies)))
        empty = np.zeros(0, dtype=np.int64)
        return np.concatenate([empty, *lengths]), np.concatenate([empty, *distinct]), frequencies

    def _score_postings(self, terms, counts, lengths, distinct, frequencies) -> None:
        """Pass two: bm25s' ``build_index_from_ids`` from the postings files, into
        ``self.model``'s score matrix (and ``nonoccurrence_array`` for bm25l, bm25+)."""
        from bm25s import scoring

        model = self.model
        documents = len(lengths)
        average_length = lengths.mean()  # as bm25s: the mean of an int64 array of lengths
        by_term = dict(enumerate(frequencies.tolist()))
        idf_of = scoring._select_idf_scorer(model.idf_method)
        term_frequency_part = scoring._select_tfc_scorer(model.method)
        idf = scoring._build_idf_array(by_term, documents, idf_of, dtype=model.dtype)
        model.nonoccurrence_array = None
        if model.method in model.methods_requiring_nonoccurrence:
            model.nonoccurrence_array = scoring._build_nonoccurrence_array(
                by_term, documents, idf_of, term_frequency_part, average_length,
                average_length, model.k1, model.b, model.delta, dtype=model.dtype,
            )  # fmt: skip
        indptr = np.zeros(len(frequencies) + 1, dtype=np.int64)
        np.cumsum(frequencies, out=indptr[1:])
        data = np.empty(indptr[-1], dtype=model.dtype)
        indices = np.empty(indptr[-1], dtype=model.int_dtype)
        next_free = indptr[:-1].copy()
        # A term with a posting that scores 0 or less: robertson's idf 0, atire's for a term in
        # every document. Without such terms in a query, and with no score for absent terms
        # (bm25l, bm25+ have one), a document matches exactly when it scores above 0.
        self.zero_scoring_terms = np.zeros(len(frequencies), dtype=bool)
        with LoggedProgress(desc="bm25 score", total=documents, unit="documents") as progress:
            for first in range(0, documents, BM25_BATCH_ROWS):
                rows = slice(first, first + BM25_BATCH_ROWS)
                size = int(distinct[rows].sum())
                batch_terms = np.fromfile(terms, dtype=np.int32, count=size)
                tf = np.fromfile(counts, dtype=np.float32, count=size)
                # bm25s scores a document's postings with its length as a Python int and the
                # average as a NumPy float64: the same float64 operations as on these arrays.
                scores = idf[batch_terms] * term_frequency_part(
                    tf_array=tf,
                    l_d=np.repeat(lengths[rows], distinct[rows]),
                    l_avg=average_length,
                    k1=model.k1,
                    b=model.b,
                    delta=model.delta,
                )
                if model.nonoccurrence_array is not None:
                    scores -= model.nonoccurrence_array[batch_terms]
                scores = scores.astype(model.dtype)
                self.zero_scoring_terms[batch_terms[scores <= 0]] = True
                # Counting sort: each posting goes to its term's next free place; a stable sort by
                # term keeps this batch's documents ascending within each term.
                order = np.argsort(batch_terms, kind="stable")
                in_batch, first_place, postings = np.unique(
                    batch_terms[order], return_index=True, return_counts=True
                )
                places = np.repeat(next_free[in_batch] - first_place, postings) + np.arange(size)
                next_free[in_batch] += postings
                data[places] = scores[order]
                batch_documents = np.arange(first, first + len(lengths[rows]), dtype=indices.dtype)
                indices[places] = np.repeat(batch_documents, distinct[rows])[order]
                progress.update(len(batch_documents))
        model.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": documents}

    def save(self, folder: Path) -> int:
        """Write the index to ``folder`` (whole, or not at all) and return its size in bytes."""
        with atomic_path(folder) as tmp:
            self.model.save(tmp, show_progress=False)
            np.save(tmp / ZERO_SCORING_FILE, self.zero_scoring_terms)
            contracts.write_file(pa.table({"doc_id": self.doc_ids}), tmp / DOC_IDS_FILE)
            record = {"settings": index_settings(self.entry), "documents": len(self.doc_ids)}
            (tmp / SETTINGS_FILE).write_text(json.dumps(record, indent=2) + "\n")
            return sum(file.stat().st_size for file in tmp.iterdir())

    @classmethod
    def load(cls, folder: Path, entry: dict) -> BM25Retriever:
        """The index ``save`` wrote, its score matrix memory-mapped (``bm25s.BM25.load(mmap=
        True)``). Refused when it was built with other settings than ``entry``'s.

        The queries are tokenised with the index's vocabulary (vocab.index.json, the tokenizer's
        ``get_vocab_dict()``: its stems with a stemmer, else its words) and nothing else: with a
        stemmer, the tokenizer's word-to-id and word-to-stem maps are caches of it (a word's id
        is its stem's), so a query word maps to the same id as in the job that built it."""
        import bm25s

        folder = Path(folder)
        record = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
        if record["settings"] != index_settings(entry):
            raise ValueError(
                f"{folder}: BM25 index built with {record['settings']}, searched with "
                f"{index_settings(entry)}: rebuild it (its index_bm25 job)"
            )
        retriever = cls(entry)
        retriever.model = bm25s.BM25.load(folder, mmap=True)
        vocabulary = retriever.model.vocab_dict
        if retriever.spec.stemmer:
            retriever.tokenizer.stem_to_sid = vocabulary
        else:
            retriever.tokenizer.word_to_id = vocabulary
        retriever.zero_scoring_terms = np.load(folder / ZERO_SCORING_FILE)
        doc_ids = contracts.read_table(folder / DOC_IDS_FILE).column("doc_id")
        retriever.doc_ids = doc_ids.combine_chunks()
        return retriever

    def search(self, query_texts: list[str], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query, (rows, scores) of the documents that share a term with it: the ``depth``
        best by score, and any tied with the last of them; rows index the corpus table."""
        token_ids = self._token_ids(query_texts, update_vocab=False)
        # The one-query searches that time a query's latency log nothing (``disable``).
        with LoggedProgress(
            token_ids,
            desc="bm25 search",
            total=len(token_ids),
            unit="queries",
            disable=len(token_ids) == 1,
        ) as queries:
            return [self._top_matching(query, depth) for query in queries]

    def score_pairs(
        self, query_texts: dict[str, str], pairs: list[tuple[str, str]]
    ) -> dict[tuple[str, str], float]:
        """The score of each (query id, doc id) pair, ``query_texts`` giving the queries:
        bm25s' own scoring of every document for the query's tokens, as its search ranks
        them."""
        wanted = pa.array(sorted({doc_id for _, doc_id in pairs}), pa.string())
        rows = dict(zip(wanted.to_pylist(), pc.index_in(wanted, self.doc_ids).to_pylist()))
        by_query: dict[str, list[str]] = {}
        for query_id, doc_id in pairs:
            by_query.setdefault(query_id, []).append(doc_id)
        scores = {}
        for query_id, doc_ids in by_query.items():
            tokens = self.tokenizer.tokenize(
                [query_texts[query_id]], update_vocab=False, show_progress=False, allow_empty=False
            )[0]
            row_scores = self.model.get_scores_from_ids(tokens)
            scores |= {(query_id, d): float(row_scores[rows[d]]) for d in doc_ids}
        return scores

    def _top_matching(self, token_ids: list[int], depth: int) -> tuple[np.ndarray, np.ndarray]:
        scores, posting_docs = self._scores(token_ids)
        terms = np.unique(np.asarray(token_ids, dtype=np.int64))
        if self.model.nonoccurrence_array is None and not self.zero_scoring_terms[terms].any():
            rows = np.flatnonzero(scores > 0)
        else:
            matched = np.zeros(len(scores), dtype=bool)
            matched[posting_docs] = True
            rows = np.flatnonzero(matched)
        return top_with_ties(rows, scores[rows], depth)

    def _scores(self, token_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """bm25s' ``get_scores_from_ids``, bit for bit, and the documents of the postings read
        (bm25s' score matrix, CSC with one column per term, has an entry for each document
        holding the term). bm25s adds each token's postings in turn with ``np.add.at``; one
        ``np.add.at`` over all of them, in token order, adds in the same order in float32
        with one call."""
        matrix = self.model.scores
        tokens = np.asarray(token_ids, dtype=np.int64)
        indptr, indices, data = matrix["indptr"], matrix["indices"], matrix["data"]
        # Each token's postings are one contiguous slice: copying slices beats gathering
        # postings one index at a time.
        spans = [
            slice(start, end)
            for start, end in zip(indptr[tokens].tolist(), indptr[tokens + 1].tolist())
        ]
        posting_docs = np.concatenate([indices[span] for span in spans] or [indices[:0]])
        scores = np.zeros(matrix["num_docs"], dtype=self.model.dtype)
        np.add.at(
            scores, posting_docs, np.concatenate([data[span] for span in spans] or [data[:0]])
        )
        if self.model.nonoccurrence_array is not None:  # bm25l, bm25+: absent terms score too
            scores += self.model.nonoccurrence_array[tokens].sum()
        return scores, posting_docs


def build_index(corpus_path: Path, entry: dict, folder: Path) -> dict:
    """Index the corpus with the variant ``entry`` (a bm25 retriever entry, or its
    ``index_settings``: the index job's params) into ``folder``; the build's facts."""
    started = time.perf_counter()
    retriever = BM25Retriever(entry).index(corpus_path)
    index_bytes = retriever.save(folder)
    return {
        "index_seconds": time.perf_counter() - started,
        "index_bytes": index_bytes,
        "documents": len(retriever.doc_ids),
        "terms": len(retriever.zero_scoring_terms),
        "postings": len(retriever.model.scores["data"]),
    }
