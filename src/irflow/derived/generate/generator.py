"""generator: the steps (characters, scenarios, query, rewrites, hard negatives) asked for every
sampled document, the query attributes drawn, and each step's answer checked."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from irflow.core import contracts
from irflow.core.errors import ConfigError, InputError
from irflow.core.settings_types import Generate
from irflow.derived.generate.prompts import ATTRIBUTES, REWRITE_ROUNDS, Prompts
from irflow.derived.generate.sampling import (
    WORDS_UNIT,
    chunk_corpus,
    document_rng,
    sample_documents,
)
from irflow.derived.llm.client import LLMClient
from irflow.derived.llm.messages import Answer, Request

# The tokenizer AIR-Bench's chunks are counted in: its repository (docs/data_generation.md)
# splits Long-Doc documents with LlamaIndex's ``SimpleNodeParser`` (``chunk_size=200``,
# ``chunk_overlap=50``), which counts tiktoken's cl100k_base (gpt-3.5-turbo) tokens by default;
# this Hugging Face copy of it gives the character offsets that cutting needs.
AIRBENCH_TOKENIZER = "Xenova/gpt-3.5-turbo"
# AIR-Bench's hard negatives per query (README: "generate 3~7 hard negatives"); none on Long-Doc.
QA_NEGATIVES = [3, 7]
# AIR-Bench's QA datasets hold dev and test queries at 1:4 (24.05's wiki/en: 345 and 1,382);
# a Long-Doc dataset is dev or test as a whole.
QA_DEV_SHARE = 0.2


def long_doc(spec: dict) -> bool:
    """Whether a generate spec builds a Long-Doc dataset (AIR-Bench's chunked corpora)."""
    return bool(spec.get("chunk_tokens"))


def with_task_defaults(spec: dict) -> dict:
    """A generate spec with AIR-Bench's defaults of its task, where the config leaves them null:
    hard negatives (3 to 7 for QA; none for Long-Doc: "we do not generate additional hard
    negatives"), the dev share (1:4 for QA, 0 for Long-Doc) and, for chunks counted in tokens,
    AIR-Bench's tokenizer. A value the config sets wins (a named variant)."""
    chunked = long_doc(spec)
    spec = dict(spec)
    if spec.get("negatives") is None:
        spec["negatives"] = [0, 0] if chunked else list(QA_NEGATIVES)
    if spec.get("dev_share") is None:
        spec["dev_share"] = 0.0 if chunked else QA_DEV_SHARE
    spec.setdefault("chunk_unit", "tokens")
    spec.setdefault("chunker", "llamaindex")
    # LlamaIndex counts in its own default tokenizer (cl100k_base, shipped in its wheel); fixed
    # windows need a Hugging Face copy of it.
    windows = spec["chunker"] == "windows"
    if chunked and windows and spec["chunk_unit"] == "tokens" and not spec.get("tokenizer"):
        spec["tokenizer"] = AIRBENCH_TOKENIZER
    return spec


def typed_generate(spec: dict) -> Generate:
    """A generate spec (one dataset's: its job's params) with its task's defaults
    (``with_task_defaults``), typed once (irflow.core.settings_types.Generate): what the
    stages below read. Its ``seed`` is one seed: a block of several is one dataset per seed."""
    generate = Generate.model_validate(with_task_defaults(spec))
    if not isinstance(generate.seed, int):
        raise ConfigError(
            f"a generate spec over {generate.dataset!r} with seed {spec.get('seed')!r}: one "
            "dataset is made under one seed (irflow.derived.generate.dataset.list_generated "
            "makes one per seed)"
        )
    return generate


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


@dataclass
class Item:
    """One sampled document on its way to a query."""

    doc_id: str
    document: str
    rng: np.random.Generator
    values: dict
    rewrites: list
    negatives_requested: int = 0
    band: tuple[int, int | None] | None = None  # the drawn query_length's words


class Answers(Protocol):
    """What answers a generator's requests in place of its client (estimate's DryRun); named
    here, not imported, so that estimate, which drives a Generator, is not imported back."""

    def answer(
        self,
        client: LLMClient,
        step: str,
        key: str,
        items: list[Item],
        counts: list,
        requests: list[Request],
    ) -> list[Answer]: ...


class Generator:
    """Runs the steps for all sampled documents, one batch of requests per step."""

    def __init__(
        self, prompts: Prompts, client: LLMClient, spec: Generate, dry_run: Answers | None = None
    ):
        self.prompts = prompts
        self.client = client
        self.spec = spec
        self.dry_run = dry_run  # set: nothing is sent (see ``estimate``)
        self.dropped: list[dict] = []

    def _ask(
        self, step: str, items: list[Item], check, count: dict | str | None = None
    ) -> list[tuple[Item, Any]]:
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
            values["document"] = self.client.document(values["document"])
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
    def _pick(item: Item, options: list) -> str:
        options = [o.strip() for o in options if isinstance(o, str) and o.strip()]
        return options[int(item.rng.integers(len(options)))]

    def run(self, items: list[Item]) -> list[Item]:
        steps = self.prompts.steps
        low, high = (count.root for count in self.spec.negatives)
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
        for _ in range(steps["rewrite"].get("rounds", REWRITE_ROUNDS)):
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

    def _draw(self, item: Item, attribute: str) -> str:
        """A weighted draw, in ``ATTRIBUTES`` order. As AIR-Bench (App. A.2.1): the query type
        first, on a Long-Doc corpus (``chunk_tokens`` set) among the types marked for it (the
        paper's Long-Doc queries are questions and claims); then the length, among the lengths
        the drawn type allows (a claim: "10 to 20" or "at least 20 words")."""
        options = self.prompts.attributes[attribute]
        if attribute == "query_type" and self.spec.chunk_tokens:
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


def prepare(
    corpus: pd.DataFrame,
    spec: Generate,
    tokenizer=None,
    corpus_path: str | Path = "corpus",
    positives: set[str] | None = None,
) -> tuple[pd.DataFrame, list[Item], dict]:
    """The (chunked) corpus, the sampled documents as items, and the statistics so far.
    ``positives`` (the source dataset's judged-relevant doc_ids) is needed with
    ``sample_from: positives``. ``spec`` is ``typed_generate``'s."""
    stats: dict = {}
    if spec.chunk_tokens:
        in_tokens = spec.chunk_unit == "tokens"
        chunker = spec.chunker
        if in_tokens and tokenizer is None and chunker == "windows":
            raise ValueError(
                "chunk_unit tokens needs the tokenizer (AIR-Bench's chunks are 200 tokens); "
                "pass it, or set chunk_unit: words"
            )
        words = WORDS_UNIT if chunker == "llamaindex" else None
        corpus, stats["chunking"] = chunk_corpus(
            corpus,
            spec.chunk_tokens,
            spec.overlap,
            tokenizer if in_tokens else words,
            chunker,
        )
        sources = corpus.pop("source_doc_id")
    else:
        sources = corpus["doc_id"]
    corpus = corpus.reset_index(drop=True)
    duplicated = corpus["doc_id"][corpus["doc_id"].duplicated()]
    if len(duplicated):
        raise InputError(corpus_path, f"doc_id {duplicated.iat[0]!r} occurs twice", field="doc_id")
    eligible = None
    if spec.sample_from == "positives":
        if positives is None:
            raise ValueError("sample_from: positives needs the source dataset's positives")
        eligible = sources.isin(positives).to_numpy()
    rows, stats["sample"] = sample_documents(
        corpus,
        spec.documents,
        spec.seed,
        spec.stratify,
        spec.min_words,
        tokenizer,
        max_words=spec.max_words,
        personal=spec.personal_data,
        eligible=eligible,
    )
    items = []
    for row in rows:
        doc_id = corpus["doc_id"].iat[row]
        document = contracts.document_text(corpus["title"].iat[row], corpus["text"].iat[row])
        values = {"document": document, "language": spec.language}
        items.append(Item(doc_id, document, document_rng(spec.seed, doc_id), values, []))
    return corpus, items, stats
