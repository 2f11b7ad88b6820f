"""saliency: where in a document a dense model looks, as PosIR's gradient saliency (§5.3).

For a (query, relevant document) pair the query is encoded without gradients; the document's
word embeddings are fed to the model as ``inputs_embeds`` that require a gradient, and the
cosine between the two sentence embeddings is differentiated with respect to them. A token's
saliency is the L2 norm of its gradient. Special tokens ([CLS], [SEP]) and the tokens of a
document prompt are dropped, the remaining document tokens are divided by their maximum, and
the per-token profile is resampled to ``bins`` relative positions, as PosIR by linear
interpolation. The resampled profiles are averaged over pairs, one profile per model.

Decisions (PosIR's ``gradient_saliency_analysis/*_exp.py`` is the reference):

- Relative position is over the *whole* document as the model's tokenizer splits it, not over
  the model's window. The model reads only its first ``max_seq_length`` tokens (specials and
  prompt included); the document tokens past that window get saliency exactly 0, and the
  profile shows where the window ends. PosIR truncates at 2048 tokens and resamples the window,
  which hides this. Each pair records how many document tokens the window cut.
- Resampling (``resample``), PosIR's by default: ``interpolate`` places token i of n at
  i / (n − 1) and interpolates linearly at ``bins`` evenly spaced positions from 0 to 1
  (qwen3_exp.py's resample_to_fixed_length: "np.interp(target_coords, original_coords,
  saliency)" with both coordinates np.linspace(0, 1, ...)). It reads only the two tokens
  around each point, so most tokens of a long document do not count. ``bin_mean``, irflow's
  named variant, averages every token into ``bins`` equal bins instead (``bin_profile``): the
  mean over bins then equals the mean over tokens, so the share of saliency in the first bins
  is a share of the document's total.
- Normalisation divides by the maximum, as our issue defines it; PosIR first clips at the 99th
  percentile. A profile whose gradient is zero everywhere stays zero.
- The model is put in eval mode (no dropout), so the profile is deterministic, and runs on the
  device and in the dtype it was loaded with; the norms are taken in float32.
- The document's tokens are found with the tokenizer's character offsets in prompt + document:
  not special, ending past the prompt. Counting the prompt's own tokens instead drops the first
  document token with a byte-level BPE, whose prompt alone ends in a space token that the
  document's first word absorbs. The input is checked to be that tokenization.
- Pairs (``sample_pairs``): PosIR's selection by default, every query whose relevant document
  has at least 1,024 tokens and whose span centre lies in [0.4, 0.6] of it; or ``random``
  queries. PosIR selects its pairs once, from its dataset's own token counts, before any model
  is loaded (qwen3_exp.py: ``if q["pos_token_length"] >= 1024 and 0.4 <= relative_pos <=
  0.6:``, then ``model, tokenizer = load_model(model_name)``), so every model it profiles reads
  the same pairs. irflow selects them once per dataset too, in a job of their own
  (``saliency_pairs``, a Parquet every model's saliency job reads): lengths are the qrels'
  ``doc_tokens`` (PosIR's ``pos_token_length``) where given, else the count of one named
  tokenizer (``pairs_tokenizer``), never each model's own, which would give two models
  different pairs.
- Several datasets (``datasets``): each dataset's pairs are selected on their own, as above,
  and every model reports each dataset's curve and, beside them, the pooled curve (dataset
  ``all``), the mean over every pair of every dataset, as PosIR pools its English domains: "We
  aggregate the saliency over 3,131 English query-document pairs that satisfy the length and
  position constraints" (posir.txt, line 81). Each pair weighs the same, so a dataset with more
  pairs weighs more: the pooled curve is the mean of the datasets' curves only where they have
  as many pairs each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from irflow.analyses.position import judged_positions
from irflow.core.config import missing_key, register_check, torch_problems
from irflow.core.contracts import document_texts
from irflow.core.errors import ConfigError
from irflow.core.settings_types import Saliency
from irflow.data.tokens import encode, tokenizer_source
from irflow.derived.positionalize import list_variants


def interpolate_profile(profile: np.ndarray, points: int) -> np.ndarray:
    """PosIR's resampling: token i of n placed at i / (n − 1), the profile interpolated
    linearly at ``points`` evenly spaced positions from 0 to 1 (one token: its value)."""
    profile = np.asarray(profile, dtype=np.float64)
    if profile.size == 0:
        raise ValueError("an empty profile has no points")
    return np.interp(np.linspace(0.0, 1.0, points), np.linspace(0.0, 1.0, profile.size), profile)


def bin_profile(profile: np.ndarray, bins: int) -> np.ndarray:
    """The mean of a per-token profile over each of ``bins`` equal bins of [0, 1].

    Token i covers [i/n, (i+1)/n); each bin's value is the integral of that step function over
    the bin divided by the bin's width, computed from the profile's cumulative sum.
    """
    profile = np.asarray(profile, dtype=np.float64)
    if profile.size == 0:
        raise ValueError("an empty profile has no bins")
    knots = np.linspace(0.0, 1.0, profile.size + 1)
    integral = np.concatenate([[0.0], np.cumsum(profile)]) / profile.size
    edges = np.linspace(0.0, 1.0, bins + 1)
    return np.diff(np.interp(edges, knots, integral)) * bins


# Each resampling: the profile at ``bins`` positions, and those positions in [0, 1].
RESAMPLES = {
    "interpolate": (interpolate_profile, lambda bins: np.linspace(0.0, 1.0, bins)),
    "bin_mean": (bin_profile, lambda bins: (np.arange(bins) + 0.5) / bins),
}


@dataclass
class PairSaliency:
    """One pair's normalised saliency per document token, zero past the model's window."""

    profile: np.ndarray
    window_tokens: int  # document tokens the model read
    cosine: float

    @property
    def cut_tokens(self) -> int:
        return self.profile.size - self.window_tokens


def _document_mask(tokenizer, text: str, prompt_chars: int, **settings) -> tuple:
    """Token ids of ``text`` (a prompt of ``prompt_chars`` characters, then the document) and
    which tokens are the document's: not special, ending past the prompt. Offsets, not a
    count of the prompt's own tokens: a byte-level BPE merges the prompt's last space into the
    document's first word, so the prompt alone has one token more than it takes in the text."""
    if not tokenizer.is_fast:
        raise ConfigError("saliency needs a fast tokenizer: its offsets locate the document")
    encoded = tokenizer(
        text,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        verbose=False,  # a document longer than the model's window is expected here
        **settings,
    )
    ends = np.array([end for _, end in encoded["offset_mapping"]], dtype=np.int64)
    special = np.array(encoded["special_tokens_mask"], dtype=bool)
    return np.array(encoded["input_ids"]), ~special & (ends > prompt_chars)


def pair_saliency(
    model, query: str, document: str, query_prompt: str = "", document_prompt: str = ""
) -> PairSaliency:
    """Gradient saliency of ``document``'s tokens for its cosine with ``query``.

    ``model`` is a SentenceTransformer whose first module is a Transformer; its own modules
    (pooling, dense, normalize) turn the token states into the document embedding.
    """
    import torch

    transformer = model[0]
    if not hasattr(transformer, "auto_model"):
        raise ConfigError(
            f"saliency needs a model whose first module is a Transformer, not "
            f"{type(transformer).__name__}"
        )
    model.eval()
    tokenizer = model.tokenizer
    with torch.no_grad():
        query_embedding = model.encode(
            [query], prompt=query_prompt or None, convert_to_tensor=True, show_progress_bar=False
        )

    features = model.preprocess([document], prompt=document_prompt or None)
    features = {
        key: value.to(model.device) if isinstance(value, torch.Tensor) else value
        for key, value in features.items()
    }
    input_ids = features.pop("input_ids")
    word_embeddings = transformer.auto_model.get_input_embeddings()
    inputs_embeds = word_embeddings(input_ids).detach().requires_grad_()
    document_embedding = model({**features, "inputs_embeds": inputs_embeds})["sentence_embedding"]
    cosine = torch.nn.functional.cosine_similarity(query_embedding, document_embedding)[0]
    # autograd.grad, not backward: only the input gradient is needed, no parameter gradients.
    (gradient,) = torch.autograd.grad(cosine, inputs_embeds)
    norms = gradient[0].float().norm(dim=-1).cpu().numpy()

    # The window as the model read it, located with offsets; and the whole document's tokens.
    text, prompt_chars = document_prompt + document, len(document_prompt)
    ids, in_window = _document_mask(
        tokenizer, text, prompt_chars, truncation=True, max_length=model.max_seq_length
    )
    if not np.array_equal(ids, input_ids[0].cpu().numpy()):
        raise ConfigError(
            "saliency: the model's input is not its tokenizer's reading of prompt + document; "
            "the document's tokens cannot be located"
        )
    read = np.flatnonzero(in_window)
    document_tokens = int(
        _document_mask(tokenizer, text, prompt_chars, add_special_tokens=False)[1].sum()
    )

    profile = np.zeros(document_tokens)
    profile[: read.size] = norms[read]
    peak = profile.max(initial=0.0)
    if peak > 0:
        profile /= peak
    return PairSaliency(profile, int(read.size), float(cosine.detach()))


# The pooled curve's dataset: every pair of every dataset (PosIR's 3,131 English pairs).
POOLED = "all"


def _curve(results: list[PairSaliency], bins: int, resample: str) -> pd.DataFrame:
    """The mean and standard deviation over ``results`` at each of ``bins`` points."""
    at_points, positions = RESAMPLES[resample]
    sampled = np.stack([at_points(result.profile, bins) for result in results])
    spread = sampled.std(axis=0, ddof=1) if len(results) > 1 else np.full(bins, np.nan)
    return pd.DataFrame(
        {
            "point": np.arange(bins),
            "position": positions(bins),
            "saliency": sampled.mean(axis=0),
            "saliency_sd": spread,
            "pairs": len(results),
            "truncated_pairs": sum(result.cut_tokens > 0 for result in results),
            "cut_tokens": sum(result.cut_tokens for result in results),
            "resample": resample,
        }
    )


def saliency_profile(
    model,
    pairs: dict[str, list[tuple[str, str]]],
    name: str,
    bins: int = 100,
    query_prompt: str = "",
    document_prompt: str = "",
    *,
    resample: str = "interpolate",
) -> pd.DataFrame:
    """The mean resampled saliency of each dataset's ``pairs`` of (query text, document text)
    for one model, and of every pair of them all pooled (dataset ``all``, ``POOLED``).

    One row per dataset and point: ``model`` (``name``), ``dataset``, ``point`` (0 to
    bins − 1), ``position`` (its relative position in the document: PosIR's interpolation
    point, or the bin's centre for ``bin_mean``), ``saliency`` (mean over the pairs) and
    ``saliency_sd`` (its standard deviation), with, on every row, the number of ``pairs``, how
    many documents were longer than the window (``truncated_pairs``), the document tokens the
    window cut in all (``cut_tokens``) and the ``resample`` method. Each pair is profiled once;
    the pooled rows average the same profiles, each pair weighing the same.
    """
    if resample not in RESAMPLES:
        raise ValueError(f"resample {resample!r}: expected one of {sorted(RESAMPLES)}")
    empty = [dataset for dataset, chosen in pairs.items() if not chosen]
    if not pairs or empty:
        raise ValueError(f"saliency needs at least one (query, document) pair: {empty or pairs}")
    if POOLED in pairs:
        raise ValueError(f"{POOLED!r} names the pooled curve, not a dataset")
    results = {
        dataset: [pair_saliency(model, q, d, query_prompt, document_prompt) for q, d in chosen]
        for dataset, chosen in pairs.items()
    }
    pooled = [result for chosen in results.values() for result in chosen]
    curves = [_curve(chosen, bins, resample).assign(dataset=d) for d, chosen in results.items()]
    curves.append(_curve(pooled, bins, resample).assign(dataset=POOLED))
    table = pd.concat(curves, ignore_index=True).assign(model=name)
    return table[["model", "dataset", *curves[0].columns.drop("dataset")]]


SELECTIONS = ("posir", "random")


def document_tokens(pairs: pd.DataFrame, tokenizer) -> np.ndarray:
    """Each pair's document length in tokens: the qrels' ``doc_tokens`` (PosIR's own
    ``pos_token_length``) where given, else ``tokenizer``'s count of the document as read."""
    given = pairs.get("doc_tokens", pd.Series(np.nan, pairs.index)).astype(float)
    missing = given.isna().to_numpy()
    tokens = given.fillna(0).to_numpy(dtype=np.int64)
    if missing.any():
        if tokenizer is None:
            raise ValueError("PosIR's selection needs a tokenizer where doc_tokens is not given")
        texts = pairs.loc[missing, "document"].tolist()
        tokens[missing] = [len(ids) for ids in encode(tokenizer, texts)["input_ids"]]
    return tokens


def saliency_settings(config: dict) -> Saliency:
    """The ``position_analysis.saliency`` block of ``config``, typed
    (irflow.core.settings_types.Saliency)."""
    return Saliency.model_validate(config["position_analysis"]["saliency"])


def pairs_tokenizer(config: dict, dataset: str) -> str | None:
    """The tokenizer that counts a saliency dataset's documents for PosIR's selection, once
    for every model: ``position_analysis.saliency.tokenizer``; when null, a variant's own (its
    haystack lengths are that tokenizer's), else the first model listed. None when no model is
    profiled."""
    saliency = saliency_settings(config)
    if saliency.tokenizer is not None or not saliency.models:
        return saliency.tokenizer
    variant = list_variants(config).get(dataset)
    return variant["tokenizer"] if variant is not None else saliency.models[0]


def pairs_tokenizer_source(config: dict, dataset: str) -> dict | None:
    """Where the saliency_pairs job of ``dataset`` loads ``pairs_tokenizer`` from
    (``tokenizer_source``); None for random pairs, which count no token, or no tokenizer."""
    name = pairs_tokenizer(config, dataset)
    if name is None or saliency_settings(config).select != "posir":
        return None
    return tokenizer_source(name, config["models"])


def sample_pairs(
    queries: pd.DataFrame,
    corpus: pd.DataFrame,
    qrels: pd.DataFrame,
    count: int | None,
    seed: int,
    select: str = "random",
    *,
    tokenizer=None,
    min_tokens: int = 1024,
    centre: tuple[float, float] = (0.4, 0.6),
    dataset: str = "saliency",
) -> pd.DataFrame:
    """Each query with a relevant, non-empty document in the corpus, with its most relevant
    document (ties: the smallest doc_id), then chosen by ``select``:

    - ``posir``, PosIR's selection (§5.3): every query whose document has at least
      ``min_tokens`` tokens (``document_tokens``: the qrels' ``doc_tokens``, else by
      ``tokenizer``) and whose judgement's span has its centre within
      ``centre`` (inclusive) of the document's characters (``judged_positions``: the
      collection's length where the qrels give it); ``count``, when given, draws that many of
      them with ``seed``;
    - ``random``: ``count`` queries drawn with ``seed``.

    Returns query_id, doc_id, query (text) and document (title and text as models read them),
    ordered by query_id; all that qualify when there are fewer than ``count``. No pair at all
    is a ConfigError that says why, ``dataset`` naming the dataset.
    """
    if select not in SELECTIONS:
        raise ValueError(f"select {select!r}: expected one of {SELECTIONS}")
    positive = qrels[qrels["relevance"] > 0]
    judged = corpus[corpus["doc_id"].isin(positive["doc_id"])]
    # A null title reads as NaN in pandas; an empty document has no token to place.
    texts = pd.Series(
        document_texts(judged["title"].fillna("").tolist(), judged["text"].tolist()),
        index=judged["doc_id"],
    )
    texts = texts[texts != ""]
    best = (
        positive[positive["doc_id"].isin(texts.index)]
        .sort_values(["query_id", "relevance", "doc_id"], ascending=[True, False, True])
        .drop_duplicates("query_id")
        .merge(queries.rename(columns={"text": "query"}), on="query_id")
    )
    best["document"] = texts.loc[best["doc_id"]].to_numpy()
    if best.empty:
        raise ConfigError(
            f"{dataset}: no query has a relevant, non-empty document in the corpus, so "
            "saliency has no pair (config key 'position_analysis.saliency.datasets')"
        )
    if select == "posir":
        spans = best.dropna(subset=["span_start", "span_end"])
        # Spans count characters of the document's text (the contracts), not of the title.
        relpos = judged_positions(spans, judged.set_index("doc_id")["text"])
        tokens = document_tokens(spans, tokenizer)
        long_enough, centred = tokens >= min_tokens, (relpos >= centre[0]) & (relpos <= centre[1])
        best = spans[long_enough & centred]
        if best.empty:
            raise ConfigError(
                f"{dataset}: no pair qualifies for PosIR's selection: {len(spans)} queries with "
                f"a span, {long_enough.sum()} with a document of at least {min_tokens} tokens, "
                f"{centred.sum()} with the span centre in {list(centre)} (the longest relevant "
                f"document has {tokens.max(initial=0)} tokens); config key "
                f"'position_analysis.saliency.min_tokens' is {min_tokens}: lower it, widen "
                "'position_analysis.saliency.centre' or take a dataset with longer documents"
            )
    if count is not None:
        best = best.sample(n=min(count, len(best)), random_state=seed)
    drawn = best.sort_values("query_id")
    return drawn[["query_id", "doc_id", "query", "document"]].reset_index(drop=True)


def saliency_figure(table: pd.DataFrame):
    """Mean normalised saliency against relative position in the whole document, one line per
    model with a band of one standard deviation over pairs (as PosIR's Fig. 5): the pooled
    curve, and where there are several datasets each dataset's curve beside it, dashed."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.2))
    axis = figure.subplots()
    several = table["dataset"].nunique() > 2  # one dataset's curve is the pooled one
    for name, model in table.sort_values("point").groupby("model", sort=True):
        line = model[model["dataset"] == POOLED]
        pairs, truncated = line["pairs"].iloc[0], line["truncated_pairs"].iloc[0]
        pooled = ", pooled" if several else ""
        drawn = axis.plot(
            line["position"],
            line["saliency"],
            label=f"{name}{pooled} ({pairs} pairs, {truncated} truncated)",
        )[0]
        axis.fill_between(
            line["position"],
            line["saliency"] - line["saliency_sd"],
            line["saliency"] + line["saliency_sd"],
            color=drawn.get_color(),
            alpha=0.15,
            linewidth=0,
        )
        datasets = model[model["dataset"] != POOLED].groupby("dataset", sort=True)
        for dataset, curve in datasets if several else []:
            axis.plot(
                curve["position"],
                curve["saliency"],
                color=drawn.get_color(),
                linestyle="--",
                linewidth=0.8,
                label=f"{name}, {dataset} ({curve['pairs'].iloc[0]} pairs)",
            )
    axis.set_xlim(0, 1)
    axis.set_ylim(bottom=0)
    axis.set_xlabel("relative position in the document (all its tokens)")
    axis.set_ylabel("mean normalised gradient L2 norm")
    axis.set_title("Gradient saliency of the relevant document")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    return figure


# The stretches of the document the report's table averages each curve over.
STRETCHES = {"start (0-0.1)": (0.0, 0.1), "middle (0.4-0.6)": (0.4, 0.6), "end (0.9-1)": (0.9, 1.0)}


def saliency_table(table: pd.DataFrame) -> str:
    """HTML table: per model, each dataset's curve and the pooled one (``all``, last), its pairs,
    the mean saliency over the points at the start, the middle (where PosIR's selection puts
    the span) and the end of the document, and where the curve peaks."""
    rows = []
    for (model, dataset), curve in table.groupby(["model", "dataset"], sort=True):
        position, saliency = curve["position"], curve["saliency"]
        rows.append(
            {
                "model": model,
                "dataset": f"{POOLED} (pairs pooled)" if dataset == POOLED else dataset,
                "pooled": dataset == POOLED,
                "pairs": curve["pairs"].iloc[0],
                "truncated pairs": curve["truncated_pairs"].iloc[0],
            }
            | {
                name: saliency[position.between(low, high)].mean()
                for name, (low, high) in STRETCHES.items()
            }
            | {"peak at": position.iloc[int(saliency.to_numpy().argmax())]}
        )
    shown = pd.DataFrame(rows).sort_values(["model", "pooled", "dataset"], kind="stable")
    return shown.drop(columns="pooled").to_html(index=False, float_format="{:.3f}".format)


@register_check
def saliency_problems(config: dict) -> list[str]:
    """``position_analysis.saliency``: known models on torch, datasets or variants long enough
    for PosIR's selection (none named ``all``, the pooled curve's), and what its ``select`` and
    ``centre`` need."""
    saliency = saliency_settings(config)
    problems = []
    for i, model in enumerate(saliency.models):
        path = f"position_analysis.saliency.models.{i}"
        if model not in config["models"]:
            problems.append(missing_key(path, model, "models", config["models"]))
        # Saliency takes gradients through the model, which an ONNX Runtime graph has not.
        problems += torch_problems(config, path, model)
    if saliency.models and not saliency.datasets:
        problems.append(
            "config key 'position_analysis.saliency.datasets': needed when saliency.models is "
            "not empty"
        )
    if saliency.select == "random" and saliency.queries is None:
        problems.append(
            "config key 'position_analysis.saliency.queries': needed when saliency.select is random"
        )
    low, high = (bound.root for bound in saliency.centre)
    if low > high:
        problems.append(
            f"config key 'position_analysis.saliency.centre': {[low, high]} is not a "
            "range [low, high]"
        )
    variants = list_variants(config)
    known = set(config["datasets"]) | set(variants)
    for i, dataset in enumerate(saliency.datasets):
        path = f"position_analysis.saliency.datasets.{i}"
        if dataset == POOLED:
            problems.append(
                f"config key '{path}': {POOLED!r} names the pooled curve; rename the dataset"
            )
        elif dataset not in known:
            problems.append(missing_key(path, dataset, "datasets or variants", known))
        else:
            problems += _saliency_length_problems(saliency, dataset, variants)
    return problems


def _saliency_length_problems(saliency: Saliency, dataset: str, variants: dict[str, dict]) -> list:
    """PosIR's selection needs relevant documents of ``min_tokens``; a variant's are haystacks
    of at most its length, so a shorter variant would select no pair."""
    variant = variants.get(dataset)
    if saliency.select != "posir" or variant is None or saliency.min_tokens <= variant["length"]:
        return []
    return [
        f"config key 'position_analysis.saliency.min_tokens': {saliency.min_tokens} tokens, "
        f"but the relevant documents of variant {dataset!r} are haystacks of at "
        f"most {variant['length']} tokens (by positionalize.{variant['block']}.tokenizer "
        f"{variant['tokenizer']!r}), so PosIR's selection finds no pair; set min_tokens to at "
        "most the variant's length or take a longer variant"
    ]
