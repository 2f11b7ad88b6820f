"""Quality filters for curating a corpus, after Arctic-Embed (App. C) and Gopher.

Each filter is a small function that measures one property of a document and returns the
measured value; a ``Check`` compares that value with configured bounds. The filter stage
records every failed check with its name and value in the audit, so a curated corpus can be
explained document by document.

All measures read the document as models read it, ``contracts.document_text`` (title, a
space, text). Words are whitespace-separated tokens (Gopher used a tokenizer; whitespace is
what BEIR's English corpora need and keeps the measure independent of any model). Lines are
the non-empty lines after stripping, so blank lines between paragraphs do not count as short,
bulleted or numeric lines.

Thresholds are Arctic-Embed's (App. C), which take Gopher's (Rae et al. 2021, App. A) where
they overlap. A value passes when ``minimum <= value <= maximum``: Gopher drops a document
only when a ratio *exceeds* its maximum.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache

from irflow.errors import ConfigError

# Gopher's stop words: a document of natural English prose contains some of them.
GOPHER_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
# Characters that open a bulleted line. Gopher names "•" and "-"; the others are the same
# mark in other typefaces.
BULLETS = ("•", "-", "*", "‣", "◦", "▪", "·", "–", "—")
ELLIPSES = ("...", "…")
# A line of numbers: digits with the separators numbers and tables are written with.
NUMERIC_LINE = re.compile(r"[\d\s.,:;%+\-−/()\[\]]*\d[\d\s.,:;%+\-−/()\[\]]*")


@dataclass(frozen=True)
class Document:
    """A document split once into what the measures read."""

    text: str
    words: tuple[str, ...]
    lines: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> Document:
        lines = tuple(line.strip() for line in text.splitlines())
        return cls(text, tuple(text.split()), tuple(line for line in lines if line))

    @cached_property
    def content_words(self) -> list[str]:
        """Words with at least one character that is not punctuation or a symbol (Gopher's
        "non-symbol words"); two filters read them, so they are found once."""
        return [w for w in self.words if not all(_is_symbol(c) for c in w)]


def _is_symbol(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


def _line_fraction(doc: Document, predicate: Callable[[str], bool]) -> float:
    if not doc.lines:
        return 0.0
    return sum(1 for line in doc.lines if predicate(line)) / len(doc.lines)


def word_count(doc: Document) -> float:
    """Words that are not punctuation or symbols alone."""
    return float(len(doc.content_words))


def mean_word_length(doc: Document) -> float:
    """Mean length in characters of the words that are not punctuation alone; 0 for none."""
    words = doc.content_words
    return sum(len(w) for w in words) / len(words) if words else 0.0


def symbols_per_word(doc: Document) -> float:
    """Gopher's symbol-to-word ratio: the larger of hash signs per word and ellipses per word
    (Gopher drops a document when either exceeds the bound)."""
    if not doc.words:
        return 0.0
    hashes = doc.text.count("#")
    ellipses = sum(doc.text.count(mark) for mark in ELLIPSES)
    return max(hashes, ellipses) / len(doc.words)


def ellipsis_line_fraction(doc: Document) -> float:
    return _line_fraction(doc, lambda line: line.endswith(ELLIPSES))


def words_without_letter_fraction(doc: Document) -> float:
    """Words that contain no alphabetic character (Gopher: 80% of words must have one)."""
    if not doc.words:
        return 0.0
    return sum(1 for w in doc.words if not any(c.isalpha() for c in w)) / len(doc.words)


def top_ngram_char_fraction(doc: Document, n: int) -> float:
    """Characters covered by the most frequent word n-gram, counted at every occurrence, over
    the document's characters (Gopher's "top n-gram"; DataTrove's ``find_top_duplicate``).

    An n-gram that occurs once is no repetition and measures 0. DataTrove counts it anyway,
    which never matters for Gopher's documents of 50 words and more but would remove every
    BEIR document of a few words (a title-only entry) for its length alone.
    """
    if len(doc.words) < n or not doc.text:
        return 0.0
    grams = Counter(" ".join(doc.words[i : i + n]) for i in range(len(doc.words) - n + 1))
    gram, count = grams.most_common(1)[0]
    return len(gram) * count / len(doc.text) if count > 1 else 0.0


def duplicated_ngram_char_fraction(doc: Document, n: int) -> float:
    """Characters in word n-grams that repeat an earlier n-gram, over the document's
    characters (Gopher's "duplicate n-grams"; DataTrove's ``find_all_duplicate``: after a
    repeat the scan jumps past it, so overlapping repeats are not counted twice; n-grams are
    joined without spaces, as there)."""
    if not doc.text:
        return 0.0
    words, seen, repeated, i = doc.words, set(), 0, 0
    while i < len(words) - n + 1:
        gram = "".join(words[i : i + n])
        if gram in seen:
            repeated += len(gram)
            i += n
        else:
            seen.add(gram)
            i += 1
    return repeated / len(doc.text)


def stop_word_count(doc: Document, stop_words: frozenset[str]) -> float:
    """Words that are stop words, compared in lower case and without surrounding
    punctuation, so that "The" and "the," count."""
    return float(sum(1 for w in doc.words if w.strip(".,;:!?\"'()[]").lower() in stop_words))


def bullet_line_fraction(doc: Document) -> float:
    return _line_fraction(doc, lambda line: line.startswith(BULLETS))


def short_line_fraction(doc: Document, words: int) -> float:
    """Lines with fewer than ``words`` words."""
    return _line_fraction(doc, lambda line: len(line.split()) < words)


def numeric_line_fraction(doc: Document) -> float:
    """Lines made only of numbers and the separators between them."""
    return _line_fraction(doc, lambda line: NUMERIC_LINE.fullmatch(line) is not None)


@lru_cache(maxsize=1)
def _language_identifier():
    """py3langid's model, shipped inside its wheel: identification works offline."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def known_languages() -> list[str]:
    return list(_language_identifier().nb_classes)


def language_probabilities(text: str) -> list[tuple[str, float]]:
    """Every language py3langid knows with its probability for ``text``, most likely first."""
    return [(lang, float(p)) for lang, p in _language_identifier().rank(text)]


def expected_language_probability(doc: Document, language: str) -> float:
    """The probability py3langid gives ``language`` (an ISO 639-1 code)."""
    return dict(language_probabilities(doc.text))[language]


@dataclass(frozen=True)
class Check:
    """One quality filter: a name, what it measures, and the bounds a document must meet."""

    name: str
    measure: Callable[[Document], float]
    minimum: float | None = None
    maximum: float | None = None

    def reason(self, value: float) -> str | None:
        """Why ``value`` fails the bounds, or None when it passes."""
        if self.minimum is not None and value < self.minimum:
            return f"{self.name} {value:.6g} < {self.minimum:g}"
        if self.maximum is not None and value > self.maximum:
            return f"{self.name} {value:.6g} > {self.maximum:g}"
        return None


# The quality filters' config keys, in the order ``build_checks`` runs them.
FILTERS = (
    "words",
    "mean_word_length",
    "symbols_per_word",
    "ellipsis_lines",
    "words_without_letter",
    "duplicate_ngrams",
    "stop_words",
    "bullet_lines",
    "short_lines",
    "numeric_lines",
    "language",
)
NGRAM_CHECK = re.compile(r"(top|duplicated)_(\d+)gram_chars")


def check_order(name: str) -> tuple:
    """Where the check ``name`` runs among the quality checks: by filter, then top before
    duplicated n-grams, then by n (so that 10-grams come after 5-grams)."""
    if match := NGRAM_CHECK.fullmatch(name):
        kind, n = match.groups()
        return (FILTERS.index("duplicate_ngrams"), kind != "top", int(n))
    if name.startswith("language_"):
        return (FILTERS.index("language"), False, 0)
    return (FILTERS.index(name) if name in FILTERS else len(FILTERS), False, 0)


def build_checks(quality: dict) -> list[Check]:
    """The enabled checks of the ``filter.quality`` config block, in a fixed order."""

    def on(name: str) -> dict | None:
        spec = quality.get(name) or {}
        return spec if spec.get("enabled") else None

    checks: list[Check] = []
    if spec := on("words"):
        checks.append(Check("words", word_count, spec["min"], spec["max"]))
    if spec := on("mean_word_length"):
        checks.append(Check("mean_word_length", mean_word_length, spec["min"], spec["max"]))
    if spec := on("symbols_per_word"):
        checks.append(Check("symbols_per_word", symbols_per_word, maximum=spec["max"]))
    if spec := on("ellipsis_lines"):
        checks.append(Check("ellipsis_lines", ellipsis_line_fraction, maximum=spec["max"]))
    if spec := on("words_without_letter"):
        checks.append(
            Check("words_without_letter", words_without_letter_fraction, maximum=spec["max"])
        )
    if spec := on("duplicate_ngrams"):
        for kind, measure in (
            ("top", top_ngram_char_fraction),
            ("duplicated", duplicated_ngram_char_fraction),
        ):
            for bound in spec[kind]:
                n = bound["n"]
                checks.append(
                    Check(
                        f"{kind}_{n}gram_chars",
                        lambda doc, n=n, measure=measure: measure(doc, n),
                        maximum=bound["max"],
                    )
                )
    if spec := on("stop_words"):
        words = frozenset(w.lower() for w in spec["words"])
        checks.append(
            Check("stop_words", lambda doc: stop_word_count(doc, words), minimum=spec["min"])
        )
    if spec := on("bullet_lines"):
        checks.append(Check("bullet_lines", bullet_line_fraction, maximum=spec["max"]))
    if spec := on("short_lines"):
        short = spec["words"]
        checks.append(
            Check("short_lines", lambda doc: short_line_fraction(doc, short), maximum=spec["max"])
        )
    if spec := on("numeric_lines"):
        checks.append(Check("numeric_lines", numeric_line_fraction, maximum=spec["max"]))
    if spec := on("language"):
        expected = spec["expected"]
        if expected not in known_languages():
            raise ConfigError(
                f"config key 'filter.quality.language.expected': {expected!r} is not a language "
                f"py3langid identifies; known: {', '.join(sorted(known_languages()))}"
            )
        checks.append(
            Check(
                f"language_{expected}",
                lambda doc: expected_language_probability(doc, expected),
                minimum=spec["min_probability"],
            )
        )
    return checks


def failed_checks(text: str, checks: list[Check]) -> list[tuple[str, float, str]]:
    """(filter name, measured value, reason) for every check ``text`` fails."""
    if not checks:
        return []
    doc = Document.of(text)
    failures = []
    for check in checks:
        value = check.measure(doc)
        if (reason := check.reason(value)) is not None:
            failures.append((check.name, value, reason))
    return failures
