"""generate: a new benchmark from any dataset's corpus, written by a language model (AIR-Bench).

AIR-Bench (Chen et al., 2024, §2.3 and App. A.2) builds a test collection from a corpus alone:
for each sampled document a language model names characters who would find it useful, then
scenarios in which one of them would search, writes that character's query for one scenario
with sampled attributes (length, type, information type, expression style), rewrites the query
so that it does not copy the document's words, and writes hard negatives: documents that look
relevant to the query but do not answer it. The document is the query's relevant document.

The result is an ordinary dataset (the contracts' corpus, queries and qrels) that the rest of
the workflow evaluates unchanged. Three more tables say how it was made, for quality control:
``negatives`` (each generated document, the query it was written for and its source
document), ``generation`` (per query: character, scenario, attributes, the query before and
after each rewrite) and ``dropped`` (each sampled document that gave no query: the step, the
reason, the detail).

Decisions:
- The prompts and the attribute vocabularies live in a YAML file (``prompts``, by default
  config/prompts/airbench.yaml), checked on load: an unknown placeholder or a missing field is
  an error naming the file and the field.
- Long documents are cut first (``chunk_tokens``, ``overlap``; AIR-Bench: 200 and 50), by a
  Hugging Face ``tokenizer`` or, when none is named, by whitespace-separated words, in windows
  as ``irflow.passages`` makes them. A document with more than one window is replaced by its
  windows, ``<doc_id>#<n>``, each keeping the title; a shorter one is kept as it is. The chunks
  are the corpus that is sampled from and evaluated.
- Lengths count the ``tokenizer``'s tokens when one is named, else words: runs of non-space
  characters, where each character of a script written without spaces (Chinese, Japanese, Thai,
  ...) is a word of its own. Chunking and ``min_words`` use the same count.
- Candidates: with ``sample_from: positives`` only the documents the source dataset judges
  relevant (relevance >= 1 in its scored split; their chunks when chunked), as AIR-Bench builds
  G-MSMARCO from MS MARCO's judged passages; else the whole corpus. Then AIR-Bench's corpus
  preparation, as options: documents shorter than ``min_words`` or longer than ``max_words``
  are left out, and so are those in which a ``personal_data`` detector finds something. The
  detectors are regular expressions, a heuristic that misses some and flags some: ``email``
  (name@domain.tld) and ``phone`` (10 to 15 digits written as a phone number: a leading +
  and country code, or groups of digits split by one kind of separator, spaces, dots or
  dashes, optionally after an area code in brackets; an unbroken run of digits is not flagged,
  it may be any id, nor groups of three after the first, a number's thousands, nor counting
  groups such as 9 10 11 12, a run of citation marks).
  Left-out documents stay in the corpus; they are only never sampled, so no query is written
  about them (a quality-control judge may still read them as candidates).
- Sampling is seeded and stable: candidates are ordered by a hash of the seed and doc_id, and
  the first ``documents`` are taken. With
  ``stratify: k``, candidates are split into k groups of equal size by length in words, and
  each group gives its share, in the same hash order (a group too small gives all it has and
  the others make up for it). So widening a sample keeps every earlier document, and with the
  answer cache a widened run pays only for the new ones.
- Every random choice for a document (which character, which scenario, the query attributes,
  how many negatives between ``negatives[0]`` and ``negatives[1]``) comes from a generator
  seeded by the seed and the doc_id only, so a document's prompts never depend on the others.
- A step's answer must be a JSON object with the step's ``answer_key``: a non-empty list of
  strings (characters, scenarios), a non-empty string (query, rewritten query), or a list of
  at least ``negatives[0]`` documents (strings, or objects with a ``text`` and an optional
  ``title``), of which at most the requested number are kept. Any other answer is re-asked by
  the client (see ``irflow.llm``); a document whose answer is still unusable is dropped with
  the client's reason.
- Ids: query ``gen-q-<doc_id>``, hard negative ``gen-neg-<doc_id>-<n>``. An id that already
  names a corpus document is an error, never a silent overwrite.
- The corpus is the whole (chunked) source corpus, then the hard negatives in query order.
  qrels give relevance 1 to the source document and 0 to the query's own hard negatives, as
  AIR-Bench labels them.
- Splits: the queries are ordered by a hash of the seed and query_id, and the first
  ``round(dev_share * queries)`` are ``dev``, the others ``test`` (``generation.split``).
  ``qrels/dev.parquet`` and ``qrels/test.parquet`` hold each split's judgements and
  ``qrels.parquet`` the one named by ``split`` (test by default), which the workflow scores.
  ``queries.parquet`` holds every query, as a BEIR folder does.
- ``estimate`` is a dry run: it samples as a run does and walks the steps over the answer cache,
  sending nothing. An answer the cache holds is used; a request it lacks is counted (its prompt
  tokens, and as completion a stand-in answer of the lengths in ``TYPICAL_WORDS``: the length a
  prompt asks for, or an assumption), and the stand-in feeds the next step's prompt. So a fully
  cached config estimates 0 requests, and a widened sample only the new documents. Re-asks are
  not foreseen: ``max_requests`` allows every request its ``reasks``. The quality-control
  judge of each QC'd copy is counted with the requests ``irflow.qc.Judge`` builds: every
  query's positive as asked, the pre-labelled documents at their most (``estimate_judge``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import string
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from irflow import contracts
from irflow.errors import ConfigError, InputError
from irflow.llm import Answer, LLMClient, Request
from irflow.passages import passage_id, window_starts

log = logging.getLogger(__name__)

STEPS = ("characters", "scenarios", "query", "rewrite", "negatives")
# In the order they are drawn: the type first, since it limits the lengths (AIR-Bench: a claim
# is "10 to 20" or "at least 20 words" long).
ATTRIBUTES = ("query_type", "query_length", "information_type", "expression_style")
# The placeholders each step's templates may use, and those they must use.
ALLOWED = {
    "characters": {"language", "document", "count"},
    "scenarios": {"language", "document", "count", "character"},
    "query": {"language", "document", "character", "scenario", *ATTRIBUTES},
    "rewrite": {"language", "document", "character", "scenario", "query", *ATTRIBUTES},
    "negatives": {"language", "document", "character", "scenario", "query", "count", *ATTRIBUTES},
}
REQUIRED = {
    "characters": {"document"},
    "scenarios": {"document", "character"},
    "query": {"document", "character", "scenario"},
    "rewrite": {"query"},
    "negatives": {"document", "query"},
}
# Scripts written without spaces between words (Han, kana, Thai, Lao, Myanmar, Khmer): each of
# their characters counts as a word, so a Chinese document is not one long word.
NO_SPACES = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
)
WORDS = re.compile(f"[{NO_SPACES}]|[^\\s{NO_SPACES}]+")
# The same units without punctuation, lower-cased: what a query shares with its document.
PLAIN_WORDS = re.compile(f"[{NO_SPACES}]|[^\\W{NO_SPACES}]+")
# Personal data that keeps a document out of the sample (``personal_data``): a heuristic.
PERSONAL_DATA = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}"),
    "phone": re.compile(
        r"(?<![\w+.,-])(?:\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,6}"
        r"|\(\d{1,4}\)[ .-]?\d{2,4}(?P<a>[ .-])\d{2,4}(?:(?P=a)\d{2,4}){0,2}"
        r"|\d{2,4}(?P<b>[ .-])\d{2,4}(?:(?P=b)\d{2,4}){1,3})"
        r"(?![\w+-]|[.,]\d)"
    ),
}
PHONE_DIGITS = (10, 15)
# What the model is assumed to write, in words, where a dry run needs a stand-in answer: a
# character, a scenario, a hard negative's title; a query is as long as its drawn band (its
# middle, or the least + 10 for an open band) and a hard negative as long as its document (the
# prompt asks so), unless ``query`` or ``negative`` is given.
TYPICAL_WORDS = {"character": 8, "scenario": 30, "title": 8, "explanation": 20}
SPLITS = ("dev", "test")
QUERY_PREFIX = "gen-q-"
NEGATIVE_PREFIX = "gen-neg-"
EXTRA_SCHEMAS = {
    "negatives": {
        "doc_id": "string",
        "query_id": "string",
        "source_doc_id": "string",
        "number": "int32",
    },
    "generation": {
        "query_id": "string",
        "doc_id": "string",
        "character": "string",
        "scenario": "string",
        "query_length": "string",
        "query_type": "string",
        "information_type": "string",
        "expression_style": "string",
        "first_query": "string",
        "rewrites": "list<string>",
        "query": "string",
        "first_query_overlap": "double",
        "query_overlap": "double",
        "negatives_requested": "int32",
        "negatives": "int32",
        "split": "string",
    },
    "dropped": {"doc_id": "string", "step": "string", "reason": "string", "detail": "string"},
}


# --- config -----------------------------------------------------------------------------------


def list_generated(config: dict) -> dict[str, dict]:
    """Every dataset the ``generate`` block defines, by name, with its settings."""
    generated = {}
    for name, spec in sorted(config.get("generate", {}).items()):
        if spec["dataset"] not in config["datasets"]:
            known = ", ".join(sorted(config["datasets"]))
            raise ConfigError(
                f"config key 'generate.{name}.dataset': {spec['dataset']!r} is not a key of "
                f"'datasets'; allowed values: {known}"
            )
        generated[name] = dict(spec)
    return generated


# --- prompts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One value of a query attribute: drawn with probability proportional to ``weight``.
    ``words`` (query_length only): the length's least and most words (None: no most).
    ``query_lengths`` (query_type only): the query_length values a query of this type may have
    (None: all); AIR-Bench (App. A.2.1) draws a claim's length from "10 to 20" and "at least 20
    words" only. ``long_doc`` (query_type only): False leaves the type out of Long-Doc corpora
    (``chunk_tokens`` set), where AIR-Bench asks only questions and claims."""

    value: str
    weight: float = 1.0
    words: tuple[int, int | None] | None = None
    query_lengths: tuple[str, ...] | None = None
    long_doc: bool = True


@dataclass(frozen=True)
class Prompts:
    path: str
    steps: dict
    attributes: dict[str, list[Option]]
    sha256: str

    def messages(self, step: str, values: dict) -> list[dict]:
        spec = self.steps[step]
        messages = [{"role": "system", "content": spec["system"]}] if spec.get("system") else []
        messages.append({"role": "user", "content": spec["user"]})
        values = values | {"document": fence(values["document"])}
        return [
            {"role": m["role"], "content": string.Template(m["content"]).substitute(values)}
            for m in messages
        ]


def fence(text: str) -> str:
    """``text`` between lines of double quotes, one more than its longest run of them (at least
    three), so that nothing in it can close the quote and speak to the model as the prompt."""
    longest = max((len(run) for run in re.findall(r'"+', text)), default=0)
    quotes = '"' * max(3, longest + 1)
    return f"{quotes}\n{text}\n{quotes}"


def _placeholders(template: str) -> set[str]:
    return {
        match.group("named") or match.group("braced")
        for match in string.Template.pattern.finditer(template)
        if match.group("named") or match.group("braced")
    }


def read_prompts_file(path: str | Path, what: str) -> tuple[dict, str]:
    """The mapping in a YAML prompts file and the SHA-256 of its bytes; errors name the file
    (``what`` it is) and, for bad YAML, the line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, f"{what} does not exist") from None
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(path, f"not valid YAML: {error}", line=line) from None
    if not isinstance(data, dict):
        raise InputError(path, "must be a mapping")
    return data, hashlib.sha256(raw).hexdigest()


def load_prompts(path: str | Path) -> Prompts:
    """Read and check a prompts file; errors name the file and the field."""
    path = Path(path)
    data, sha256 = read_prompts_file(path, "the prompts file")
    attributes = data.get("attributes")
    if not isinstance(attributes, dict):
        raise InputError(path, "missing: a mapping of attribute lists", field="attributes")
    options = {name: _options(path, name, attributes.get(name)) for name in ATTRIBUTES}
    lengths = {o.value for o in options["query_length"]}
    for i, option in enumerate(options["query_type"]):
        unknown = set(option.query_lengths or ()) - lengths
        if unknown:
            raise InputError(
                path,
                f"{', '.join(sorted(map(repr, unknown)))} is not a query_length value",
                field=f"attributes.query_type.{i}.query_lengths",
            )
    if not any(o.long_doc for o in options["query_type"]):
        raise InputError(
            path,
            "no value is left for Long-Doc corpora (all long_doc: false)",
            field="attributes.query_type",
        )
    for step in STEPS:
        spec = data.get(step)
        if not isinstance(spec, dict):
            raise InputError(path, "missing: the step's system and user templates", field=step)
        if not isinstance(spec.get("user"), str) or not spec["user"].strip():
            raise InputError(path, "must be a non-empty template", field=f"{step}.user")
        if not isinstance(spec.get("answer_key"), str) or not spec["answer_key"]:
            raise InputError(path, "must name the answer's JSON key", field=f"{step}.answer_key")
        for part in ("system", "user"):
            template = spec.get(part)
            if template is None:
                continue
            if not isinstance(template, str):
                raise InputError(path, "must be a string", field=f"{step}.{part}")
            try:
                used = _placeholders(template)
                string.Template(template).substitute(dict.fromkeys(used, ""))
            except ValueError as error:
                raise InputError(
                    path, f"bad placeholder: {error}", field=f"{step}.{part}"
                ) from None
            unknown = used - ALLOWED[step]
            if unknown:
                raise InputError(
                    path,
                    f"unknown placeholder(s) {', '.join(sorted(unknown))}; allowed: "
                    f"{', '.join(sorted(ALLOWED[step]))}",
                    field=f"{step}.{part}",
                )
        used = _placeholders(spec["user"]) | _placeholders(spec.get("system") or "")
        missing = REQUIRED[step] - used
        if missing:
            raise InputError(
                path, f"must use ${{{'}, ${'.join(sorted(missing))}}}", field=f"{step}.user"
            )
    for step, key, low in (("characters", "count", 1), ("scenarios", "count", 1)):
        if not isinstance(data[step].get(key, 1), int) or data[step].get(key, 1) < low:
            raise InputError(path, f"must be an integer >= {low}", field=f"{step}.{key}")
    rounds = data["rewrite"].get("rounds", 1)
    if not isinstance(rounds, int) or rounds < 0:
        raise InputError(path, "must be an integer >= 0", field="rewrite.rounds")
    return Prompts(
        path=str(path),
        steps={step: data[step] for step in STEPS},
        attributes=options,
        sha256=sha256,
    )


def _options(path: Path, name: str, values: Any) -> list[Option]:
    """An attribute's options: plain strings (weight 1) or mappings with ``value`` and
    ``weight`` (and ``words`` for a length, ``query_lengths`` and ``long_doc`` for a type)."""
    field = f"attributes.{name}"
    if not isinstance(values, list) or not values:
        raise InputError(path, "must be a non-empty list of values", field=field)
    options = []
    for i, item in enumerate(values):
        where = f"{field}.{i}"
        if isinstance(item, str):
            item = {"value": item}
        if not isinstance(item, dict) or not isinstance(item.get("value"), str):
            raise InputError(path, "must be a string or a mapping with a 'value'", field=where)
        own = {"query_length": {"words"}, "query_type": {"query_lengths", "long_doc"}}
        unknown = set(item) - {"value", "weight", *own.get(name, ())}
        if unknown:
            raise InputError(
                path, f"unknown key(s) for {name}: {', '.join(sorted(unknown))}", field=where
            )
        weight = item.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            raise InputError(path, "must be a number > 0", field=f"{where}.weight")
        words = item.get("words")
        if words is not None:
            low, high = (list(words) + [None, None])[:2] if isinstance(words, list) else (-1, 0)
            if not (isinstance(low, int) and low >= 0 and (high is None or high >= low)):
                raise InputError(path, "must be [least, most or null]", field=f"{where}.words")
            words = (low, high)
        lengths = item.get("query_lengths")
        if lengths is not None:
            if not (
                isinstance(lengths, list)
                and lengths
                and all(isinstance(v, str) and v.strip() for v in lengths)
            ):
                raise InputError(
                    path,
                    "must be a non-empty list of query_length values",
                    field=f"{where}.query_lengths",
                )
            lengths = tuple(v.strip() for v in lengths)
        long_doc = item.get("long_doc", True)
        if not isinstance(long_doc, bool):
            raise InputError(path, "must be true or false", field=f"{where}.long_doc")
        if not item["value"].strip():
            raise InputError(path, "must be a non-empty string", field=f"{where}.value")
        options.append(Option(item["value"].strip(), float(weight), words, lengths, long_doc))
    return options


# --- chunking and sampling --------------------------------------------------------------------


def _word_spans(texts: list[str]) -> list[list[tuple[int, int]]]:
    return [[m.span() for m in WORDS.finditer(text)] for text in texts]


def chunk_corpus(
    corpus: pd.DataFrame, size: int, overlap: int, tokenizer=None
) -> tuple[pd.DataFrame, dict]:
    """Documents of more than one window of ``size`` tokens replaced by their windows;
    ``source_doc_id`` names each row's document."""
    texts = corpus["text"].fillna("").tolist()
    if tokenizer is None:
        spans = _word_spans(texts)
    else:
        from irflow.positionalize import encode

        spans = encode(tokenizer, texts, offsets=True)["offset_mapping"]
    rows, chunked = [], 0
    for doc_id, title, text, offsets in zip(corpus["doc_id"], corpus["title"], texts, spans):
        starts = window_starts(len(offsets), size, overlap)
        if len(starts) <= 1:
            rows.append({"doc_id": doc_id, "title": title, "text": text, "source_doc_id": doc_id})
            continue
        chunked += 1
        for number, start in enumerate(starts):
            window = offsets[start : start + size]
            rows.append(
                {
                    "doc_id": passage_id(doc_id, number),
                    "title": title,
                    "text": text[window[0][0] : window[-1][1]],
                    "source_doc_id": doc_id,
                }
            )
    frame = pd.DataFrame(rows, columns=["doc_id", "title", "text", "source_doc_id"])
    stats = {"documents": len(corpus), "documents_chunked": chunked, "chunks": len(frame)}
    return frame, stats


def word_overlap(query: str, document: str) -> float:
    """The share of the query's distinct words (``PLAIN_WORDS``, lower-cased) that occur in the
    document: 1.0 when the query copies the document's wording, lower after a good rewrite.
    Stop words count too."""
    words = set(PLAIN_WORDS.findall(query.lower()))
    if not words:
        return 0.0
    return len(words & set(PLAIN_WORDS.findall(document.lower()))) / len(words)


def _order_key(seed: int, doc_id: str) -> str:
    return hashlib.sha256(f"{seed}\0{doc_id}".encode()).hexdigest()


def document_rng(seed: int, doc_id: str) -> np.random.Generator:
    """The generator of every choice made for one document."""
    digest = hashlib.sha256(f"{seed}\0{doc_id}".encode()).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def word_count(title: str | None, text: str | None) -> int:
    return len(WORDS.findall(contracts.document_text(title, text or "")))


def document_lengths(corpus: pd.DataFrame, tokenizer=None) -> np.ndarray:
    """Each document's length: in the tokenizer's tokens, or in words (``WORDS``)."""
    if tokenizer is None:
        return np.array([word_count(t, x) for t, x in zip(corpus["title"], corpus["text"])])
    from irflow.positionalize import encode

    texts = contracts.document_texts(corpus["title"], corpus["text"].fillna(""))
    return np.array([len(ids) for ids in encode(tokenizer, list(texts))["input_ids"]], dtype=int)


def personal_data(text: str, kinds: list[str] | tuple[str, ...]) -> list[str]:
    """The ``kinds`` of ``PERSONAL_DATA`` found in ``text`` (a heuristic: see the module)."""
    found = []
    for kind in kinds:
        for match in PERSONAL_DATA[kind].finditer(text):
            digits = sum(c.isdigit() for c in match.group(0))
            # Without a +: groups of three after the first are a number's thousands, and
            # counting groups (9 10 11 12) a run of citation marks.
            groups = re.findall(r"\d+", match.group(0))
            numbers = match.group(0)[0] != "+" and (
                all(len(g) == 3 for g in groups[1:])
                or all(int(b) == int(a) + 1 for a, b in zip(groups, groups[1:]))
            )
            if kind != "phone" or (PHONE_DIGITS[0] <= digits <= PHONE_DIGITS[1] and not numbers):
                found.append(kind)
                break
    return found


def sample_documents(
    corpus: pd.DataFrame,
    count: int,
    seed: int,
    strata: int | None,
    min_words: int,
    tokenizer=None,
    max_words: int | None = None,
    personal: list[str] | tuple[str, ...] = (),
    eligible: np.ndarray | None = None,
) -> tuple[list[int], dict]:
    """Row positions of the sampled documents, in hash order, and what the sample holds.
    Lengths (``min_words``, ``max_words``, strata) count the tokenizer's tokens when one is
    given. Only rows where ``eligible`` is true (all when None), of ``min_words`` to
    ``max_words``, and without the ``personal`` kinds of personal data are candidates."""
    words = document_lengths(corpus, tokenizer)
    keep = np.ones(len(corpus), bool) if eligible is None else np.array(eligible, bool)
    stats: dict = {}
    if eligible is not None:
        stats["not_positive"] = int((~keep).sum())
    stats["too_short"] = int((keep & (words < min_words)).sum())
    keep &= words >= min_words
    if max_words is not None:
        stats["too_long"] = int((keep & (words > max_words)).sum())
        keep &= words <= max_words
    if personal:
        # Only the documents still in the running are searched: the scan costs most.
        flagged = {kind: 0 for kind in personal}
        for i in np.flatnonzero(keep):
            text = contracts.document_text(corpus["title"].iat[i], corpus["text"].iat[i] or "")
            kinds = personal_data(text, personal)
            for kind in kinds:
                flagged[kind] += 1
            keep[i] = not kinds
        stats["personal_data"] = flagged
    candidates = np.flatnonzero(keep)
    keys = {int(i): _order_key(seed, corpus["doc_id"].iat[i]) for i in candidates}
    if not strata or strata <= 1:
        chosen = sorted(candidates.tolist(), key=keys.__getitem__)[:count]
        quotas = [len(chosen)]
    else:
        by_length = sorted(candidates.tolist(), key=lambda i: (words[i], corpus["doc_id"].iat[i]))
        groups = [g.tolist() for g in np.array_split(np.array(by_length, dtype=int), strata)]
        groups = [sorted(g, key=keys.__getitem__) for g in groups]
        quotas = _allocate(count, [len(g) for g in groups])
        chosen = [i for group, quota in zip(groups, quotas) for i in group[:quota]]
    chosen.sort(key=keys.__getitem__)
    stats = {"candidates": int(len(candidates)), **stats}
    stats |= {"sampled": len(chosen), "per_stratum": quotas}
    if len(chosen) < count:
        log.warning(
            "asked for %d documents, only %d are candidates (%s; lengths in %s)",
            count,
            len(chosen),
            ", ".join(f"{key}: {value}" for key, value in stats.items() if key != "sampled"),
            "tokens" if tokenizer is not None else "words",
        )
    return chosen, stats


def _allocate(count: int, sizes: list[int]) -> list[int]:
    """Shares of ``count`` over groups of ``sizes``: as even as the sizes allow, the remainder
    to the first groups."""
    quotas = [0] * len(sizes)
    left = min(count, sum(sizes))
    while left > 0:
        open_groups = [i for i, size in enumerate(sizes) if quotas[i] < size]
        share, extra = divmod(left, len(open_groups))
        for rank, i in enumerate(open_groups):
            take = min(share + (rank < extra), sizes[i] - quotas[i])
            quotas[i] += take
            left -= take
    return quotas


# --- answer checks ----------------------------------------------------------------------------


def _list_of_strings(key: str):
    def check(data: Any) -> str | None:
        value = data.get(key) if isinstance(data, dict) else None
        if not isinstance(value, list) or not value:
            return f"expected a JSON object with a non-empty list {key!r}"
        if not any(isinstance(v, str) and v.strip() for v in value):
            return f"{key!r} holds no non-empty string"
        return None

    return check


def _string(key: str):
    def check(data: Any) -> str | None:
        value = data.get(key) if isinstance(data, dict) else None
        if not isinstance(value, str) or not value.strip():
            return f"expected a JSON object with a non-empty string {key!r}"
        return None

    return check


def _negative_documents(value: Any) -> list[dict]:
    documents = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str) and item.strip():
            documents.append({"title": "", "text": item.strip()})
        elif isinstance(item, dict) and isinstance(item.get("text"), str) and item["text"].strip():
            title = item.get("title")
            documents.append(
                {
                    "title": title.strip() if isinstance(title, str) else "",
                    "text": item["text"].strip(),
                }
            )
    return documents


def _negatives_check(key: str, minimum: int):
    def check(data: Any) -> str | None:
        value = data.get(key) if isinstance(data, dict) else None
        found = len(_negative_documents(value))
        if found < minimum:
            return (
                f"expected a JSON object whose list {key!r} holds at least {minimum} "
                f"documents; found {found}"
            )
        return None

    return check


# --- generation -------------------------------------------------------------------------------


@dataclass
class Generated:
    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame
    negatives: pd.DataFrame
    generation: pd.DataFrame
    dropped: pd.DataFrame
    stats: dict


@dataclass
class _Item:
    """One sampled document on its way to a query."""

    doc_id: str
    document: str
    rng: np.random.Generator
    values: dict
    rewrites: list
    negatives_requested: int = 0
    band: tuple[int, int | None] | None = None  # the drawn query_length's words


class Generator:
    """Runs the steps for all sampled documents, one batch of requests per step."""

    def __init__(
        self, prompts: Prompts, client: LLMClient, spec: dict, dry_run: DryRun | None = None
    ):
        self.prompts = prompts
        self.client = client
        self.spec = spec
        self.dry_run = dry_run  # set: nothing is sent (see ``estimate``)
        self.dropped: list[dict] = []

    def _ask(
        self, step: str, items: list[_Item], check, count: dict | str | None = None
    ) -> list[tuple[_Item, Any]]:
        """Ask ``step`` for every item; the survivors with their answer's value. ``count`` is
        the ${count} of the prompt: fixed, or the name of the item's attribute that holds it."""
        key = self.prompts.steps[step]["answer_key"]
        # One check for the step: requests are the same only with the same check, so identical
        # prompts are asked once.
        check = check(key)
        requests, counts = [], []
        for item in items:
            values = dict(item.values)
            if isinstance(count, dict):
                values |= count
            elif isinstance(count, str):
                values["count"] = getattr(item, count)
            counts.append(values.get("count"))
            requests.append(Request(self.prompts.messages(step, values), check=check))
        if self.dry_run is not None:
            answers = self.dry_run.answer(self.client, step, key, items, counts, requests)
        else:
            answers = self.client.complete(requests, desc=f"generate: {step}")
        survivors = []
        for item, answer in zip(items, answers):
            if answer.ok:
                survivors.append((item, answer.data[key]))
            else:
                self.dropped.append(
                    {
                        "doc_id": item.doc_id,
                        "step": step,
                        "reason": answer.error,
                        "detail": answer.detail,
                    }
                )
        return survivors

    @staticmethod
    def _pick(item: _Item, options: list) -> str:
        options = [o.strip() for o in options if isinstance(o, str) and o.strip()]
        return options[int(item.rng.integers(len(options)))]

    def run(self, items: list[_Item]) -> list[_Item]:
        steps = self.prompts.steps
        low, high = self.spec["negatives"]
        counts = {
            "characters": steps["characters"].get("count", 5),
            "scenarios": steps["scenarios"].get("count", 3),
        }
        # The attribute and count draws come first, in a fixed order; each step's pick follows.
        for item in items:
            for attribute in ATTRIBUTES:
                item.values[attribute] = self._draw(item, attribute)
            item.negatives_requested = int(item.rng.integers(low, high + 1))
        characters = {"count": counts["characters"]}
        for item, value in self._ask("characters", items, _list_of_strings, characters):
            item.values["character"] = self._pick(item, value)
        items = [i for i in items if "character" in i.values]
        scenarios = {"count": counts["scenarios"]}
        for item, value in self._ask("scenarios", items, _list_of_strings, scenarios):
            item.values["scenario"] = self._pick(item, value)
        items = [i for i in items if "scenario" in i.values]
        for item, value in self._ask("query", items, _string):
            item.values["query"] = value.strip()
            item.rewrites.append(value.strip())
        items = [i for i in items if "query" in i.values]
        for _ in range(steps["rewrite"].get("rounds", 1)):
            kept = []
            for item, value in self._ask("rewrite", items, _string):
                item.values["query"] = value.strip()
                item.rewrites.append(value.strip())
                kept.append(item)
            items = kept
        if high == 0:  # no hard negatives wanted: nothing to ask
            for item in items:
                item.values["negatives"] = []
            return items
        survivors = []
        check = partial(_negatives_check, minimum=low)
        for item, value in self._ask("negatives", items, check, "negatives_requested"):
            item.values["negatives"] = _negative_documents(value)[: item.negatives_requested]
            survivors.append(item)
        return survivors

    def _draw(self, item: _Item, attribute: str) -> str:
        """A weighted draw, in ``ATTRIBUTES`` order. As AIR-Bench (App. A.2.1): the query type
        first, on a Long-Doc corpus (``chunk_tokens`` set) among the types marked for it (the
        paper's Long-Doc queries are questions and claims); then the length, among the lengths
        the drawn type allows (a claim: "10 to 20" or "at least 20 words")."""
        options = self.prompts.attributes[attribute]
        if attribute == "query_type" and self.spec.get("chunk_tokens"):
            options = [o for o in options if o.long_doc]
        elif attribute == "query_length":
            kind = item.values["query_type"]
            allowed = next(o for o in self.prompts.attributes["query_type"] if o.value == kind)
            if allowed.query_lengths is not None:
                options = [o for o in options if o.value in allowed.query_lengths]
        weights = np.array([o.weight for o in options])
        chosen = options[int(item.rng.choice(len(options), p=weights / weights.sum()))]
        if attribute == "query_length":
            item.band = chosen.words
        return chosen.value


# The counts of a dry run, per step.
ESTIMATE_KEYS = (
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "cached",
    "cached_prompt_tokens",
    "cached_completion_tokens",
)


class DryRun:
    """Answers a generator's requests without sending any: from the answer cache when it holds
    the first ask, else with a stand-in of ``TYPICAL_WORDS``; counts both kinds by step."""

    def __init__(self, count_tokens, typical: dict | None = None):
        self.count_tokens = count_tokens
        self.typical = TYPICAL_WORDS | (typical or {})
        self.steps: dict[str, Counter] = {}

    def answer(
        self,
        client: LLMClient,
        step: str,
        key: str,
        items: list[_Item],
        counts: list,
        requests: list[Request],
    ) -> list[Answer]:
        stand_ins = [{key: self.stand_in(step, i, c)} for i, c in zip(items, counts)]
        return self.count(client, step, requests, stand_ins)

    def count(
        self, client: LLMClient, step: str, requests: list[Request], stand_ins: list[dict]
    ) -> list[Answer]:
        """Each request's cached answer, else its stand-in answer (``stand_ins``, the parsed
        JSON), counted under ``step`` as cached or as asked."""
        tally = self.steps.setdefault(step, Counter())
        answers, seen = [], {}
        for request, data in zip(requests, stand_ins):
            identity = client.identity(request)
            if identity in seen:  # asked once per batch, as LLMClient.complete does
                answers.append(seen[identity])
                continue
            record = client.cached_record(request)
            answer = LLMClient.judge(request, record) if record is not None else None
            if answer is not None and answer.ok:
                tally["cached"] += 1
                tally["cached_prompt_tokens"] += record["prompt_tokens"] or 0
                tally["cached_completion_tokens"] += record["completion_tokens"] or 0
            else:
                text = json.dumps(data, ensure_ascii=False)
                tally["requests"] += 1
                tally["prompt_tokens"] += self.prompt_tokens(request)
                tally["completion_tokens"] += self.count_tokens(text)
                answer = Answer(text=text, data=data, cached=False)
            seen[identity] = answer
            answers.append(answer)
        return answers

    def prompt_tokens(self, request: Request) -> int:
        return sum(self.count_tokens(m["content"]) for m in request.messages)

    def words(self, n: int) -> str:
        return " ".join(["word"] * max(int(n), 1))

    def stand_in(self, step: str, item: _Item, count: int | None):
        """What the model is assumed to write for ``item`` at ``step``."""
        words = self.words
        if step in ("characters", "scenarios"):
            return [words(self.typical[step[:-1]])] * count
        if step in ("query", "rewrite"):
            low, high = item.band or (5, 9)
            middle = (low + high) / 2 if high is not None else low + 10
            return words(self.typical.get("query") or middle)
        length = self.typical.get("negative") or len(WORDS.findall(item.document))
        # Each ends in its id: the judge's estimate sees distinct documents, as a run's are.
        return [
            {
                "title": words(self.typical["title"]),
                "text": f"{words(length - 1)} {NEGATIVE_PREFIX}{item.doc_id}-{n}",
            }
            for n in range(count)
        ]


def estimate(
    corpus: pd.DataFrame,
    spec: dict,
    prompts: Prompts,
    client: LLMClient,
    count_tokens=None,
    tokenizer=None,
    positives: set[str] | None = None,
    typical: dict | None = None,
    quality_control: dict[str, dict] | None = None,
) -> dict:
    """What generating ``spec`` would ask of the model, without asking (see the module):
    requests and tokens by step, the answers the cache already holds, and the most requests
    and completion tokens that re-asks and ``max_tokens`` allow. ``count_tokens`` counts a
    text's tokens (default: its characters / 4, OpenAI's rule of thumb for English).
    ``quality_control`` adds the judge of each QC'd copy of the dataset, by name, over the
    queries of the splits it checks (see ``estimate_judge`` for its settings)."""
    counter = count_tokens or (lambda text: -(-len(text) // 4))
    _, items, stats = prepare(corpus, spec, tokenizer, "corpus", positives)
    dry_run = DryRun(counter, typical)
    made = Generator(prompts, client, spec, dry_run).run(items)
    ceilings = []
    if quality_control:
        from irflow.qc import checked_splits  # irflow.qc imports this module

        ids = [f"{QUERY_PREFIX}{item.doc_id}" for item in made]
        split_of = assign_splits(ids, spec.get("dev_share", 0.0), spec["seed"])
        for name, qc in sorted(quality_control.items()):
            splits = checked_splits(qc)
            checked = [item for item, i in zip(made, ids) if split_of[i] in splits]
            ceilings.append(estimate_judge(dry_run, client, checked, name, qc))
    steps = {step: dict(tally) for step, tally in dry_run.steps.items()}
    total = sum((t for s, t in dry_run.steps.items() if s not in ceilings), Counter())
    most = total["requests"] + sum(dry_run.steps[s]["requests"] for s in ceilings)
    settings = client.settings
    return {
        "model": settings["model"],
        "documents": len(items),
        "sample": stats["sample"],
        "requests": total["requests"],
        "prompt_tokens": total["prompt_tokens"],
        "completion_tokens": total["completion_tokens"],
        "cached": total["cached"],
        "max_requests": most * (1 + int(settings["reasks"])),
        "max_completion_tokens": most * (1 + int(settings["reasks"])) * int(settings["max_tokens"]),
        "by_step": {step: {k: steps[step].get(k, 0) for k in ESTIMATE_KEYS} for step in steps},
        # Steps counted at their most (in max_requests, not in requests): what the judge
        # rates after the positives depends on the rerankers' votes.
        "at_most": ceilings,
        "assumed_words": dry_run.typical,
        "counted_with": "count_tokens" if count_tokens else "characters / 4",
    }


def estimate_judge(dry_run: DryRun, client: LLMClient, made: list[_Item], name: str, qc: dict):
    """Counts the quality-control judge of the QC'd copy ``name`` over the generated queries
    (``made``), with the requests ``qc["judge"]`` (an ``irflow.qc.Judge``) builds. Its first
    step, ``qc <name>: positives``, rates every query's own document: counted as asked. The
    second, ``qc <name>: pre-labelled`` (returned), is counted at its most: every generated
    negative, and per query as many corpus documents as the votes can pre-label (``rerankers``
    each voting for ``thresholds.corpus_document`` documents, ``needed`` votes each, at most
    ``depth``), each as long as the query's own document; no query dropped. A stand-in answer
    rates every document at the highest level, with an ``explanation`` of typical length."""
    judge = qc["judge"]
    answer = {judge.prompts.answer_key: max(judge.prompts.levels)}
    if judge.prompts.explanation_key:
        answer[judge.prompts.explanation_key] = dry_run.words(dry_run.typical["explanation"])
    requests = judge.requests([(item.values["query"], item.document) for item in made])
    dry_run.count(client, f"qc {name}: positives", requests, [answer] * len(requests))
    step = f"qc {name}: pre-labelled"
    negatives = [
        (item.values["query"], contracts.document_text(n["title"], n["text"]))
        for item in made
        for n in item.values["negatives"]
    ]
    dry_run.count(client, step, judge.requests(negatives), [answer] * len(negatives))
    votes = qc["rerankers"] * qc["thresholds"]["corpus_document"]
    documents = min(votes // qc["needed"], qc["depth"])
    tally = dry_run.steps[step]
    for request in requests:
        tally["requests"] += documents
        tally["prompt_tokens"] += documents * dry_run.prompt_tokens(request)
        tally["completion_tokens"] += documents * dry_run.count_tokens(json.dumps(answer))
    return step


def prepare(
    corpus: pd.DataFrame,
    spec: dict,
    tokenizer=None,
    corpus_path: str | Path = "corpus",
    positives: set[str] | None = None,
) -> tuple[pd.DataFrame, list[_Item], dict]:
    """The (chunked) corpus, the sampled documents as items, and the statistics so far.
    ``positives`` (the source dataset's judged-relevant doc_ids) is needed with
    ``sample_from: positives``."""
    stats: dict = {}
    if spec.get("chunk_tokens"):
        corpus, stats["chunking"] = chunk_corpus(
            corpus, spec["chunk_tokens"], spec["overlap"], tokenizer
        )
        sources = corpus.pop("source_doc_id")
    else:
        sources = corpus["doc_id"]
    corpus = corpus.reset_index(drop=True)
    duplicated = corpus["doc_id"][corpus["doc_id"].duplicated()]
    if len(duplicated):
        raise InputError(corpus_path, f"doc_id {duplicated.iat[0]!r} occurs twice", field="doc_id")
    eligible = None
    if spec.get("sample_from", "corpus") == "positives":
        if positives is None:
            raise ValueError("sample_from: positives needs the source dataset's positives")
        eligible = sources.isin(positives).to_numpy()
    rows, stats["sample"] = sample_documents(
        corpus,
        spec["documents"],
        spec["seed"],
        spec.get("stratify"),
        spec["min_words"],
        tokenizer,
        max_words=spec.get("max_words"),
        personal=spec.get("personal_data") or (),
        eligible=eligible,
    )
    items = []
    for row in rows:
        doc_id = corpus["doc_id"].iat[row]
        document = contracts.document_text(corpus["title"].iat[row], corpus["text"].iat[row])
        values = {"document": document, "language": spec["language"]}
        items.append(_Item(doc_id, document, document_rng(spec["seed"], doc_id), values, []))
    return corpus, items, stats


def judged_positives(qrels_path: str | Path) -> set[str]:
    """The doc_ids a qrels table judges relevant (relevance >= 1): ``sample_from: positives``."""
    qrels = pd.read_parquet(qrels_path, columns=["doc_id", "relevance"])
    return set(qrels.loc[qrels["relevance"] >= 1, "doc_id"])


def assign_splits(query_ids: list[str], dev_share: float, seed: int) -> dict[str, str]:
    """Each query's split: the first ``round(dev_share * len(query_ids))`` in the order of a
    hash of the seed and the query_id are ``dev``, the others ``test``."""
    order = sorted(query_ids, key=lambda q: _order_key(seed, f"split\0{q}"))
    dev = round(dev_share * len(order))
    return {q: ("dev" if rank < dev else "test") for rank, q in enumerate(order)}


def generate_dataset(
    corpus: pd.DataFrame,
    spec: dict,
    prompts: Prompts,
    client: LLMClient,
    tokenizer=None,
    corpus_path: str | Path = "corpus",
    positives: set[str] | None = None,
) -> Generated:
    """The generated dataset from a source corpus (the contract's corpus table); see
    ``prepare`` for ``positives``."""
    corpus, items, stats = prepare(corpus, spec, tokenizer, corpus_path, positives)
    generator = Generator(prompts, client, spec)
    made = generator.run(items)
    splits = assign_splits(
        [f"{QUERY_PREFIX}{item.doc_id}" for item in made],
        spec.get("dev_share", 0.0),
        spec["seed"],
    )

    known = set(corpus["doc_id"])
    queries, qrels, negatives, generation, new_docs = [], [], [], [], []
    for item in made:
        query_id = f"{QUERY_PREFIX}{item.doc_id}"
        queries.append({"query_id": query_id, "text": item.values["query"]})
        qrels.append(_qrel(query_id, item.doc_id, 1))
        for number, document in enumerate(item.values["negatives"]):
            doc_id = f"{NEGATIVE_PREFIX}{item.doc_id}-{number}"
            if doc_id in known:
                raise InputError(
                    corpus_path,
                    f"doc_id {doc_id!r} is the id a generated hard negative needs; rename it",
                    field="doc_id",
                )
            known.add(doc_id)
            new_docs.append({"doc_id": doc_id} | document)
            qrels.append(_qrel(query_id, doc_id, 0))
            negatives.append(
                {
                    "doc_id": doc_id,
                    "query_id": query_id,
                    "source_doc_id": item.doc_id,
                    "number": number,
                }
            )
        generation.append(
            {
                "query_id": query_id,
                "doc_id": item.doc_id,
                **{key: item.values[key] for key in ("character", "scenario", *ATTRIBUTES)},
                "first_query": item.rewrites[0],
                "rewrites": item.rewrites[1:],
                "query": item.values["query"],
                "first_query_overlap": word_overlap(item.rewrites[0], item.document),
                "query_overlap": word_overlap(item.values["query"], item.document),
                "negatives_requested": item.negatives_requested,
                "negatives": len(item.values["negatives"]),
                "split": splits[query_id],
            }
        )
    dropped = pd.DataFrame(generator.dropped, columns=list(EXTRA_SCHEMAS["dropped"]))
    for (step, reason), group in dropped.groupby(["step", "reason"]):
        log.warning(
            "dropped %d of %d documents at step %s: %s (e.g. %s: %s)",
            len(group),
            len(items),
            step,
            reason,
            group["doc_id"].iat[0],
            group["detail"].iat[0],
        )
    # Past llm.max_dropped_share the job fails: a smaller dataset must not pass silently.
    client.check_dropped()
    overlap = pd.DataFrame(generation, columns=list(EXTRA_SCHEMAS["generation"]))
    stats |= {
        # Mean share of a query's words found in its document, before and after the rewrites.
        "word_overlap": {
            "first_query": round(float(overlap["first_query_overlap"].mean()), 4)
            if len(overlap)
            else None,
            "query": round(float(overlap["query_overlap"].mean()), 4) if len(overlap) else None,
        },
        "queries": len(queries),
        "queries_by_split": {split: sum(s == split for s in splits.values()) for split in SPLITS},
        "scored_split": spec.get("split", "test"),
        "negatives": len(negatives),
        "corpus": len(corpus) + len(new_docs),
        "dropped": len(dropped),
        "dropped_by_step_and_reason": {
            f"{step}/{reason}": int(n)
            for (step, reason), n in dropped.groupby(["step", "reason"]).size().items()
        },
    }
    return Generated(
        corpus=pd.concat(
            [corpus, pd.DataFrame(new_docs, columns=["doc_id", "title", "text"])],
            ignore_index=True,
        ),
        queries=pd.DataFrame(queries, columns=["query_id", "text"]),
        qrels=pd.DataFrame(qrels, columns=contracts.QRELS.names),
        negatives=pd.DataFrame(negatives, columns=list(EXTRA_SCHEMAS["negatives"])),
        generation=pd.DataFrame(generation, columns=list(EXTRA_SCHEMAS["generation"])),
        dropped=dropped,
        stats=stats,
    )


def _qrel(query_id: str, doc_id: str, relevance: int) -> dict:
    return {
        "query_id": query_id,
        "doc_id": doc_id,
        "relevance": relevance,
        "span_start": None,
        "span_end": None,
    }


def extra_schema(name: str):
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "int32": pa.int32(),
        "double": pa.float64(),
        "list<string>": pa.list_(pa.string()),
    }
    return pa.schema([(column, types[kind]) for column, kind in EXTRA_SCHEMAS[name].items()])


def write_generated(
    generated: Generated, folder: str | Path, split: str = "test"
) -> dict[str, Path]:
    """Write the dataset's tables under ``folder`` (``qrels.parquet``: the judgements of the
    scored ``split``; ``qrels/<split>.parquet``: each split's) and the extra tables under
    ``folder/generation``; returns the paths by table name (``qrels_dev``, ``qrels_test``)."""
    folder = Path(folder)
    paths = {}
    for name, schema in (("corpus", contracts.CORPUS), ("queries", contracts.QUERIES)):
        paths[name] = folder / f"{name}.parquet"
        contracts.write_frame(getattr(generated, name), paths[name], schema)
    split_of = dict(zip(generated.generation["query_id"], generated.generation["split"]))
    in_split = generated.qrels["query_id"].map(split_of)
    for name in SPLITS:
        paths[f"qrels_{name}"] = folder / "qrels" / f"{name}.parquet"
        rows = generated.qrels[in_split == name]
        contracts.write_frame(rows, paths[f"qrels_{name}"], contracts.QRELS)
    paths["qrels"] = folder / "qrels.parquet"
    contracts.write_frame(generated.qrels[in_split == split], paths["qrels"], contracts.QRELS)
    for name in EXTRA_SCHEMAS:
        paths[name] = folder / "generation" / f"{name}.parquet"
        contracts.write_frame(getattr(generated, name), paths[name], extra_schema(name))
    return paths


def content_checksum(paths: list[Path]) -> str:
    """MD5 over the written tables' contents: a generated dataset is what the model wrote, so
    its checksum is of its content, not of the settings."""
    import pyarrow.parquet as pq

    digest = hashlib.md5()
    for path in paths:
        table = pq.read_table(path)
        for batch in table.to_batches():
            for column in batch.columns:
                digest.update(repr(column.to_pylist()).encode())
    return digest.hexdigest()
