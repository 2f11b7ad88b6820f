"""Arctic-Embed's query-document consistency filter (arctic-embed.txt, line 49) on a tiny word
vectors file of the test's own, in fastText's text format."""

from __future__ import annotations

import gzip

import numpy as np
import pyarrow as pa
import pytest
from conftest import SCHEMA, minimal_config

from irflow.core import contracts
from irflow.core.errors import InputError
from irflow.core.settings_types import Consistency
from irflow.data.consistency import read_vectors, similarities, words
from irflow.derived.negatives import consistent
from irflow.workflow.config import validate_config

# Three directions: cells/divide/growth point one way, tax/income another, "the" a third.
VECTORS = {
    "cells": [1.0, 0.0, 0.0],
    "divide": [0.9, 0.1, 0.0],
    "growth": [0.8, 0.2, 0.0],
    "tax": [0.0, 1.0, 0.0],
    "income": [0.1, 0.9, 0.0],
    "the": [0.0, 0.0, 1.0],
}


def vec_file(path, vectors=VECTORS, header=None) -> str:
    rows = [header or f"{len(vectors)} 3"]
    rows += [f"{word} {' '.join(str(x) for x in v)}" for word, v in vectors.items()]
    text = "\n".join(rows) + "\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def cosine(a, b) -> float:
    a, b = np.mean(a, axis=0), np.mean(b, axis=0)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_pairs_are_scored_by_the_cosine_of_their_mean_word_vectors(tmp_path):
    path = vec_file(tmp_path / "tiny.vec")
    pairs = [
        ("Why do cells divide?", "Growth of the cells."),
        ("income tax", "Cells divide."),
        ("unknown words only", "cells"),
    ]
    got = similarities(pairs, path)
    v = {w: np.array(x) for w, x in VECTORS.items()}
    assert got[0] == pytest.approx(
        cosine([v["cells"], v["divide"]], [v["growth"], v["the"], v["cells"]]), rel=1e-6
    )
    assert got[1] == pytest.approx(cosine([v["income"], v["tax"]], [v["cells"], v["divide"]]))
    assert got[1] < 0.3 < got[0]  # Arctic's "low minimum allowed similarity of 0.3"
    assert got[2] == 0.0  # a text without a known word shows no consistency
    # Gzipped files read the same.
    assert similarities(pairs, vec_file(tmp_path / "tiny.vec.gz")) == pytest.approx(got)


def test_texts_are_cut_to_their_first_max_words_words(tmp_path):
    path = vec_file(tmp_path / "tiny.vec")
    document = "tax income " * 300 + "cells divide"  # the cells come after word 512
    assert words(document, 512)[-1] == "income" and len(words(document, 512)) == 512
    (cut,) = similarities([("cells divide", document)], path)
    (whole,) = similarities([("cells divide", document)], path, max_words=10_000)
    (first,) = similarities([("cells divide", "tax income " * 256)], path)
    assert cut == pytest.approx(first) and whole > cut


def test_only_the_words_asked_for_are_read_and_bad_lines_are_named(tmp_path):
    path = vec_file(tmp_path / "tiny.vec")
    assert set(read_vectors(path, {"Cells", "tax"})) == {"cells", "tax"}
    bad = tmp_path / "bad.vec"
    bad.write_text("2 3\ncells 1 0 0\ntax 1 0\n")
    with pytest.raises(InputError, match=r"bad\.vec.*line 3.*2 numbers for 'tax'; expected 3"):
        read_vectors(bad, {"tax"})
    with pytest.raises(InputError, match=r"line 1.*'<words> <dimension>'"):
        read_vectors(vec_file(tmp_path / "h.vec", header="cells 1 0 0"), {"cells"})
    with pytest.raises(InputError, match="does not exist"):
        read_vectors(tmp_path / "missing.vec", {"cells"})


def test_negatives_leave_out_inconsistent_training_pairs(tmp_path):
    """(Before: no consistency filter; every mined triple was written.)"""
    rows = [
        {"query": "Why do cells divide?", "positive": "Growth of cells."},
        {"query": "income tax", "positive": "Cells divide."},
    ]
    table = pa.Table.from_pylist(
        [
            row
            | {
                "query_id": f"q{i}",
                "positive_id": f"d{i}",
                "positive_score": 1.0,
                "positive_rank": 1,
                "negative_ids": ["n"],
                "negatives": ["the"],
                "negative_scores": [0.5],
                "negative_ranks": [2],
            }
            for i, row in enumerate(rows)
        ],
        contracts.NEGATIVES,
    )
    spec = Consistency(vectors=vec_file(tmp_path / "tiny.vec"), min_similarity=0.3)
    kept, dropped = consistent(table, spec)
    assert kept.column("query_id").to_pylist() == ["q0"] and dropped == 1
    assert consistent(table, None) == (table, 0)
    # The schema: off by default, Arctic's 0.3 and 512 words when a vectors file is named.
    base = minimal_config()
    config = validate_config(
        base | {"negatives": {"n": {"dataset": "d", "system": "bm25"}}}, SCHEMA
    )
    assert config["negatives"]["n"]["consistency"] is None
    spec = {"dataset": "d", "system": "bm25", "consistency": {"vectors": "v.vec"}}
    config = validate_config(base | {"negatives": {"n": spec}}, SCHEMA)
    assert config["negatives"]["n"]["consistency"] == {
        "vectors": "v.vec",
        "min_similarity": 0.3,
        "max_words": 512,
    }
