"""consistency: Arctic-Embed's query-document consistency filter, on word vectors.

"For consistency filtering, we apply a low-fidelity, high-throughput pair-similarity consistency
filter — sentence similarity using a fastText" (arctic-embed.txt, line 49) word2vec model, with
"a low minimum allowed similarity of 0.3" (arctic-embed.txt, line 49), and "we truncate long
sequences to 512 words during this step" (arctic-embed.txt, line 49).

A text's vector is the mean of its words' vectors (the paper speaks of "averaging vectors from
irrelevant words" (arctic-embed.txt, line 49)); the similarity of a pair is the cosine of their
vectors. The paper names fastText's English vectors (fasttext.cc, english-vectors) and no file:
the user names one, in fastText's text format (``.vec``, optionally gzipped: a first line
"<words> <dimension>", then a word and its numbers per line), and only the vectors of the words
the texts use are read. irflow's choices where the paper is silent: words are the whitespace
tokens without the punctuation at their ends (as ``irflow.data.quality`` reads them), looked up
as written, else in lower case; words without a vector are skipped; a text none of whose first
``max_words`` words has a vector has no vector, and its pair's similarity is 0 (it shows no
consistency).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from irflow.core.errors import InputError
from irflow.data.quality import Document


def words(text: str, max_words: int) -> list[str]:
    """The first ``max_words`` words of ``text``, without the punctuation at their ends."""
    return [w for w in Document(text).bare_words[:max_words] if w]


def read_vectors(path: str | Path, wanted: Iterable[str]) -> dict[str, np.ndarray]:
    """The vectors of the ``wanted`` words (and of their lower-case forms) found in the
    fastText text file ``path``; errors name the file and the line."""
    path = Path(path)
    wanted = set(wanted) | {w.lower() for w in wanted}
    opener = gzip.open if path.suffix == ".gz" else open
    vectors: dict[str, np.ndarray] = {}
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
            header = next(lines, "").split()
            if len(header) != 2 or not all(part.isdigit() for part in header):
                raise InputError(path, "the first line must be '<words> <dimension>'", line=1)
            dimension = int(header[1])
            for number, line in enumerate(lines, start=2):
                word, _, numbers = line.rstrip("\n").partition(" ")
                if word not in wanted:
                    continue
                values = numbers.split()
                if len(values) != dimension:
                    raise InputError(
                        path,
                        f"{len(values)} numbers for {word!r}; expected {dimension}",
                        line=number,
                    )
                try:
                    vectors[word] = np.asarray(values, dtype=np.float32)
                except ValueError:
                    raise InputError(
                        path, f"a value of {word!r} is not a number", line=number
                    ) from None
    except FileNotFoundError:
        raise InputError(path, "the word vectors file does not exist") from None
    return vectors


def text_vector(tokens: list[str], vectors: dict[str, np.ndarray]) -> np.ndarray | None:
    found = [vectors.get(w, vectors.get(w.lower())) for w in tokens]
    found = [v for v in found if v is not None]
    return np.mean(found, axis=0) if found else None


def similarities(
    pairs: list[tuple[str, str]], vectors_path: str | Path, max_words: int = 512
) -> list[float]:
    """The cosine similarity of each (query text, document text) pair's mean word vectors,
    each text cut to its first ``max_words`` words; 0 where a text has no known word."""
    tokens = [(words(q, max_words), words(d, max_words)) for q, d in pairs]
    vectors = read_vectors(vectors_path, {w for pair in tokens for text in pair for w in text})
    scores = []
    for query_words, document_words in tokens:
        a, b = text_vector(query_words, vectors), text_vector(document_words, vectors)
        norms = 0.0 if a is None or b is None else float(np.linalg.norm(a) * np.linalg.norm(b))
        scores.append(float(a @ b) / norms if norms > 0 else 0.0)
    return scores
