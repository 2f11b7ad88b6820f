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
- Long documents are cut first (``chunk_tokens``, ``overlap``; AIR-Bench: 200 and 50), a
  Long-Doc dataset: "we use the node parser [...] tool from LlamaIndex [...] to split the long
  document into fixed-size chunks" (airbench.txt, line 260), "chunk_size=200, chunk_overlap=50"
  (airbench.txt, line 260). ``chunker: llamaindex`` (the default) is that parser,
  ``SimpleNodeParser`` (LlamaIndex's SentenceSplitter), which keeps sentences whole where a
  chunk holds them; it counts in LlamaIndex's default tokenizer (tiktoken's cl100k_base) unless
  a ``tokenizer`` is named, or in words with ``chunk_unit: words``. ``chunker: windows``, a
  named variant (irflow's before issue 50), cuts fixed windows as ``irflow.data.passages``
  does, wherever they end, counted in the ``tokenizer``'s tokens (``AIRBENCH_TOKENIZER``, a
  Hugging Face copy of cl100k_base, when none is named) or words. A document with more than
  one chunk is replaced by its chunks, ``<doc_id>#<n>``, each keeping the title; a shorter one
  is kept as it is. The chunks are the corpus that is sampled from and evaluated.
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
- Long-Doc gets no hard negatives: AIR-Bench (Chen et al., 2024) on Long-Doc: "we do not
  generate additional hard negatives" (its 24.05 Long-Doc datasets list 0 each); QA asks for
  3 to 7 ("Let the LLM generate 3~7 hard negatives", its README). ``negatives`` set in the
  config wins (a named variant).
- Every random choice for a document (which character, which scenario, the query attributes,
  how many negatives between ``negatives[0]`` and ``negatives[1]``) comes from a generator
  seeded by the seed and the doc_id only, so a document's prompts never depend on the others.
- A step's answer must be a JSON object with the step's ``answer_key``: a non-empty list of
  strings (characters, scenarios), a non-empty string (query, rewritten query), or a list of
  at least ``negatives[0]`` documents (strings, or objects with a ``text`` and an optional
  ``title``), of which at most the requested number are kept. Any other answer is re-asked by
  the client (see ``irflow.derived.llm``); a document whose answer is still unusable is dropped with
  the client's reason.
- Ids: query ``gen-q-<doc_id>``, hard negative ``gen-neg-<doc_id>-<n>``. An id that already
  names a corpus document is an error, never a silent overwrite.
- The corpus is the whole (chunked) source corpus, then the hard negatives in query order.
  qrels give relevance 1 to the source document and 0 to the query's own hard negatives, as
  AIR-Bench labels them.
- Splits: the queries are ordered by a hash of the seed and query_id, and the first
  ``round(dev_share * queries)`` are ``dev``, the others ``test`` (``generation.split``).
  ``dev_share`` defaults to AIR-Bench's: its QA datasets are split into dev and test at 1:4
  (0.2; 24.05's wiki/en holds 345 dev and 1,382 test queries); a Long-Doc dataset is dev or
  test as a whole (0: all test).
  ``qrels/dev.parquet`` and ``qrels/test.parquet`` hold each split's judgements and
  ``qrels.parquet`` the one named by ``split`` (test by default), which the workflow scores.
  ``queries.parquet`` holds every query, as a BEIR folder does.
- ``estimate`` is a dry run: it samples as a run does and walks the steps over the answer cache,
  sending nothing. An answer the cache holds is used; a request it lacks is counted (its prompt
  tokens, and as completion a stand-in answer of the lengths in ``TYPICAL_WORDS``: the length a
  prompt asks for, or an assumption), and the stand-in feeds the next step's prompt. So a fully
  cached config estimates 0 requests, and a widened sample only the new documents. Re-asks are
  not foreseen: ``max_requests`` allows every request its ``reasks``. The quality-control
  judge of each QC'd copy is counted with the requests ``irflow.derived.qc.judge.Judge`` builds:
  every query's positive as asked, the pre-labelled documents at their most (``estimate_judge``).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from irflow.core import contracts
from irflow.core.config import derived_dataset_problems, register_check
from irflow.core.errors import InputError
from irflow.core.seeds import seeded_names
from irflow.core.settings_types import Generate
from irflow.derived.generate.generator import (
    Generator,
    long_doc,
    prepare,
    typed_generate,
    with_task_defaults,
)
from irflow.derived.generate.prompts import ATTRIBUTES, Prompts
from irflow.derived.generate.sampling import assign_splits, word_overlap
from irflow.derived.llm.client import LLMClient

log = logging.getLogger(__name__)


SPLITS = ("dev", "test")
QUERY_PREFIX = "gen-q-"
NEGATIVE_PREFIX = "gen-neg-"


# --- config -----------------------------------------------------------------------------------


def list_generated(config: dict) -> dict[str, dict]:
    """Every dataset the ``generate`` block defines, by name, with its settings: one per seed
    of its ``seed`` (irflow.core.seeds.seeded_names), each with that one seed; a seed's copy
    of a Long-Doc dev dataset is dev too. A block of an unknown base dataset is left out: the
    config check names it (``_generate_problems``)."""
    generated, dev_of_domain = {}, {}
    for name, spec in sorted(config.get("generate", {}).items()):
        if spec["dataset"] not in config["datasets"]:
            continue
        domain = spec.get("domain")
        if long_doc(spec) and domain and spec.get("dev_share") is None:
            # "For Long-Doc task, we select one dataset as the dev set for each domain, and
            # remain other datasets as the test set." (airbench.txt, line 295): the first of
            # its domain by name is dev as a whole, the others test.
            if dev_of_domain.setdefault(domain, name) == name:
                spec = spec | {"dev_share": 1.0, "split": "dev"}
        spec = with_task_defaults(spec)
        for copy, seed in seeded_names(name, spec["seed"]).items():
            generated[copy] = spec | {"seed": seed}
    return generated


def seeded_generated(config: dict) -> dict[str, dict[str, int]]:
    """Per ``generate`` key, its datasets and their seeds (irflow.core.seeds.seeded_names)."""
    return {name: seeded_names(name, spec["seed"]) for name, spec in config["generate"].items()}


def checked_splits(spec: dict) -> list[str]:
    """The splits a QC'd copy checks: its ``splits``, or every split the generation wrote."""
    return list(spec.get("splits") or SPLITS)


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


def judged_positives(qrels_path: str | Path) -> set[str]:
    """The doc_ids a qrels table judges relevant (relevance >= 1): ``sample_from: positives``."""
    qrels = contracts.read_frame(qrels_path, columns=["doc_id", "relevance"])
    return set(qrels.loc[qrels["relevance"] >= 1, "doc_id"])


def generate_dataset(
    corpus: pd.DataFrame,
    spec: dict,
    prompts: Prompts,
    client: LLMClient,
    *,
    tokenizer=None,
    corpus_path: str | Path = "corpus",
    positives: set[str] | None = None,
) -> Generated:
    """The generated dataset from a source corpus (the contract's corpus table), as the
    generate spec ``spec`` (its job's params, typed once here: ``typed_generate``) says; see
    ``prepare`` for ``positives``."""
    generate = typed_generate(spec)
    corpus, items, stats = prepare(corpus, generate, tokenizer, corpus_path, positives)
    generator = Generator(prompts, client, generate)
    made = generator.run(items)
    splits = assign_splits(
        [f"{QUERY_PREFIX}{item.doc_id}" for item in made], generate.dev_share, generate.seed
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
    dropped = pd.DataFrame(generator.dropped, columns=contracts.GENERATION_TABLES["dropped"].names)
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
    overlap = pd.DataFrame(generation, columns=contracts.GENERATION_TABLES["generation"].names)
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
        "scored_split": generate.split,
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
        negatives=pd.DataFrame(negatives, columns=contracts.GENERATION_TABLES["negatives"].names),
        generation=pd.DataFrame(
            generation, columns=contracts.GENERATION_TABLES["generation"].names
        ),
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
    for name, schema in contracts.GENERATION_TABLES.items():
        paths[name] = folder / "generation" / f"{name}.parquet"
        contracts.write_frame(getattr(generated, name), paths[name], schema)
    return paths


def content_checksum(paths: list[Path]) -> str:
    """MD5 over the written tables' contents: a generated dataset is what the model wrote, so
    its checksum is of its content, not of the settings."""

    digest = hashlib.md5()
    for path in paths:
        table = contracts.read_table(path)
        for batch in table.to_batches():
            for column in batch.columns:
                digest.update(repr(column.to_pylist()).encode())
    return digest.hexdigest()


@register_check
def _generate_problems(config: dict) -> list[str]:
    """The generate blocks: a known source dataset, a new name, a model to ask."""
    problems = derived_dataset_problems(config, "generate")
    for name, spec in config["generate"].items():
        # Typed with its task's defaults (its seeds as the config lists them).
        generate = Generate.model_validate(with_task_defaults(spec))
        low, high = (count.root for count in generate.negatives)
        if low > high:
            problems.append(
                f"config key 'generate.{name}.negatives': the least ({low}) exceeds the most "
                f"({high})"
            )
        chunk_tokens, overlap = generate.chunk_tokens, generate.overlap
        if chunk_tokens is not None and overlap >= chunk_tokens:
            problems.append(
                f"config key 'generate.{name}.overlap': {overlap} must be less than "
                f"chunk_tokens ({chunk_tokens})"
            )
        if generate.max_words is not None and generate.max_words < generate.min_words:
            problems.append(
                f"config key 'generate.{name}.max_words': {generate.max_words} is less than "
                f"min_words ({generate.min_words})"
            )
        share, split = generate.dev_share, generate.split
        if (split == "dev" and share == 0) or (split == "test" and share == 1):
            problems.append(
                f"config key 'generate.{name}.split': the {split} split is empty with "
                f"dev_share {share:g}"
            )
    if config["generate"] and not config["llm"]["model"]:
        problems.append("config key 'llm.model': needed by 'generate'; name the model to ask")
    return problems
