"""qc: quality control of a generated benchmark, after AIR-Bench (Chen et al., 2024, §2.4 and
App. A.3), and the machinery it shares with the label audit (``irflow.label_audit``).

Two questions about every generated query:

- *Is the query any good?* A language model (the judge) rates its positive, the document it
  was written from, on a four-level scale (``config/prompts/judge.yaml``). A positive judged
  below ``relevant_level`` means the query does not match its own document: the query is
  dropped.
- *Are its labels right?* The query's candidates (the top ``depth`` of a configured
  retriever's run, AIR-Bench: 1000 from an embedding model) are reranked by several rerankers
  (``rerankers.<name>``, cross-encoders or bi-encoders, scored by ``irflow.rerank``). Each
  reranker votes for a document it ranks within a threshold: ``generated_negative`` documents
  (the query's own generated hard negatives) within 20, ``corpus_document`` (unlabelled) ones
  within 10, by default. ``majority`` votes (by default more than half the rerankers) make a
  pre-label; the judge then rates each pre-labelled document and AIR-Bench's Table 2 decides:

  ==================  =======================================  ==========================
  kind                judged relevant                          judged not relevant
  ==================  =======================================  ==========================
  positive            keep                                     drop_query
  generated_negative  remove_document (or promote, by config)  keep
  corpus_document     add_positive                             keep
  ==================  =======================================  ==========================

  A generated negative without a pre-label is kept unjudged (the rerankers agree it is not
  relevant); an unlabelled document without one is not in the audit at all.

Decisions:
- Every decision is one audit row: query, document, kind, each reranker's rank, the votes and
  how many were needed, the pre-label, the judge's level and explanation (or why there is
  none), the action and its reason in words.
- Positives are judged first; the other documents only for the queries that survive, so a
  dropped query costs no more requests. Their rows say ``not_judged`` with the reason.
- A judgement the client had to drop (``irflow.llm``: HTTP failures that outlived the retries,
  answers still unusable after the re-asks) changes nothing: the row says ``keep`` and why, the
  manifest counts it, and the next run asks again (HTTP failures are not cached). More than
  ``llm.max_dropped_share`` of the judgements dropped fails the job (``LLMError``), so a
  dataset whose queries went unchecked never passes as quality-controlled.
- The QC'd dataset is a new dataset in the ordinary contract (``quality_control.generated``
  names it), built from the generated one's tables: dropped queries and their qrels removed,
  removed documents gone from the corpus and the qrels, promoted negatives and added positives
  at relevance 1. The generated dataset itself stays as it was, so both are evaluated.
- A generated negative removed because it answers its own query is gone for every query: a
  row that would add it as another query's positive says ``remove_document`` and why.
- The judge is asked at ``judge.temperature`` (default 0) with the ``llm`` block's other
  settings and cache: a rerun asks nothing.
- Splits: every split the generation wrote (``dev`` and ``test``; or the configured
  ``splits``, which must hold the scored one) is checked, all in one pass, each audit row
  naming its query's split; the statistics count each split on its own (``by_split``) and the
  QC'd dataset has each checked split's judgements (``Controlled.split_qrels``). A query of a
  split left out is left out of the QC'd dataset, its labels unchecked. Candidates come from
  the votes. The workflow's retriever runs only the scored split's queries, so the queries of
  another checked split are retrieved by the qc_candidates job, with the same retriever (BM25,
  or dense: its model encodes them and its index is searched), on the same filtered corpus and
  to the same ``depth`` (``irflow.retrieve.retrieve_judged``, as the negatives stage retrieves
  another split). A query the rerankers did not rank (no candidate retrieved) has only its
  positive and its own negatives in the audit, its split's ``queries_with_candidates`` counts
  the others, and the log warns.
"""

from __future__ import annotations

import logging
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irflow import contracts
from irflow.errors import InputError
from irflow.generate import SPLITS, fence, read_prompts_file

log = logging.getLogger(__name__)

KINDS = ("positive", "generated_negative", "corpus_document")
ACTIONS = (
    "keep",
    "drop_query",
    "remove_document",
    "promote",
    "add_positive",
    "not_judged",
)
JUDGE_PLACEHOLDERS = {"query", "document", "levels"}
# Retriever types that retrieve a checked split other than the scored one (retrieve_judged).
SPLIT_RETRIEVERS = ("bm25", "dense")
RANK_PREFIX = "rank_"
AUDIT_COLUMNS = [
    "dataset",
    "split",
    "query_id",
    "doc_id",
    "kind",
    "votes",
    "needed",
    "prelabel",
    "judged",
    "judge_level",
    "judge_explanation",
    "judge_error",
    "action",
    "reason",
]


# --- config -----------------------------------------------------------------------------------


def list_quality_controlled(config: dict) -> dict[str, dict]:
    """The QC'd datasets (``quality_control.generated``), by name, with their settings."""
    return {
        name: dict(spec) for name, spec in sorted(quality_settings(config)["generated"].items())
    }


def audited_datasets(config: dict) -> list[str]:
    return list(quality_settings(config)["label_audit"]["datasets"])


def quality_settings(config: dict) -> dict:
    """The ``quality_control`` block (filled in by the schema; empty when absent)."""
    block = config.get("quality_control") or {}
    return {
        "rerankers": block.get("rerankers", []),
        "majority": block.get("majority"),
        "judge": block.get("judge", {}),
        "generated": block.get("generated", {}),
        "label_audit": block.get("label_audit", {"datasets": []}),
    }


def checked_splits(spec: dict) -> list[str]:
    """The splits a QC'd copy checks: its ``splits``, or every split the generation wrote."""
    return list(spec.get("splits") or SPLITS)


def majority_needed(rerankers: int, majority: int | None) -> int:
    """Votes that make a pre-label: ``majority``, or more than half of the rerankers."""
    return int(majority) if majority is not None else rerankers // 2 + 1


def quality_control_problems(config: dict, systems: dict[str, str]) -> list[str]:
    """Cross-references of the ``quality_control`` block, each naming its config key."""
    settings = quality_settings(config)
    problems = []
    rerankers, generated = settings["rerankers"], settings["generated"]
    audit = settings["label_audit"]
    for i, name in enumerate(rerankers):
        if name not in config["rerankers"]:
            problems.append(
                _missing(f"quality_control.rerankers.{i}", name, "rerankers", config["rerankers"])
            )
    if len(set(rerankers)) != len(rerankers):
        problems.append("config key 'quality_control.rerankers': a reranker is listed twice")
    if (generated or audit["datasets"]) and not rerankers:
        problems.append(
            "config key 'quality_control.rerankers': name the rerankers that vote (keys of "
            "'rerankers'); AIR-Bench uses several"
        )
    majority = settings["majority"]
    if majority is not None and rerankers and majority > len(rerankers):
        problems.append(
            f"config key 'quality_control.majority': {majority} votes needed but only "
            f"{len(rerankers)} rerankers vote"
        )
    taken = set(config["datasets"]) | set(config.get("generate", {}))
    taken |= set(config.get("curate", {})) | _variant_names(config)
    for name, spec in generated.items():
        path = f"quality_control.generated.{name}"
        if name in taken:
            problems.append(f"config key '{path}': the name is already a dataset's")
        if spec["dataset"] not in config.get("generate", {}):
            problems.append(
                _missing(f"{path}.dataset", spec["dataset"], "generate", config.get("generate", {}))
            )
        if spec["retriever"] not in config["retrievers"]:
            problems.append(
                _missing(f"{path}.retriever", spec["retriever"], "retrievers", config["retrievers"])
            )
        scored = config.get("generate", {}).get(spec["dataset"], {}).get("split", "test")
        if spec.get("splits") is not None and scored not in spec["splits"]:
            problems.append(
                f"config key '{path}.splits': {spec['splits']} leaves out {scored!r}, the split "
                f"'generate.{spec['dataset']}.split' scores"
            )
        retriever_type = config["retrievers"].get(spec["retriever"], {}).get("type")
        others = [split for split in checked_splits(spec) if split != scored]
        if others and retriever_type not in (None, *SPLIT_RETRIEVERS):
            problems.append(
                f"config key '{path}.retriever': {spec['retriever']!r} is a {retriever_type} "
                f"retriever, which cannot retrieve the queries of split(s) {others} (only "
                f"{' and '.join(SPLIT_RETRIEVERS)} retrievers can); name one, or set "
                f"'{path}.splits' to [{scored!r}]"
            )
        if spec["depth"] > config["top_k"]:
            problems.append(
                f"config key '{path}.depth': {spec['depth']} exceeds top_k ({config['top_k']}), "
                "the depth of the retriever's run"
            )
    datasets = taken | set(generated)
    for i, dataset in enumerate(audit["datasets"]):
        if dataset not in datasets:
            path = f"quality_control.label_audit.datasets.{i}"
            problems.append(_missing(path, dataset, "datasets", datasets))
    for i, system in enumerate(audit.get("systems") or []):
        if system not in systems:
            path = f"quality_control.label_audit.systems.{i}"
            problems.append(_missing(path, system, "systems", systems))
    needs_llm = generated or (audit["datasets"] and audit.get("judge"))
    if needs_llm and not (config.get("llm") or {}).get("model"):
        problems.append(
            "config key 'llm.model': needed by 'quality_control' (the judge); name the model"
        )
    return problems


def _variant_names(config: dict) -> set[str]:
    from irflow.positionalize import list_variants

    return set(list_variants(config))


def _missing(path: str, value: str, table: str, known) -> str:
    allowed = ", ".join(sorted(known)) or "none defined"
    return f"config key '{path}': {value!r} is not a key of '{table}'; allowed values: {allowed}"


# --- the judge --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgePrompts:
    path: str
    system: str | None
    user: str
    answer_key: str
    explanation_key: str | None
    levels: dict[int, str]
    sha256: str

    def levels_text(self) -> str:
        return "\n".join(f"{level} = {self.levels[level]}" for level in sorted(self.levels)[::-1])

    def messages(self, query: str, document: str) -> list[dict]:
        values = {"query": query, "document": fence(document), "levels": self.levels_text()}
        messages = [{"role": "system", "content": self.system}] if self.system else []
        messages.append({"role": "user", "content": self.user})
        return [
            {"role": m["role"], "content": string.Template(m["content"]).substitute(values)}
            for m in messages
        ]


def load_judge_prompts(path: str | Path) -> JudgePrompts:
    """Read and check the judge's prompts file; errors name the file and the field."""
    path = Path(path)
    data, sha256 = read_prompts_file(path, "the judge's prompts file")
    levels = data.get("levels")
    if not isinstance(levels, dict) or len(levels) < 2:
        raise InputError(path, "must map at least two level numbers to texts", field="levels")
    for level, text in levels.items():
        if not isinstance(level, int) or isinstance(level, bool) or level < 0:
            raise InputError(path, f"{level!r} is not a level number >= 0", field="levels")
        if not isinstance(text, str) or not text.strip():
            raise InputError(path, "must be a non-empty text", field=f"levels.{level}")
    for key in ("answer_key",):
        if not isinstance(data.get(key), str) or not data[key]:
            raise InputError(path, "must name the answer's JSON key", field=key)
    explanation = data.get("explanation_key")
    if explanation is not None and not isinstance(explanation, str):
        raise InputError(path, "must be a string or absent", field="explanation_key")
    for part in ("system", "user"):
        template = data.get(part)
        if part == "user" and (not isinstance(template, str) or not template.strip()):
            raise InputError(path, "must be a non-empty template", field="user")
        if template is None:
            continue
        if not isinstance(template, str):
            raise InputError(path, "must be a string", field=part)
        try:
            string.Template(template).substitute(dict.fromkeys(JUDGE_PLACEHOLDERS, ""))
        except (KeyError, ValueError) as error:
            raise InputError(
                path,
                f"bad placeholder {error}; allowed: {', '.join(sorted(JUDGE_PLACEHOLDERS))}",
                field=part,
            ) from None
    used = data["user"] + (data.get("system") or "")
    for needed in ("query", "document"):
        if f"${needed}" not in used and f"${{{needed}}}" not in used:
            raise InputError(path, f"must use ${{{needed}}}", field="user")
    return JudgePrompts(
        path=str(path),
        system=data.get("system"),
        user=data["user"],
        answer_key=data["answer_key"],
        explanation_key=explanation,
        levels={int(k): v.strip() for k, v in levels.items()},
        sha256=sha256,
    )


def parse_judgement(data: Any, prompts: JudgePrompts) -> tuple[int, str | None]:
    """(level, explanation) from a parsed JSON answer; ValueError saying what is wrong.

    The level may be a number (``2``, ``2.0``) or a string holding one (``"2"``, ``"2 - partly
    relevant"``); it must be one of the prompts' levels."""
    if not isinstance(data, dict) or prompts.answer_key not in data:
        raise ValueError(f"expected a JSON object with the key {prompts.answer_key!r}")
    value = data[prompts.answer_key]
    level = None
    if isinstance(value, bool):
        level = None
    elif isinstance(value, int):
        level = value
    elif isinstance(value, float) and value.is_integer():
        level = int(value)
    elif isinstance(value, str):
        head = value.strip().split(maxsplit=1)[0].rstrip(".:-") if value.strip() else ""
        level = int(head) if head.isdigit() else None
    if level is None or level not in prompts.levels:
        allowed = ", ".join(str(level) for level in sorted(prompts.levels))
        raise ValueError(f"{prompts.answer_key!r} is {value!r}; expected one of {allowed}")
    explanation = data.get(prompts.explanation_key) if prompts.explanation_key else None
    return level, explanation.strip() if isinstance(explanation, str) else None


def _judgement_check(prompts: JudgePrompts):
    def check(data: Any) -> str | None:
        try:
            parse_judgement(data, prompts)
        except ValueError as error:
            return str(error)
        return None

    return check


@dataclass
class Judgement:
    level: int | None = None
    explanation: str | None = None
    error: str | None = None
    detail: str | None = None


class Judge:
    """Rates (query, document) pairs through an ``irflow.llm.LLMClient``."""

    def __init__(self, prompts: JudgePrompts, client, temperature: float = 0.0):
        self.prompts = prompts
        self.client = client
        self.temperature = temperature
        self.failures: Counter = Counter()
        self.asked = 0

    def requests(self, pairs: list[tuple[str, str]]) -> list:
        """The requests that rate ``pairs`` (query text, document text): what ``rate`` sends,
        and what the dry-run estimate (``irflow.generate.estimate``) counts."""
        from irflow.llm import Request

        check = _judgement_check(self.prompts)
        return [
            Request(self.prompts.messages(q, d), temperature=self.temperature, check=check)
            for q, d in pairs
        ]

    def rate(self, pairs: list[tuple[str, str]], desc: str = "judge") -> list[Judgement]:
        requests = self.requests(pairs)
        self.asked += len(requests)
        judgements = []
        for answer in self.client.complete(requests, desc=desc) if requests else []:
            if answer.ok:
                level, explanation = parse_judgement(answer.data, self.prompts)
                judgements.append(Judgement(level, explanation))
            else:
                self.failures[answer.error] += 1
                judgements.append(Judgement(error=answer.error, detail=answer.detail))
        return judgements


# --- candidates and votes ---------------------------------------------------------------------


def pool_runs(runs: list[pd.DataFrame], depth: int) -> pd.DataFrame:
    """Each query's documents ranked 1..depth by any of ``runs`` (query_id, doc_id, systems,
    best_rank, score): ``systems`` counts the runs that put it there, and ``score`` orders the
    pool by its best rank (an input for ``irflow.rerank.rerank``)."""
    from irflow.runs import trec_order

    parts = []
    for run in runs:
        ordered = trec_order(run[["query_id", "doc_id", "score"]])
        parts.append(ordered.loc[ordered["rank"] <= depth, ["query_id", "doc_id", "rank"]])
    if not parts:
        return pd.DataFrame(columns=["query_id", "doc_id", "systems", "best_rank", "score"])
    pooled = (
        pd.concat(parts, ignore_index=True)
        .groupby(["query_id", "doc_id"], sort=True)["rank"]
        .agg(systems="size", best_rank="min")
        .reset_index()
    )
    pooled["score"] = -pooled["best_rank"].astype(np.float64)
    return pooled


def rerank_pool(
    pool: pd.DataFrame, queries: dict[str, str], documents: dict[str, str], scorer
) -> pd.DataFrame:
    """A reranker's ranking of each query's pool (query_id, doc_id, score, rank), scored by
    ``irflow.rerank`` as the rerank stage scores."""
    from irflow.rerank import rerank

    if pool.empty:
        return pd.DataFrame(columns=contracts.RUN.names)
    depth = int(pool.groupby("query_id").size().max())
    ranked, _ = rerank(pool[["query_id", "doc_id", "score"]], queries, documents, scorer, depth)
    return ranked[contracts.RUN.names]


def candidate_pools(
    runs: list[pd.DataFrame], split_runs: list[pd.DataFrame], depth: int
) -> list[pd.DataFrame]:
    """The pools a reranker ranks: the top ``depth`` of ``runs`` pooled (every system's run,
    for the label audit; the retriever's run of the scored split, for quality control), and
    that of each of ``split_runs`` (another split's, from qc_candidates) on its own, so the
    scored split's queries are scored in the same batches as without them."""
    return [pool_runs(runs, depth)] + [pool_runs([run], depth) for run in split_runs]


def rerank_pools(
    pools: list[pd.DataFrame], queries: dict[str, str], documents: dict[str, str], scorer
) -> pd.DataFrame:
    """``rerank_pool`` of each pool in turn, the rankings together."""
    ranked = [rerank_pool(pool, queries, documents, scorer) for pool in pools if not pool.empty]
    if not ranked:
        return pd.DataFrame(columns=contracts.RUN.names)
    return pd.concat(ranked, ignore_index=True)


def vote_table(
    pairs: pd.DataFrame,
    ranks: dict[str, pd.DataFrame],
    thresholds: dict[str, int],
    needed: int,
) -> pd.DataFrame:
    """``pairs`` (query_id, doc_id, kind) with each reranker's rank (``rank_<name>``, NA when
    the pair is not among its candidates), ``votes`` (rerankers ranking it within the kind's
    threshold), ``needed`` and ``prelabel`` (votes >= needed)."""
    table = pairs.copy()
    unknown = sorted(set(table["kind"]) - set(thresholds))
    if unknown:
        raise ValueError(f"no rank threshold for kind(s) {unknown}; thresholds: {thresholds}")
    limit = table["kind"].map(thresholds).to_numpy()
    votes = np.zeros(len(table), dtype=np.int64)
    for name, ranked in ranks.items():
        column = f"{RANK_PREFIX}{name}"
        lookup = ranked.set_index(["query_id", "doc_id"])["rank"]
        keys = pd.MultiIndex.from_frame(table[["query_id", "doc_id"]])
        table[column] = lookup.reindex(keys).astype("Int32").to_numpy()
        rank = table[column].to_numpy(dtype="float64", na_value=np.nan)
        votes += np.nan_to_num(rank <= limit, nan=0).astype(np.int64)
    table["votes"] = votes
    table["needed"] = needed
    table["prelabel"] = table["votes"] >= needed
    return table


# --- decisions (AIR-Bench's Table 2) ----------------------------------------------------------


def decide(
    kind: str,
    prelabel: bool,
    judgement: Judgement | None,
    relevant_level: int,
    relevant_negative: str = "remove",
) -> tuple[str, str]:
    """(action, reason) for one audit row. ``judgement`` is None when the row was not sent to
    the judge."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    if kind != "positive" and not prelabel:
        if kind == "generated_negative":
            return "keep", "too few rerankers rank it high: kept as a negative, not judged"
        return "keep", "too few rerankers rank it high: left unjudged"
    if judgement is None:
        raise ValueError(f"a pre-labelled {kind} needs a judgement")
    if judgement.error is not None:
        return "keep", f"the judge gave no usable answer ({judgement.error}): unchanged"
    relevant = judgement.level >= relevant_level
    said = f"judged {judgement.level} ({'>=' if relevant else '<'} {relevant_level})"
    if kind == "positive":
        if relevant:
            return "keep", f"{said}: the query matches its document"
        return "drop_query", f"{said}: the query does not match its own document"
    if kind == "generated_negative":
        if not relevant:
            return "keep", f"{said}: a true hard negative"
        if relevant_negative == "promote":
            return "promote", f"{said}: the generated negative answers the query; now relevant"
        return "remove_document", f"{said}: the generated negative answers the query; removed"
    if relevant:
        return "add_positive", f"{said}: an overlooked relevant document"
    return "keep", f"{said}: left unjudged"


# --- quality control of a generated dataset ---------------------------------------------------


@dataclass
class Controlled:
    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame  # every checked split's
    audit: pd.DataFrame
    stats: dict
    split_qrels: dict[str, pd.DataFrame] | None = None  # by split


def audit_pairs(
    qrels: pd.DataFrame, negatives: pd.DataFrame, ranks: dict[str, pd.DataFrame]
) -> pd.DataFrame:
    """Every (query, document) QC looks at, with its kind: each positive, each generated
    negative of its own query, and each other document some reranker ranked."""
    positives = qrels.loc[qrels["relevance"] >= 1, ["query_id", "doc_id"]].assign(kind="positive")
    own = negatives[["query_id", "doc_id"]].assign(kind="generated_negative")
    ranked = [frame[["query_id", "doc_id"]] for frame in ranks.values()]
    others = (
        pd.concat(ranked, ignore_index=True).drop_duplicates()
        if ranked
        else pd.DataFrame(columns=["query_id", "doc_id"])
    ).assign(kind="corpus_document")
    pairs = pd.concat([positives, own, others], ignore_index=True)
    # The first kind wins: a positive is never also a negative or an unlabelled document.
    return pairs.drop_duplicates(["query_id", "doc_id"], keep="first").reset_index(drop=True)


def quality_control(
    dataset: str,
    corpus: pd.DataFrame,
    queries: pd.DataFrame,
    split_qrels: dict[str, pd.DataFrame],
    negatives: pd.DataFrame,
    ranks: dict[str, pd.DataFrame],
    judge: Judge,
    settings: dict,
) -> Controlled:
    """The QC'd tables and the audit of the splits in ``split_qrels`` (each split's qrels, by
    name). ``ranks`` maps each reranker to its ranking of the candidates; ``settings`` holds
    thresholds, majority, relevant_level, relevant_negative."""
    queries = queries.reset_index(drop=True)
    query_ids = set(queries["query_id"])
    for name, frame in ranks.items():
        unknown = sorted(set(frame["query_id"]) - query_ids)
        if unknown:
            raise InputError(
                f"votes of {name}", f"query {unknown[0]!r} is not a query of {dataset}"
            )
    split_of: dict[str, str] = {}
    for split, frame in split_qrels.items():
        for query_id in frame["query_id"].unique():
            if split_of.setdefault(query_id, split) != split:
                raise InputError(
                    f"{dataset} qrels",
                    f"query {query_id!r} is in splits {split_of[query_id]} and {split}",
                )
    qrels = pd.concat(list(split_qrels.values()), ignore_index=True)
    # Only the checked splits' queries: one of another split would keep unchecked labels.
    queries = queries[queries["query_id"].isin(split_of)].reset_index(drop=True)
    query_ids = set(queries["query_id"])
    needed = majority_needed(len(ranks), settings["majority"])
    thresholds = dict(settings["thresholds"]) | {
        "positive": settings["thresholds"]["corpus_document"]
    }
    table = vote_table(audit_pairs(qrels, negatives, ranks), ranks, thresholds, needed)
    table = table[table["kind"].ne("corpus_document") | table["prelabel"]].reset_index(drop=True)
    # Only pairs of the dataset's queries are controlled (a negative of a query the filter
    # dropped has no query text).
    table = table[table["query_id"].isin(query_ids)].reset_index(drop=True)
    texts = dict(zip(queries["query_id"], queries["text"]))
    documents = dict(
        zip(corpus["doc_id"], contracts.document_texts(corpus["title"], corpus["text"]))
    )
    missing = sorted(set(table["doc_id"]) - documents.keys())
    if missing:
        raise InputError(f"{dataset} corpus", f"doc_id {missing[0]!r} has no text")

    relevant_level = settings["relevant_level"]
    judgements: dict[int, Judgement] = {}
    first = table.index[table["kind"].eq("positive")].tolist()
    for row, judgement in zip(
        first,
        judge.rate(
            [(texts[table.at[i, "query_id"]], documents[table.at[i, "doc_id"]]) for i in first],
            desc=f"qc {dataset}: positives",
        ),
    ):
        judgements[row] = judgement
    dropped = {
        table.at[row, "query_id"]
        for row, judgement in judgements.items()
        if judgement.error is None and judgement.level < relevant_level
    }
    second = table.index[
        table["kind"].ne("positive") & table["prelabel"] & ~table["query_id"].isin(dropped)
    ].tolist()
    for row, judgement in zip(
        second,
        judge.rate(
            [(texts[table.at[i, "query_id"]], documents[table.at[i, "doc_id"]]) for i in second],
            desc=f"qc {dataset}: pre-labelled",
        ),
    ):
        judgements[row] = judgement

    actions, reasons = [], []
    for row in table.itertuples():
        judgement = judgements.get(row.Index)
        if row.kind != "positive" and row.prelabel and row.query_id in dropped:
            action, reason = "not_judged", "its query was dropped"
        else:
            action, reason = decide(
                row.kind, row.prelabel, judgement, relevant_level, settings["relevant_negative"]
            )
        actions.append(action)
        reasons.append(reason)
    # A generated negative that answers its own query leaves the corpus, so another query
    # that judged it relevant cannot keep it as a positive.
    removed = {d for d, action in zip(table["doc_id"], actions) if action == "remove_document"}
    for i, (doc_id, action) in enumerate(zip(table["doc_id"], actions)):
        if action in ("add_positive", "promote") and doc_id in removed:
            actions[i] = "remove_document"
            reasons[i] += "; but the document is removed (it answers the query it was made for)"
    table["judged"] = [i in judgements for i in table.index]
    table["judge_level"] = pd.array(
        [judgements[i].level if i in judgements else None for i in table.index], dtype="Int32"
    )
    table["judge_explanation"] = [
        judgements[i].explanation if i in judgements else None for i in table.index
    ]
    table["judge_error"] = [
        (f"{judgements[i].error}: {judgements[i].detail}" if judgements[i].error else None)
        if i in judgements
        else None
        for i in table.index
    ]
    table["action"] = actions
    table["reason"] = reasons
    table.insert(0, "dataset", dataset)
    table.insert(1, "split", table["query_id"].map(split_of))
    rank_columns = sorted(c for c in table.columns if c.startswith(RANK_PREFIX))
    audit = table[[*AUDIT_COLUMNS[:5], *rank_columns, *AUDIT_COLUMNS[5:]]]
    controlled = apply_decisions(corpus, queries, qrels, audit)
    in_split = controlled.qrels["query_id"].map(split_of)
    controlled.split_qrels = {
        split: controlled.qrels[in_split == split].reset_index(drop=True) for split in split_qrels
    }
    ranked = set().union(*(set(frame["query_id"]) for frame in ranks.values()))
    by_split = {}
    for split in split_qrels:
        rows = audit[audit["split"] == split]
        checked = {q for q, s in split_of.items() if s == split}
        by_split[split] = {
            "queries": len(checked),
            "queries_kept": len(checked & set(controlled.queries["query_id"])),
            "queries_dropped": len(checked & dropped),
            "queries_with_candidates": len(checked & ranked),
            "audit_rows": len(rows),
            "actions": _actions(rows),
        }
        if checked - ranked:
            log.warning(
                "%s, split %s: %d of %d queries have no candidates in the votes: only their "
                "positives and own negatives were checked",
                dataset,
                split,
                len(checked - ranked),
                len(checked),
            )
    stats = {
        "queries": len(queries),
        "queries_kept": len(controlled.queries),
        "queries_dropped": len(dropped),
        "audit_rows": len(audit),
        "actions": _actions(audit),
        "by_split": by_split,
        "judge_requests": judge.asked,
        "judge_failures": dict(sorted(judge.failures.items())),
        "needed_votes": needed,
        "rerankers": sorted(ranks),
        "corpus": len(controlled.corpus),
        "removed_documents": int(
            audit.loc[audit["action"] == "remove_document", "doc_id"].nunique()
        ),
        "added_positives": int((audit["action"] == "add_positive").sum()),
        "promoted_negatives": int((audit["action"] == "promote").sum()),
    }
    controlled.audit, controlled.stats = audit, stats
    for (kind, action), n in audit.groupby(["kind", "action"]).size().items():
        log.info("%s: %d %s rows -> %s", dataset, n, kind, action)
    if judge.failures:
        log.warning(
            "%s: the judge gave no usable answer for %d pairs (%s); they were left unchanged",
            dataset,
            sum(judge.failures.values()),
            ", ".join(f"{k}: {v}" for k, v in sorted(judge.failures.items())),
        )
    # A failed judgement leaves its query unchecked: past the limit, the job fails.
    judge.client.check_dropped()
    return controlled


def _actions(audit: pd.DataFrame) -> dict[str, int]:
    return {
        f"{kind}/{action}": int(n)
        for (kind, action), n in audit.groupby(["kind", "action"]).size().items()
    }


def apply_decisions(
    corpus: pd.DataFrame, queries: pd.DataFrame, qrels: pd.DataFrame, audit: pd.DataFrame
) -> Controlled:
    """The dataset after the audit's actions."""
    dropped = set(audit.loc[audit["action"] == "drop_query", "query_id"])
    removed = set(audit.loc[audit["action"] == "remove_document", "doc_id"])
    promoted = audit.loc[audit["action"].isin(["promote", "add_positive"]), ["query_id", "doc_id"]]
    # A removed document is gone for every query, even one that judged it relevant.
    promoted = promoted[~promoted["query_id"].isin(dropped) & ~promoted["doc_id"].isin(removed)]
    kept_qrels = qrels[~qrels["query_id"].isin(dropped) & ~qrels["doc_id"].isin(removed)].copy()
    keys = pd.MultiIndex.from_frame(kept_qrels[["query_id", "doc_id"]])
    upgraded = keys.isin(pd.MultiIndex.from_frame(promoted))
    kept_qrels.loc[upgraded, "relevance"] = 1
    new = promoted[~pd.MultiIndex.from_frame(promoted).isin(keys)]
    new_rows = new.assign(relevance=1, span_start=None, span_end=None)
    new_qrels = pd.concat(
        [kept_qrels, new_rows.reindex(columns=kept_qrels.columns)], ignore_index=True
    )
    new_qrels["relevance"] = new_qrels["relevance"].astype("int32")
    return Controlled(
        corpus=corpus[~corpus["doc_id"].isin(removed)].reset_index(drop=True),
        queries=queries[~queries["query_id"].isin(dropped)].reset_index(drop=True),
        qrels=new_qrels.sort_values(["query_id", "doc_id"], kind="stable").reset_index(drop=True),
        audit=audit,
        stats={},
    )


def read_votes(paths: dict[str, str | Path]) -> dict[str, pd.DataFrame]:
    """Each reranker's ranking, by name, from the votes files."""
    frames = {}
    for name, path in paths.items():
        frame = pd.read_parquet(path, columns=["query_id", "doc_id", "rank"])
        if frame.duplicated(["query_id", "doc_id"]).any():
            row = frame[frame.duplicated(["query_id", "doc_id"])].iloc[0]
            raise InputError(path, f"({row['query_id']}, {row['doc_id']}) is ranked twice")
        frames[name] = frame
    return frames


QC_SUMMARY_COLUMNS = [
    "dataset",
    "split",
    "queries",
    "queries_dropped",
    "queries_kept",
    "negatives",
    "negatives_judged",
    "negatives_removed",
    "negatives_promoted",
    "documents_judged",
    "positives_added",
    "judge_failures",
]


def summarize_audit(audit: pd.DataFrame) -> pd.DataFrame:
    """Per QC'd dataset and split, what quality control did (one row each): the report's
    table."""
    rows = []
    for (dataset, split), rows_of in audit.groupby(["dataset", "split"], sort=True):
        positives = rows_of[rows_of["kind"] == "positive"]
        negatives = rows_of[rows_of["kind"] == "generated_negative"]
        documents = rows_of[rows_of["kind"] == "corpus_document"]
        dropped = int((positives["action"] == "drop_query").sum())
        rows.append(
            {
                "dataset": dataset,
                "split": split,
                "queries": int(positives["query_id"].nunique()),
                "queries_dropped": dropped,
                "queries_kept": int(positives["query_id"].nunique()) - dropped,
                "negatives": len(negatives),
                "negatives_judged": int(negatives["judged"].sum()),
                "negatives_removed": int((negatives["action"] == "remove_document").sum()),
                "negatives_promoted": int((negatives["action"] == "promote").sum()),
                "documents_judged": int(documents["judged"].sum()),
                "positives_added": int((documents["action"] == "add_positive").sum()),
                "judge_failures": int(rows_of["judge_error"].notna().sum()),
            }
        )
    return pd.DataFrame(rows, columns=QC_SUMMARY_COLUMNS)


def summary_table_html(summary: pd.DataFrame) -> str:
    """HTML table of ``summarize_audit``."""
    if summary.empty:
        return "<p>No generated dataset is quality-controlled.</p>"
    return summary.rename(columns=lambda c: c.replace("_", " ")).to_html(index=False)
