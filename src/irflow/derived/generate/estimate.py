"""estimate: what generating a dataset (and judging its QC'd copies) would ask of the model, walked
over the answer cache without sending anything."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

from irflow.core import contracts
from irflow.derived.generate.dataset import NEGATIVE_PREFIX, QUERY_PREFIX, checked_splits
from irflow.derived.generate.generator import Generator, Item, prepare, typed_generate
from irflow.derived.generate.prompts import Prompts
from irflow.derived.generate.sampling import WORDS, assign_splits
from irflow.derived.llm.client import LLMClient
from irflow.derived.llm.messages import Answer, Request

# What the model is assumed to write, in words, where a dry run needs a stand-in answer: a
# character, a scenario, a hard negative's title; a query is as long as its drawn band (its
# middle, or the least + 10 for an open band) and a hard negative as long as its document (the
# prompt asks so), unless ``query`` or ``negative`` is given.
TYPICAL_WORDS = {"character": 8, "scenario": 30, "title": 8, "explanation": 20}


def characters_over_four(text: str) -> int:
    """A text's tokens as OpenAI's rule of thumb for English counts them: characters / 4."""
    return -(-len(text) // 4)


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
        items: list[Item],
        counts: list,
        requests: list[Request],
    ) -> list[Answer]:
        stand_ins = [{key: self.stand_in(step, i, c)} for i, c in zip(items, counts)]
        return self.count(client, step, requests, stand_ins)

    def count(
        self, client: LLMClient, step: str, requests: list[Request], stand_ins: list
    ) -> list[Answer]:
        """Each request's cached answer, else its stand-in answer (``stand_ins``, the parsed
        JSON), counted under ``step`` as cached or as asked."""
        tally = self.steps.setdefault(step, Counter())
        client.preload(requests)
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

    def stand_in(self, step: str, item: Item, count: int | None):
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
    *,
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
    counter = count_tokens or characters_over_four
    generate = typed_generate(spec)
    _, items, stats = prepare(corpus, generate, tokenizer, "corpus", positives)
    dry_run = DryRun(counter, typical)
    made = Generator(prompts, client, generate, dry_run).run(items)
    ceilings = []
    if quality_control:
        ids = [f"{QUERY_PREFIX}{item.doc_id}" for item in made]
        split_of = assign_splits(ids, generate.dev_share, generate.seed)
        for name, qc in sorted(quality_control.items()):
            splits = checked_splits(qc)
            checked = [item for item, i in zip(made, ids) if split_of[i] in splits]
            ceilings.append(estimate_judge(dry_run, client, checked, name, qc))
    steps = {step: dict(tally) for step, tally in dry_run.steps.items()}
    total = sum((t for s, t in dry_run.steps.items() if s not in ceilings), Counter())
    most = total["requests"] + sum(dry_run.steps[s]["requests"] for s in ceilings)
    settings = client.settings
    return {
        "model": settings.model,
        "documents": len(items),
        "sample": stats["sample"],
        "requests": total["requests"],
        "prompt_tokens": total["prompt_tokens"],
        "completion_tokens": total["completion_tokens"],
        "cached": total["cached"],
        "max_requests": most * (1 + settings.reasks),
        "max_completion_tokens": most * (1 + settings.reasks) * settings.max_tokens,
        "by_step": {step: {k: steps[step].get(k, 0) for k in ESTIMATE_KEYS} for step in steps},
        # Steps counted at their most (in max_requests, not in requests): what the judge
        # rates after the positives depends on the rerankers' votes.
        "at_most": ceilings,
        "assumed_words": dry_run.typical,
        "counted_with": "count_tokens" if count_tokens else "characters / 4",
    }


def estimate_judge(dry_run: DryRun, client: LLMClient, made: list[Item], name: str, qc: dict):
    """Counts the quality-control judge of the QC'd copy ``name`` over the generated queries
    (``made``), with the requests ``qc["judge"]`` (an ``irflow.derived.qc.judge.Judge``) builds. Its
    first step, ``qc <name>: positives``, rates every query's own document: counted as asked. The
    second, ``qc <name>: pre-labelled`` (returned), is counted at its most: every generated
    negative, and per query as many corpus documents as the votes can pre-label (``rerankers``
    each voting for ``thresholds.corpus_document`` documents, ``needed`` votes each, at most
    ``depth``), each as long as the query's own document; no query dropped. A stand-in answer
    rates every document at the highest level, with an ``explanation`` of typical length."""
    judge = qc["judge"]
    top = max(judge.prompts.levels)
    answer = top if judge.prompts.answer_key is None else {judge.prompts.answer_key: top}
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
