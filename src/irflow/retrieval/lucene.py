"""lucene: BM25 in Lucene, as Anserini runs it for Pyserini's BEIR regressions and as BEIR ran it.

BEIR: "We use Anserini with the default Lucene parameters (k=0.9 and b=0.4). We index the title
(if available) and passage as separate fields" (../shared/references/beir.txt, line 104).
Pyserini's two BEIR conditions are the two ``fields`` layouts here:

- ``flat``: one ``contents`` field holding the title and the text (Anserini's
  ``BeirFlatCollection``; searched on ``contents``);
- ``multifield``: the text as ``contents`` and the title as its own field (Anserini's
  ``BeirMultifieldCollection`` indexed with ``-fields title``; searched with
  ``-fields contents=1.0 title=1.0``, the query scored against both fields together).

The Anserini 0.22.1 fat jar that Pyserini's wheel ships (``pip install 'irflow[lucene]'``) does
the work, on Java 11 or newer. The index job runs Anserini's own command line
(``io.anserini.index.IndexCollection``) on the filtered corpus written as BEIR's corpus.jsonl
(``_id``, ``title``, ``text``), which Anserini's BEIR collections read as Pyserini's regressions
read BEIR's own files; it indexes once per dataset and layout, with positions and document
vectors stored, so that BM25's k1 and b and the pseudo-relevance feedback (RM3, Rocchio), all
search-time settings, never rebuild it. A search job runs Anserini's ``SimpleSearcher`` (what
Pyserini's ``LuceneSearcher`` wraps) in its own JVM through pyjnius, in batches as Pyserini's
``--batch`` does, so that one query's latency is Lucene's and not a JVM's start. Its scores are
Anserini's (ties adjusted by Anserini, as in Pyserini's runs), which irflow orders and cuts as
trec_eval does (irflow.retrieval.runs); self-matches are removed by irflow, as Pyserini's
``--remove-query`` removes them.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from irflow.core import contracts
from irflow.core.atomic import atomic_path
from irflow.core.errors import UserError
from irflow.core.settings_types import Lucene

# The layouts of the corpus in the index, each as Anserini's collection class indexes it and
# the fields (with weights) its searches score.
COLLECTIONS = {"flat": "BeirFlatCollection", "multifield": "BeirMultifieldCollection"}
INDEX_FIELDS = {"flat": [], "multifield": ["-fields", "title"]}
SEARCH_WEIGHTS = {"contents": 1.0, "title": 1.0}
# Beside Lucene's files: the corpus's doc ids by row, and the layout the index was built with.
DOC_IDS_FILE, SETTINGS_FILE = "doc_ids.parquet", "irflow.index.json"
LUCENE_FOLDER = "lucene"
BATCH_ROWS = 8192
JAVA_MISSING = (
    "the lucene retriever runs Anserini, which needs Java 11 or newer, and no `java` is on "
    "PATH: install a Java runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; "
    "conda: conda install -c conda-forge openjdk=17)"
)
JAR_MISSING = (
    "the lucene retriever runs the Anserini jar that Pyserini's wheel ships, and pyserini is "
    "not installed: pip install 'irflow[lucene]'"
)


class AnseriniError(UserError, RuntimeError):
    """Anserini failed: the message gives its command and the end of its output."""


def java() -> str:
    """The ``java`` on PATH; UserError naming what to install where there is none."""
    found = shutil.which("java")
    if found is None:
        raise UserError(JAVA_MISSING)
    return found


def anserini_jar() -> Path:
    """Anserini's fat jar, as Pyserini's wheel ships it (pyserini/resources/jars/). Found
    without importing pyserini, whose package sets up a JVM of its own."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(JAR_MISSING)
    folder = Path(spec.submodule_search_locations[0]) / "resources" / "jars"
    jars = sorted(folder.glob("anserini-*-fatjar.jar"))
    if not jars:
        raise UserError(f"{folder}: no anserini-*-fatjar.jar; reinstall: {JAR_MISSING}")
    return jars[-1]


def run_anserini(main_class: str, arguments: list[str]) -> str:
    """Run one Anserini program; its output (stdout and stderr). A non-zero exit, or an
    exception in one of its threads (which Anserini logs and exits 0 after), is an
    AnseriniError."""
    command = [java(), "-cp", str(anserini_jar()), main_class, *arguments]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    if done.returncode != 0 or "Exception in thread" in output:
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise AnseriniError(f"{' '.join(command)} failed (exit {done.returncode}):\n{tail}")
    return output


def write_beir_corpus(corpus_path: Path, folder: Path) -> int:
    """The corpus table as BEIR's corpus.jsonl (``_id``, ``title``, ``text``; a missing title
    as ""), the file Anserini's BEIR collections read; returns the number of documents."""
    documents = 0
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for batch in contracts.stream_batches(corpus_path, BATCH_ROWS, ["doc_id", "title", "text"]):
            columns = batch.to_pydict()
            for doc_id, title, text in zip(columns["doc_id"], columns["title"], columns["text"]):
                record = {"_id": doc_id, "title": title or "", "text": text}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
            documents += batch.num_rows
    return documents


def build_index(corpus_path: Path, fields: str, folder: Path, threads: int) -> dict:
    """Index the corpus in layout ``fields`` (flat, multifield) into ``folder``, whole or not
    at all; the build's facts."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch, atomic_path(folder) as tmp:
        documents = write_beir_corpus(corpus_path, Path(scratch))
        arguments = [
            "-collection", COLLECTIONS[fields], "-input", scratch,
            "-index", str(tmp / LUCENE_FOLDER),
            "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
            "-storePositions", "-storeDocvectors", *INDEX_FIELDS[fields],
        ]  # fmt: skip
        run_anserini("io.anserini.index.IndexCollection", arguments)
        doc_ids = contracts.read_table(corpus_path, columns=["doc_id"])
        contracts.write_file(doc_ids, tmp / DOC_IDS_FILE)
        record = {"fields": fields, "documents": documents, "anserini": anserini_jar().name}
        (tmp / SETTINGS_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        index_bytes = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
    return {
        "index_seconds": time.perf_counter() - started,
        "index_bytes": index_bytes,
        "documents": documents,
        "anserini": anserini_jar().name,
    }


def simple_searcher_class():
    """Anserini's ``io.anserini.search.SimpleSearcher`` (the searcher Pyserini's
    ``LuceneSearcher`` wraps), through pyjnius in this process's JVM, started once with the
    jar on its classpath."""
    java()
    import jnius_config

    if not jnius_config.vm_running:
        jnius_config.add_classpath(str(anserini_jar()))
    from jnius import autoclass

    return autoclass("io.anserini.search.SimpleSearcher")


def configure(searcher, spec: Lucene) -> None:
    """Set BM25's k1 and b and RM3 or Rocchio feedback on a SimpleSearcher, as Pyserini's
    ``LuceneSearcher.set_bm25``, ``set_rm3`` and ``set_rocchio`` do (no collection class: the
    feedback reads the index's stored document vectors; RM3 filters its terms, Rocchio uses no
    negative feedback)."""
    searcher.set_bm25(spec.k1, spec.b)
    if spec.feedback == "rm3":
        weight = spec.original_query_weight
        searcher.set_rm3(None, spec.fb_terms, spec.fb_docs, weight, False, True)
    elif spec.feedback == "rocchio":
        terms, docs = spec.fb_terms, spec.fb_docs
        searcher.set_rocchio(
            None, terms, docs, terms, docs, spec.alpha, spec.beta, 0.0, False, False
        )


class LuceneRetriever:
    """Anserini's searches of a saved index with the settings of a lucene retriever entry
    (``spec``), in one JVM: ``search(texts, depth)`` gives per query the rows of ``doc_ids``
    (the corpus's) it found and their scores, as irflow.retrieval.retrieve.TextSearcher asks.
    A multifield index is searched on ``contents`` and ``title`` at weights 1.0 and 1.0 (the
    ``-fields contents=1.0 title=1.0`` of Pyserini's regression). The entry is typed once,
    here (irflow.core.settings_types.Lucene)."""

    def __init__(self, folder: Path, entry: dict, threads: int = 1):
        folder = Path(folder)
        spec = Lucene.model_validate(entry)
        record = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
        if record["fields"] != spec.fields:
            raise ValueError(
                f"{folder}: Lucene index of layout {record['fields']!r}, searched as "
                f"{spec.fields!r}: rebuild it (its index_lucene job)"
            )
        self.spec, self.threads = spec, threads
        ids = contracts.read_table(folder / DOC_IDS_FILE).column("doc_id")
        self.doc_ids = ids.combine_chunks()
        self.searcher = simple_searcher_class()(str(folder / LUCENE_FOLDER))
        configure(self.searcher, spec)
        self.fields = None
        if spec.fields == "multifield":
            from jnius import autoclass

            self.fields = autoclass("java.util.HashMap")()
            for name, weight in SEARCH_WEIGHTS.items():
                self.fields.put(name, autoclass("java.lang.Float")(weight))

    def search(self, query_texts: list[str], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query, (rows, scores) of Anserini's ``depth`` best documents, searched in one
        batch on ``threads`` threads; a query with no terms gets no hits."""
        from jnius import autoclass

        array_list = autoclass("java.util.ArrayList")
        texts, keys = array_list(), array_list()
        for at, text in enumerate(query_texts):
            texts.add(text)
            keys.add(str(at))
        if self.fields is None:
            found = self.searcher.batch_search(texts, keys, depth, self.threads)
        else:
            found = self.searcher.batch_search_fields(texts, keys, depth, self.threads, self.fields)
        hits = []
        for at in range(len(query_texts)):
            results = found.get(str(at)) or []
            doc_ids = pa.array([result.docid for result in results], pa.string())
            rows = pc.index_in(doc_ids, self.doc_ids).to_numpy(zero_copy_only=False)
            scores = np.array([result.score for result in results], dtype=np.float64)
            hits.append((rows.astype(np.int64), scores))
        return hits
