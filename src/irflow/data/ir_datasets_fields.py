"""The title and the body of each ir_datasets document type, as a BEIR record holds them.

ir_datasets gives each document type a ``default_text()``, and for most types it already
starts with the title (``NfCorpusDoc``: ``f'{self.title} {self.abstract}'``). Written as a
BEIR record's ``text`` beside its ``title``, every model would read "title title body". So
each type of ir_datasets 0.6 is named here with its title field (BEIR's ``title``) and its
body fields (BEIR's ``text``, the fields joined by a space in default_text()'s order), and
default_text() is not read. A type not named here is refused, naming its fields, rather than
guessed at (tests/test_download.py checks every type ir_datasets registers).

Where default_text() is not the right body, the entry says why (MS MARCO's anchor text,
args.me). A field holding a list or a tuple of parts (anchors, CORD-19's body sections,
Highwire's spans) gives the text of each part, joined by a space as default_text() joins them.
"""

from __future__ import annotations

from irflow.core.errors import DownloadError

# Recorded in each copy written; a cached copy of another revision is written again. Raise it
# when a type's fields change. (Copies without it hold titles twice.)
FIELDS_REVISION = 1

# (title field or None, body fields), per document type (the namedtuple's class name).
_TITLE_TEXT = ("title", ("text",))
_TEXT = (None, ("text",))
DOCUMENT_FIELDS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    **dict.fromkeys(
        (
            "AolIaDoc",
            "BeirCordDoc",
            "BeirCqaDoc",
            "BeirSciDoc",
            "BeirTitleDoc",
            "BeirTitleUrlDoc",
            "BeirToucheDoc",
            "CodecDoc",
            "CranfieldDoc",
            "DprW100Doc",
            "ExctractedCCDoc",  # sic, ir_datasets' spelling
            "FairTrec2022Doc",
            "FairTrecDoc",
            "KiltDoc",
            "MiraclDoc",
            "TipOfTheTongueDoc2024",
            "TitleUrlTextDoc",
            "TrecToT2025Doc",
            "WikiClirDoc",
        ),
        _TITLE_TEXT,
    ),
    **dict.fromkeys(
        (
            "C4Doc",
            "GenericDoc",
            "MsMarcoQnADoc",
            "MsMarcoV2Passage",
            "SaraDoc",
            "TouchePassageDoc",
            "TrecDoc",
            "TweetDoc",
        ),
        _TEXT,
    ),
    # "The text field contains the anchor texts concatenated and the anchors field contains
    # the anchor texts as list" (ir_datasets' docs): default_text() reads them twice.
    "MsMarcoAnchorTextDocument": _TEXT,
    "MsMarcoV2AnchorTextDocument": _TEXT,
    # BEIR's webis-touche2020 copy of args.me: title the conclusion, text the premises.
    "ArgsMeDoc": ("conclusion", ("premises_texts",)),
    "ArgsMeProcessedDoc": ("conclusion", ("premises_texts",)),
    "ClinicalTrialsDoc": (
        "title",
        ("condition", "summary", "detailed_description", "eligibility"),
    ),
    "CodeSearchNetDoc": (None, ("code",)),  # the function's code names it
    "Cord19Doc": ("title", ("abstract",)),
    "Cord19FullTextDoc": ("title", ("abstract", "body")),  # body: (section title, text)s
    "CslDoc": ("title", ("abstract",)),
    "HighwireDoc": ("title", ("spans",)),  # spans: (start, length, text)s
    "Istella22Doc": ("title", ("text", "extra_text")),
    "MedlineDoc": ("title", ("abstract",)),
    "MsMarcoDocument": ("title", ("body",)),
    "MsMarcoV2Document": ("title", ("headings", "body")),
    "NfCorpusDoc": ("title", ("abstract",)),
    "NqPassageDoc": ("document_title", ("text",)),
    "NytDoc": ("headline", ("body",)),
    "PmcDoc": ("title", ("abstract", "body")),
    "TipOfTheTongueDoc": ("page_title", ("text",)),
    "TrecParsedDoc": ("title", ("body",)),
    "TripClickPartialDoc": ("title", ()),
    "WapoDoc": ("title", ("body",)),
}
# Web pages: title and body are parsed from the HTML in ``body``. default_text() parses both
# tags into one text (fields=[{'title', 'body'}]); two field groups keep them apart.
HTML_DOCUMENTS = frozenset({"GovDoc", "Gov2Doc", "WarcDoc"})


def _field_text(value) -> str:
    """A field's text: a string itself; a list or tuple (a namedtuple part included), the
    text of its string parts joined by a space; nothing else (numbers, None) holds text."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return " ".join(text for part in value if (text := _field_text(part)))
    return ""


def _html_fields(doc) -> tuple[str, str]:
    from ir_datasets.util import sax_html_parser

    try:
        title, body = sax_html_parser(
            doc.body, headers=doc.http_headers, fields=[{"title"}, {"body"}]
        )
    except UnicodeDecodeError:  # a page that cannot be decoded is empty, as WarcDoc's own
        return "", ""
    return title, body


def document_fields(doc) -> tuple[str, str]:
    """The (title, text) of an ir_datasets document, from its type's fields."""
    kind = type(doc).__name__
    if kind in HTML_DOCUMENTS:
        return _html_fields(doc)
    if kind not in DOCUMENT_FIELDS:
        raise DownloadError(
            f"ir_datasets document type {kind} (fields: {', '.join(doc._fields)}) has no "
            "title and body fields named in irflow.data.ir_datasets_fields.DOCUMENT_FIELDS"
        )
    title, body = DOCUMENT_FIELDS[kind]
    parts = (_field_text(getattr(doc, field)) for field in body)
    return _field_text(getattr(doc, title)) if title else "", " ".join(p for p in parts if p)
