"""expand: document expansion (docT5query, doc2query--): each document's text is followed by
queries generated for it, and the expanded corpus is an ordinary dataset beside its base (same
queries and qrels), so BM25 on it is a system like any other.

The queries come from one of two writers:
- a sequence-to-sequence model, as docT5query (Nogueira & Lin, 2019): ``queries`` queries
  sampled per document from the document's text (title, a space, text), truncated to
  ``max_length`` tokens, with top-k sampling (docTTTTTquery's README: T5 decoding with
  ``sampling_keep_top_k = 10``, "40 concatenated samples" per passage) and, with ``top_p``
  below 1, nucleus sampling within those k (BEIR's docT5query example calls its
  ``QGenModel.generate`` with ``top_k=10, top_p=0.95, max_length=64``). Each batch of
  ``batch_size`` documents is sampled with a seed made of ``seed`` and its first row, so a
  rerun with the same settings and batch size writes the same corpus, and so does a resumed
  one. The batches are written as parts (``irflow.encoding.embed``'s parts: named by their rows, in
  ``<output>.parts/`` under a key of the settings, the model's revision or file hash and the
  input file), so a killed expansion resumes from its finished batches;
- the ``llm`` client that the generate stage uses (``irflow.derived.llm``: the same endpoint
  settings, answer cache, retries, redaction and ``max_dropped_share`` failure), asked once per
  document for a JSON list of ``queries`` queries. A document whose request is dropped keeps its
  text unexpanded; the count goes to the statistics, and past ``llm.max_dropped_share`` the job
  fails.

doc2query--'s filter (Gospodinov, MacAvaney & Macdonald, ECIR 2023), when configured: a
cross-encoder scores every generated query against the text it was generated from, and the
queries scoring below the ``drop_share`` percentile of all the corpus's scores are dropped (the
authors' code keeps a score equal to the threshold, ``numpy.percentile``'s linear
interpolation).

A killed ``llm`` expansion resumes through the answer cache: a rerun asks nothing it has been
answered before. The filter's scores are computed again.
"""

from __future__ import annotations

import functools
import logging
import string
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from irflow.core import contracts
from irflow.core.config import derived_dataset_problems, missing_key, register_check
from irflow.core.errors import ConfigError
from irflow.core.fingerprint import file_md5, value_md5
from irflow.core.settings_types import Llm, Model
from irflow.derived.generate.estimate import DryRun, characters_over_four
from irflow.derived.llm.client import LLMClient
from irflow.derived.llm.messages import Request
from irflow.derived.llm.prompts import fence
from irflow.encoding.models import pick_device, resolve_model, titled_texts
from irflow.encoding.parts import encode_missing, finished_parts, prepare_parts
from irflow.retrieval.rerankers import types_with, with_capability

log = logging.getLogger(__name__)

PART_TYPE = pa.list_(pa.string())  # a part's "queries" column: each document's queries
# In the corpus checksum and the parts' key: corpora sampled under another seeding differ.
SAMPLING = "seed and first row per batch"
# The dry-run estimate's stand-in query, in words (MS MARCO's queries average about six).
TYPICAL_QUERY_WORDS = 6


@dataclass
class QueryGenerator:
    """A transformers sequence-to-sequence model with its tokenizer and ``expand`` settings:
    ``entry``, the block's ``model`` part as the config writes it (the parts' key hashes it),
    typed once here as ``spec`` (irflow.core.settings_types.Model)."""

    model: object
    tokenizer: object
    entry: dict
    provenance: dict
    spec: Model = field(init=False)

    def __post_init__(self):
        self.spec = Model.model_validate(self.entry)

    @classmethod
    def load(cls, entry: dict) -> QueryGenerator:
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        spec = Model.model_validate(entry)
        path, provenance = resolve_model(entry)
        device = pick_device(spec.device)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSeq2SeqLM.from_pretrained(path, dtype=getattr(torch, spec.dtype))
        model.to(device).eval()
        return cls(model, tokenizer, entry, provenance | {"device": device})

    def generate(self, texts: list[str], first_row: int) -> list[list[str]]:
        """``queries`` sampled queries per text, in order, for the batch of texts that starts
        at row ``first_row`` of the corpus (which seeds the sampling with ``seed``)."""
        import torch

        torch.manual_seed(int(value_md5([self.spec.seed, first_row])[:8], 16))
        inputs = self.tokenizer(
            texts,
            truncation=True,
            max_length=self.spec.max_length,
            padding=True,
            return_tensors="pt",
        ).to(self.model.device)
        with torch.inference_mode():
            outputs = self.model.generate(
                input_ids=inputs["input_ids"],
                attention_mask=inputs["attention_mask"],
                do_sample=True,
                top_k=self.spec.top_k,
                top_p=self.spec.top_p,
                max_new_tokens=self.spec.max_new_tokens,
                num_return_sequences=self.spec.queries,
            )
        decoded = self.tokenizer.batch_decode(outputs, skip_special_tokens=True)
        n = self.spec.queries
        return [decoded[i * n : (i + 1) * n] for i in range(len(texts))]

    def generate_all(self, texts: list[str]) -> list[list[str]]:
        """Every text's queries, batch after batch in corpus order."""
        size = self.spec.batch_size
        return [
            queries
            for start in range(0, len(texts), size)
            for queries in self.generate(texts[start : start + size], start)
        ]

    def generate_file(self, corpus_path: Path, parts: Path) -> list[list[str]]:
        """``generate_all`` of a corpus Parquet file, through parts in ``parts``: the batches
        that a killed run finished are read back, not sampled again. The caller deletes
        ``parts`` once the result is written."""
        corpus_path = Path(corpus_path)
        settings = {key: value for key, value in self.entry.items() if key != "device"}
        identity = {k: v for k, v in self.provenance.items() if k in ("revision", "files_md5")}
        prepare_parts(parts, value_md5([SAMPLING, settings, identity, file_md5(corpus_path)]))
        source = contracts.ParquetFile(corpus_path)

        def write_part(rows: pa.RecordBatch, start: int, end: int, part: Path) -> None:
            queries = self.generate(titled_texts(rows, "doc_id")[1], start)
            contracts.write_table(pa.table({"queries": pa.array(queries, PART_TYPE)}), part)

        size = self.spec.batch_size
        done = encode_missing(
            source, 0, source.metadata.num_rows, parts, size, "expand", encode_part=write_part
        )
        if done < source.metadata.num_rows:
            log.info(
                "resumed: %d of %d documents had their queries",
                source.metadata.num_rows - done,
                source.metadata.num_rows,
            )
        return [
            queries
            for _, _, path in finished_parts(parts)
            for queries in contracts.read_table(path).column("queries").to_pylist()
        ]


def usable_queries(data) -> list[str]:
    """The non-empty query strings of an answer's "queries" list, stripped."""
    queries = data.get("queries") if isinstance(data, dict) else None
    if not isinstance(queries, list):
        return []
    return [q.strip() for q in queries if isinstance(q, str) and q.strip()]


def queries_problem(n: int, data) -> str | None:
    """None when an answer holds at least ``n`` usable queries, else what is wrong."""
    usable = usable_queries(data)
    if len(usable) < n:
        return f'{len(usable)} non-empty strings in the answer\'s "queries" list, {n} asked for'
    return None


@dataclass
class LLMQueryWriter:
    """Queries asked of the ``llm`` endpoint, one request per document; ``entry`` is the
    ``expand`` block's ``llm`` part (``queries``, ``system``, ``user``), typed once here as
    ``spec`` (irflow.core.settings_types.Llm)."""

    client: LLMClient
    entry: dict
    name: str = "expand"
    spec: Llm = field(init=False)

    def __post_init__(self):
        self.spec = Llm.model_validate(self.entry)
        for part in ("system", "user"):
            try:
                string.Template(getattr(self.spec, part)).substitute(document="", queries=1)
            except (KeyError, ValueError) as error:
                raise ConfigError(
                    f"config key 'expand.{self.name}.llm.{part}': the template may hold only "
                    f"$document and $queries placeholders ({error!r})"
                ) from None

    def messages(self, text: str) -> list[dict]:
        values = {"document": fence(self.client.document(text)), "queries": self.spec.queries}
        templates = {"system": self.spec.system, "user": self.spec.user}
        return [
            {"role": role, "content": string.Template(template).substitute(values)}
            for role, template in templates.items()
            if template
        ]

    def requests(self, texts: list[str]) -> list[Request]:
        """One request per text: what ``generate_all`` sends and ``estimate_expansion`` counts."""
        check = functools.partial(queries_problem, self.spec.queries)  # identical ones merge
        return [Request(self.messages(text), check=check) for text in texts]

    def generate_all(self, texts: list[str]) -> list[list[str]]:
        """Every text's first ``queries`` queries; none for a dropped request."""
        n = self.spec.queries
        answers = self.client.complete(self.requests(texts), desc="expand")
        self.client.check_dropped()
        return [usable_queries(answer.data)[:n] if answer.ok else [] for answer in answers]


def estimate_expansion(corpus: pd.DataFrame, writer: LLMQueryWriter) -> dict:
    """What expanding ``corpus`` with the llm ``writer`` would ask of the model, without
    asking: generate's dry run (``irflow.derived.generate.estimate``) over one request per
    document, a stand-in answer of ``queries`` queries of ``TYPICAL_QUERY_WORDS`` words each;
    tokens counted as characters / 4; ``max_requests`` counts every re-ask."""
    texts = contracts.document_texts(corpus["title"].tolist(), corpus["text"].tolist())
    dry_run = DryRun(characters_over_four)
    stand_in = {"queries": [dry_run.words(TYPICAL_QUERY_WORDS)] * writer.spec.queries}
    requests = writer.requests(texts)
    dry_run.count(writer.client, "expand", requests, [stand_in] * len(texts))
    tally = dry_run.steps["expand"]
    settings = writer.client.settings
    most = tally["requests"] * (1 + settings.reasks)
    return {
        "model": settings.model,
        "documents": len(texts),
        "requests": tally["requests"],
        "prompt_tokens": tally["prompt_tokens"],
        "completion_tokens": tally["completion_tokens"],
        "cached": tally["cached"],
        "max_requests": most,
        "max_completion_tokens": most * settings.max_tokens,
        "documents_cut": len(writer.client.cut_documents),
        "assumed_words": {"query": TYPICAL_QUERY_WORDS},
        "counted_with": "characters / 4",
    }


def score_queries(scorer, texts: list[str], generated: list[list[str]]) -> list[np.ndarray]:
    """Each generated query's score against the text it was generated from (``scorer``: a
    ``irflow.retrieval.rerank.CrossEncoderScorer``), as one array per text."""
    pairs = [(query, text) for text, queries in zip(texts, generated) for query in queries]
    scores = scorer.score_pairs(pairs) if pairs else np.empty(0)
    bounds = np.cumsum([0, *(len(queries) for queries in generated)])
    return [scores[start:end] for start, end in zip(bounds[:-1], bounds[1:])]


def drop_low_scores(
    generated: list[list[str]], scores: list[np.ndarray], drop_share: float
) -> tuple[list[list[str]], float | None]:
    """The queries scoring at least the ``drop_share`` percentile of all the scores, and that
    threshold (None without any query)."""
    every = np.concatenate(scores) if scores else np.empty(0)
    if not len(every):
        return generated, None
    threshold = float(np.percentile(every, 100 * drop_share))
    kept = [
        [query for query, score in zip(queries, s) if score >= threshold]
        for queries, s in zip(generated, scores)
    ]
    return kept, threshold


def expand_corpus(
    corpus: pd.DataFrame,
    writer,
    scorer=None,
    drop_share: float = 0.0,
    generated: list[list[str]] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """The corpus with each document's generated queries appended to its text (one space
    between), and statistics of what was added. ``writer`` is a ``QueryGenerator`` or an
    ``LLMQueryWriter``, asked unless ``generated`` gives the queries already (a
    ``QueryGenerator.generate_file``'s); with a ``scorer``, doc2query--'s filter drops the
    lowest-scoring ``drop_share`` of the queries."""
    texts = contracts.document_texts(corpus["title"].tolist(), corpus["text"].tolist())
    if generated is None:
        generated = writer.generate_all(texts)
    stats = {
        "documents": len(corpus),
        "queries_per_document": writer.spec.queries,
        "generated_queries": sum(len(queries) for queries in generated),
        "documents_without_queries": sum(not queries for queries in generated),
    }
    if scorer is not None:
        generated, threshold = drop_low_scores(
            generated, score_queries(scorer, texts, generated), drop_share
        )
        stats["filter"] = {"drop_share": drop_share, "threshold": threshold}
    stats["kept_queries"] = sum(len(queries) for queries in generated)
    expanded = corpus.copy()
    expanded["text"] = [
        " ".join([text, *queries]) for text, queries in zip(corpus["text"], generated)
    ]
    words = [sum(len(query.split()) for query in queries) for queries in generated]
    stats["words_added_per_document"] = sum(words) / max(len(words), 1)
    return expanded, stats


@register_check
def _expansion_problems(config: dict) -> list[str]:
    """The expand blocks: a known base dataset, a name no other dataset has, a cross-encoder
    as the filter, and a model for the llm to ask."""
    problems = derived_dataset_problems(config, "expand")
    rerankers = config["rerankers"]
    for name, spec in config["expand"].items():
        reranker = spec.get("filter", {}).get("reranker")
        if reranker is not None and reranker not in rerankers:
            path = f"expand.{name}.filter.reranker"
            problems.append(missing_key(path, reranker, "rerankers", rerankers))
        elif reranker is not None and reranker not in with_capability(config, "filters_expansions"):
            problems.append(
                f"config key 'expand.{name}.filter.reranker': {reranker!r} is a "
                f"{rerankers[reranker]['type']} reranker; the filter needs a "
                + types_with("filters_expansions")
            )
        if "llm" in spec and not config["llm"]["model"]:
            problems.append(
                f"config key 'llm.model': needed by 'expand.{name}.llm'; name the model to ask"
            )
    return problems
