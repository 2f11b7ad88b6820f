"""Quality filters for curating a corpus, after Arctic-Embed (App. C) and Gopher.

Each filter is a small function that measures one property of a document and returns the
measured value (None: not measured, so it passes); a ``Check`` compares that value with
configured bounds. The filter stage records every failed check with its name and value in the
audit, so a curated corpus can be explained document by document.

All measures read the document as models read it, ``contracts.document_text`` (title, a
space, text). Words are whitespace-separated tokens (Gopher used a tokenizer; whitespace is
what BEIR's English corpora need and keeps the measure independent of any model), compared
and measured without the punctuation and symbols at their ends (Unicode categories P and S, so
that “The” is a stop word). Lines are the non-empty lines after stripping, so blank lines
between paragraphs do not count as short, bulleted or numeric lines.

Filters that assume spaces between words: words, mean_word_length, symbols_per_word,
words_without_letter, duplicate_ngrams, stop_words and short_lines. A text in a script written
without spaces (Chinese, Japanese, Thai) is one long "word" to them; switch them off for such
corpora. The line filters, the ellipsis filter and language identification do not assume
spaces.

Filters and thresholds are Arctic-Embed's (App. C, arctic-embed.txt, lines 199-241), which
take Gopher's (Rae et al. 2021, App. A) where they overlap; where Arctic gives no bound (the
n-gram fractions, language), the bound is Gopher's or, where Gopher has none, irflow's, and the
docs say which. Where the two papers define a filter differently, both are named variants and
Arctic's is the default:
- symbols per word (``symbols_per_word.count``): Arctic counts "symbols or special characters"
  (``special_characters_per_word``); Gopher "a symbol-to-word ratio greater than 0.1 for either
  the hash symbol or the ellipsis" (``hash_or_ellipsis_per_word``);
- stop words (``stop_words.rule``): Arctic's example stop words are "“the”, “and”, “is”" (read
  as: at least one of Gopher's eight words or "is"); Gopher drops a document that does "not
  contain at least two of the following English words: the, be, to, of, and, that, have,
  with";
- repetition (``duplicate_ngrams.rule``): Arctic's duplicate n-grams for n = 2..10, Gopher's
  top n-grams for 2..4 and duplicate n-grams for 5..10 (``NGRAM_RULES``);
- numeric lines (``numeric_lines.definition``): Arctic's "only numeric characters"
  (``is_numeric_line``), or numbers with their separators (``has_number_with_separators``);
- language (``language.identifier``): fastText's classifier (Arctic) or py3langid
  (``irflow.data.language``).
Where Arctic keeps a fraction "below" a bound (symbols, ellipsis lines, words without a letter,
bullet, short, numeric and uppercase lines) the bound is strict by default
(``below: strict``; ``inclusive`` lets a value equal to it pass); word counts and word
lengths are ranges that include their ends, and Gopher's n-gram bounds drop a document only
when a fraction *exceeds* them.

Arctic-Embed's filters irflow does not implement: perplexity (it needs a KenLM model trained
on a reference corpus) and the domain blocklist (BEIR documents carry no URL). Its consistency
filter scores (query, document) pairs, not documents: ``irflow.data.consistency``, applied to
the training pairs of ``irflow.derived.negatives``.

A document is split into words once (``Document``), shared by every measure (the
near-duplicate signature reads the same object); the n-gram measures compare tuples of word
ids, never joined strings, and the sequential "duplicated" scan only runs where some 5-gram
repeats (else no longer n-gram repeats either).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import accumulate, islice

from irflow.core.errors import ConfigError
from irflow.core.settings_types import NgramBound, Quality
from irflow.data.language import known_languages, ranked

# Gopher's stop words: a document of natural English prose contains some of them.
GOPHER_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")
# Each stop-word rule: (at least this many occurrences, of these words). Arctic's examples,
# "'the', 'and', 'is'", add "is" to Gopher's eight; Gopher asks for two.
STOP_WORD_RULES = {"arctic": (1, (*GOPHER_STOP_WORDS, "is")), "gopher": (2, GOPHER_STOP_WORDS)}
# Gopher's repetition bounds (Rae et al. 2021, "Scaling Language Models: Methods, Analysis &
# Insights from Training Gopher", App. A, Table A1): the most frequent ("top") 2-, 3- and
# 4-gram may cover at most 0.20, 0.18 and 0.16 of the characters, and duplicated 5- to 10-grams
# 0.15 down to 0.10. Arctic-Embed limits "the fraction of characters in duplicate n-grams
# (sequences of n words) for n ranging from 2 to 10" (arctic-embed.txt, line 223) without
# bounds: ``arctic`` measures duplicated n-grams for n = 2..10 with Gopher's bounds, its top
# n-gram bounds for n = 2..4 (the only ones Gopher gives there); ``gopher`` is Gopher's own.
GOPHER_TOP = tuple(NgramBound(n=n, max=bound) for n, bound in ((2, 0.20), (3, 0.18), (4, 0.16)))
GOPHER_DUPLICATED = tuple(
    NgramBound(n=n, max=round(0.15 - 0.01 * (n - 5), 2)) for n in range(5, 11)
)
NGRAM_RULES = {
    "arctic": {"top": (), "duplicated": (*GOPHER_TOP, *GOPHER_DUPLICATED)},
    "gopher": {"top": GOPHER_TOP, "duplicated": GOPHER_DUPLICATED},
}
# The punctuation of ordinary prose: the punctuation marks (Unicode Po) that are not Arctic's
# "special characters". Dashes, brackets and quotes have categories of their own (Pd, Ps, Pe,
# Pi, Pf) and are not special either.
PROSE_PUNCTUATION = frozenset(".,;:!?'\"")
# Characters that open a bulleted line. Gopher names "•" and "-"; the others are the same
# mark in other typefaces.
BULLETS = ("•", "-", "*", "‣", "◦", "▪", "·", "–", "—")
ELLIPSES = ("...", "…")
# A line of numbers with the separators numbers and tables are written with (the numeric-lines
# variant ``with_separators``, irflow's before issue 50).
NUMBERS_WITH_SEPARATORS = re.compile(r"[\d\s.,:;%+\-−/()\[\]]*\d[\d\s.,:;%+\-−/()\[\]]*")
# Runs of characters that are not word characters: candidates for punctuation and symbols.
NON_WORD = re.compile(r"[\W_]+")
# A character that is a letter or a non-decimal numeral (the regex cannot tell these apart).
LETTER_LIKE = re.compile(r"[^\W\d_]")
# A near-duplicate shingle's word: a run of word characters.
TOKEN = re.compile(r"\w+")


@dataclass(frozen=True)
class Document:
    """A document as the measures read it, each part found once and only when a measure asks.

    The text is split once into whitespace words, and each word gets an id, its index among the
    document's distinct words: a word's own measures (its bare form, whether it has a letter)
    are computed once per distinct word, and n-grams are tuples of ids, never joined strings.
    The near-duplicate shingles read ``tokens`` of the same object."""

    text: str

    @cached_property
    def words(self) -> list[str]:
        return self.text.split()

    @cached_property
    def lines(self) -> list[str]:
        return [line for line in map(str.strip, self.text.splitlines()) if line]

    @cached_property
    def _vocabulary(self) -> tuple[list[int], list[str]]:
        """Each word's id, and the distinct words in order of first occurrence."""
        ids: dict[str, int] = {}
        return [ids.setdefault(w, len(ids)) for w in self.words], list(ids)

    @property
    def ids(self) -> list[int]:
        return self._vocabulary[0]

    @property
    def distinct(self) -> list[str]:
        return self._vocabulary[1]

    @cached_property
    def bare_distinct(self) -> list[str]:
        """``bare_words`` of the distinct words, by id."""
        return [strip_symbols(w) for w in self.distinct]

    @cached_property
    def bare_words(self) -> list[str]:
        """The words without the punctuation and symbols at their ends, "" for a word of
        punctuation and symbols alone (Gopher's "symbol words")."""
        bare = self.bare_distinct
        return [bare[i] for i in self.ids]

    @cached_property
    def content_words(self) -> list[str]:
        """The bare words that are not empty; two filters read them, so they are found once."""
        return [w for w in self.bare_words if w]

    def has_content_words(self, count: int) -> bool:
        """Whether at least ``count`` words are not punctuation alone, stopping at ``count``."""
        found = (w for w in map(strip_symbols, self.words) if w)
        return sum(1 for _ in islice(found, count)) == count

    @cached_property
    def tokens(self) -> list[str]:
        """The lower-cased ``\\w+`` runs of the text, in order: the words of near-duplicate
        shingles (one regex pass over the text, faster than one per distinct word)."""
        return TOKEN.findall(self.text.lower())

    @cached_property
    def _cumulative_lengths(self) -> list[int]:
        """Characters in the first i words, for i = 0 .. len(words)."""
        return [0, *accumulate(map(len, self.words))]

    def gram_chars(self, start: int, n: int) -> int:
        """Characters in the words of the n-gram at ``start``, without spaces."""
        lengths = self._cumulative_lengths
        return lengths[start + n] - lengths[start]

    def grams(self, n: int) -> list[tuple[int, ...]]:
        """The word n-grams in order, as tuples of word ids (built in C by ``zip``): two are
        equal exactly when their words are."""
        return list(zip(*(self.ids[i:] for i in range(n))))

    @cached_property
    def _repeats(self) -> dict[int, bool]:
        return {}

    def repeats(self, n: int) -> bool:
        """Whether some word n-gram occurs twice (asked once per n-gram check)."""
        if n not in self._repeats:
            grams = self.grams(n)
            self._repeats[n] = len(set(grams)) < len(grams)
        return self._repeats[n]


def _is_symbol(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


def strip_symbols(word: str) -> str:
    """``word`` without the punctuation and symbol characters at its ends."""
    if NON_WORD.match(word) is None and NON_WORD.search(word[-1]) is None:
        return word  # the common case: starts and ends with a letter or digit
    start, end = 0, len(word)
    while start < end and _is_symbol(word[start]):
        start += 1
    while end > start and _is_symbol(word[end - 1]):
        end -= 1
    return word[start:end]


def has_letter(word: str) -> bool:
    match = LETTER_LIKE.search(word)
    if match is None:
        return False
    return match.group().isalpha() or any(c.isalpha() for c in word)


def _line_fraction(doc: Document, predicate: Callable[[str], bool]) -> float:
    if not doc.lines:
        return 0.0
    return sum(1 for line in doc.lines if predicate(line)) / len(doc.lines)


def word_count(doc: Document) -> float:
    """Words that are not punctuation or symbols alone."""
    return float(len(doc.content_words))


def mean_word_length(doc: Document) -> float:
    """Mean length in characters of the words that are not punctuation alone, without the
    punctuation at their ends; 0 for none."""
    words = doc.content_words
    return sum(len(w) for w in words) / len(words) if words else 0.0


def is_special_character(char: str) -> bool:
    """A symbol (Unicode S: = + < ± © ° $ ...) or a punctuation mark outside prose's (Unicode
    Po and Pc but ``PROSE_PUNCTUATION``: # % & * @ / \\ _ · … ...)."""
    category = unicodedata.category(char)
    return category[0] == "S" or (category in ("Po", "Pc") and char not in PROSE_PUNCTUATION)


@lru_cache(maxsize=1)
def _without_special_characters() -> dict[int, None]:
    """A ``str.translate`` table that deletes every special character: the count is the length
    it removes, found in C (0.2 s for SciFact's 5,183 documents; a regex class of them, 29 s)."""
    return dict.fromkeys(c for c in range(sys.maxunicode + 1) if is_special_character(chr(c)))


def special_characters_per_word(doc: Document) -> float:
    """Arctic-Embed's symbol ratio: "symbols or special characters" (``is_special_character``)
    per word."""
    if not doc.words:
        return 0.0
    special = len(doc.text) - len(doc.text.translate(_without_special_characters()))
    return special / len(doc.words)


def hash_or_ellipsis_per_word(doc: Document) -> float:
    """Gopher's symbol-to-word ratio: the larger of hash signs per word and ellipses per word
    (Gopher drops a document when either exceeds the bound)."""
    if not doc.words:
        return 0.0
    hashes = doc.text.count("#")
    ellipses = sum(doc.text.count(mark) for mark in ELLIPSES)
    return max(hashes, ellipses) / len(doc.words)


SYMBOL_COUNTS = {"arctic": special_characters_per_word, "gopher": hash_or_ellipsis_per_word}


def ellipsis_line_fraction(doc: Document) -> float:
    return _line_fraction(doc, lambda line: line.endswith(ELLIPSES))


def words_without_letter_fraction(doc: Document) -> float:
    """Words that contain no alphabetic character (Gopher: 80% of words must have one)."""
    if not doc.words:
        return 0.0
    lettered = [has_letter(w) for w in doc.distinct]
    return sum(1 for i in doc.ids if not lettered[i]) / len(doc.words)


def top_ngram_char_fraction(doc: Document, n: int) -> float:
    """Characters covered by the most frequent word n-gram, counted at every occurrence, over
    the document's characters (Gopher's "top n-gram"; DataTrove's ``find_top_duplicate``: an
    n-gram's characters are its words' and the spaces between them; among equally frequent
    n-grams the first to occur).

    An n-gram that occurs once is no repetition and measures 0. DataTrove counts it anyway,
    which never matters for Gopher's documents of 50 words and more but would remove every
    BEIR document of a few words (a title-only entry) for its length alone.
    """
    if len(doc.words) < n or not doc.text:
        return 0.0
    grams = doc.grams(n)
    gram, count = Counter(grams).most_common(1)[0]
    if count == 1:
        return 0.0
    return (doc.gram_chars(grams.index(gram), n) + n - 1) * count / len(doc.text)


def duplicated_ngram_char_fraction(doc: Document, n: int) -> float:
    """Characters in word n-grams that repeat an earlier n-gram, over the document's
    characters (Gopher's "duplicate n-grams"; DataTrove's ``find_all_duplicate``: after a
    repeat the scan jumps past it, so overlapping repeats are not counted twice; an n-gram's
    characters are its words' without spaces, as there). N-grams are compared as word
    sequences, where DataTrove compares the words joined without spaces ("ab c" = "a bc")."""
    if not doc.text or len(doc.words) < n:
        return 0.0
    if not doc.repeats(min(n, 5)):
        # No repeated 5-gram means no repeated longer one: the common case ends here.
        return 0.0
    grams = doc.grams(n)
    seen, repeated, i = set(), 0, 0
    while i < len(grams):
        if grams[i] in seen:
            repeated += doc.gram_chars(i, n)
            i += n
        else:
            seen.add(grams[i])
            i += 1
    return repeated / len(doc.text)


def stop_word_count(doc: Document, stop_words: frozenset[str]) -> float:
    """Words that are stop words, compared in lower case and without the punctuation at their
    ends, so that "The", "the," and “The” count."""
    stop = [w.lower() in stop_words for w in doc.bare_distinct]
    return float(sum(1 for i in doc.ids if stop[i]))


def bullet_line_fraction(doc: Document) -> float:
    return _line_fraction(doc, lambda line: line.startswith(BULLETS))


def short_line_fraction(doc: Document, words: int) -> float:
    """Lines with fewer than ``words`` words."""
    return _line_fraction(doc, lambda line: len(line.split()) < words)


def is_numeric_line(line: str) -> bool:
    """Arctic-Embed's numeric line, "lines containing only numeric characters" (arctic-embed.txt,
    line 238): every character but the spaces between numbers is numeric (Unicode's numeric
    property, ``str.isnumeric``: digits in any script, fractions, numerals). "12 345" is one;
    "3.5", "-2" and "(1)" are not (their separators are not numeric characters)."""
    return "".join(line.split()).isnumeric()


def has_number_with_separators(line: str) -> bool:
    """The variant ``with_separators``: digits and the separators numbers and tables are written
    with (. , : ; % + - / ( ) [ ]), at least one digit."""
    return NUMBERS_WITH_SEPARATORS.fullmatch(line) is not None


NUMERIC_LINES = {"arctic": is_numeric_line, "with_separators": has_number_with_separators}


def numeric_line_fraction(doc: Document, definition: str = "arctic") -> float:
    """Lines that are numeric by ``definition`` (``NUMERIC_LINES``)."""
    return _line_fraction(doc, NUMERIC_LINES[definition])


def is_uppercase_line(line: str, share: float) -> bool:
    """Arctic-Embed's "lines with more than 80% uppercase letters" (arctic-embed.txt, line
    241): more than ``share`` of the line's letters are upper case; a line without letters is
    not one."""
    letters = [c for c in line if c.isalpha()]
    return bool(letters) and sum(1 for c in letters if c.isupper()) > share * len(letters)


def uppercase_line_fraction(doc: Document, share: float = 0.8) -> float:
    return _line_fraction(doc, lambda line: is_uppercase_line(line, share))


def expected_language_probability(
    doc: Document, language: str, min_words: int = 0, identifier: str = "fasttext"
) -> float | None:
    """The probability the ``identifier`` (``irflow.data.language``) gives ``language``; None
    (not measured) for a document of fewer than ``min_words`` words, too short for that
    probability to be reliable (``expected_language_share`` measures those)."""
    if not doc.has_content_words(min_words):
        return None
    return dict(ranked(doc.text, identifier)).get(language, 0.0)


def expected_language_share(
    doc: Document, language: str, min_words: int, identifier: str = "fasttext"
) -> float | None:
    """For a document of fewer than ``min_words`` words (and at least one): the probability
    the ``identifier`` gives ``language`` over that of its top-ranked language, 1 when
    ``language`` ranks first; None (not measured) for the others.

    Measured with py3langid (the variant):

    On short texts py3langid's probabilities are not calibrated: it gives English under 0.5 to
    17 % of SciFact's 10-word beginnings, yet ranks English first for 97 % of them, and another
    language 100 times likelier than English for 1 of the 5,183, while a German, French or
    Spanish sentence of 14 to 19 words gives English about 1e-7 of the top language's
    probability."""
    if doc.has_content_words(min_words) or not doc.has_content_words(1):
        return None
    languages = ranked(doc.text, identifier)
    return dict(languages).get(language, 0.0) / languages[0][1]


@dataclass(frozen=True)
class Check:
    """One quality filter: a name, what it measures, and the bounds a document must meet."""

    name: str
    measure: Callable[[Document], float | None]
    minimum: float | None = None
    maximum: float | None = None
    # A value must stay below the maximum, not merely reach it (Arctic's "less than").
    strict: bool = False

    def reason(self, value: float | None) -> str | None:
        """Why ``value`` fails the bounds, or None when it passes (or was not measured)."""
        if value is None:
            return None
        if self.minimum is not None and value < self.minimum:
            return f"{self.name} {value:.6g} < {self.minimum:g}"
        if self.maximum is not None:
            if self.strict and value >= self.maximum:
                return f"{self.name} {value:.6g} >= {self.maximum:g}"
            if value > self.maximum:
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
    "uppercase_lines",
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


# The filters bounding a share of lines from above with one setting of their own:
# filter -> (its measure, the setting's name in the filter's block).
LINE_SHARES = {
    "short_lines": (short_line_fraction, "words"),
    "numeric_lines": (numeric_line_fraction, "definition"),
    "uppercase_lines": (uppercase_line_fraction, "uppercase_share"),
}


def build_checks(quality: Quality) -> list[Check]:
    """The enabled checks of the ``filter.quality`` config block (typed, irflow.core.
    settings_types.Quality), in a fixed order."""

    def on(name: str):
        spec = getattr(quality, name)
        return spec if spec.enabled else None

    strict = quality.below == "strict"
    checks: list[Check] = []
    if spec := on("words"):
        checks.append(Check("words", word_count, spec.min, spec.max))
    if spec := on("mean_word_length"):
        checks.append(Check("mean_word_length", mean_word_length, spec.min, spec.max))
    if spec := on("symbols_per_word"):
        checks.append(
            Check(
                "symbols_per_word",
                SYMBOL_COUNTS[spec.count],
                maximum=spec.max,
                strict=strict,
            )
        )
    if spec := on("ellipsis_lines"):
        checks.append(
            Check("ellipsis_lines", ellipsis_line_fraction, maximum=spec.max, strict=strict)
        )
    if spec := on("words_without_letter"):
        checks.append(
            Check(
                "words_without_letter",
                words_without_letter_fraction,
                maximum=spec.max,
                strict=strict,
            )
        )
    if spec := on("duplicate_ngrams"):
        for kind, measure in (
            ("top", top_ngram_char_fraction),
            ("duplicated", duplicated_ngram_char_fraction),
        ):
            given = getattr(spec, kind)
            for bound in NGRAM_RULES[spec.rule][kind] if given is None else given:
                checks.append(
                    Check(
                        f"{kind}_{bound.n}gram_chars",
                        lambda doc, n=bound.n, measure=measure: measure(doc, n),
                        maximum=bound.max,
                    )
                )
    if spec := on("stop_words"):
        least, rule_words = STOP_WORD_RULES[spec.rule]
        words = frozenset(w.lower() for w in spec.words or rule_words)
        minimum = least if spec.min is None else spec.min
        checks.append(Check("stop_words", lambda doc: stop_word_count(doc, words), minimum=minimum))
    if spec := on("bullet_lines"):
        checks.append(Check("bullet_lines", bullet_line_fraction, maximum=spec.max, strict=strict))
    for name, (measure, setting) in LINE_SHARES.items():
        if spec := on(name):
            value = getattr(spec, setting)
            checks.append(
                Check(
                    name,
                    lambda doc, measure=measure, value=value: measure(doc, value),
                    maximum=spec.max,
                    strict=strict,
                )
            )
    if spec := on("language"):
        expected, identifier, least = spec.expected, spec.identifier, spec.min_words
        if expected not in known_languages(identifier):
            raise ConfigError(
                f"config key 'filter.quality.language.expected': {expected!r} is not a language "
                f"{identifier} identifies; known: {', '.join(sorted(known_languages(identifier)))}"
            )
        checks.append(
            Check(
                f"language_{expected}",
                lambda doc: expected_language_probability(doc, expected, least, identifier),
                minimum=spec.min_probability,
            )
        )
        if least > 0:
            checks.append(
                Check(
                    f"language_{expected}_short",
                    lambda doc: expected_language_share(doc, expected, least, identifier),
                    minimum=spec.short_min_share,
                )
            )
    return checks


def failed_checks(doc: Document, checks: list[Check]) -> list[tuple[str, float | None, str]]:
    """(filter name, measured value, reason) for every check ``doc`` fails."""
    failures = []
    for check in checks:
        value = check.measure(doc)
        if (reason := check.reason(value)) is not None:
            failures.append((check.name, value, reason))
    return failures
