"""Which nodes of ``onnx-fused-int8`` stay float, chosen by measured nDCG@10 (issue 33).

Each candidate is ``EXPORT_SETTINGS["onnx-fused-int8"]`` with some of its
``quantize_dynamic`` settings changed (``CANDIDATES``: nodes kept float by name pattern,
the fused Attention quantised to ``QAttention``, ``reduce_range``).
The candidate is put in place of the backend's settings while irflow exports and loads the
graph (``candidate_in_place``), so it is exported and run exactly as the workflow would run it.

Two stages, since a full corpus takes minutes per candidate on two shared cores:

- ``--screen N``: every candidate encodes the first N SciFact documents; reported are the least
  and the mean cosine between its vectors and bare sentence-transformers' (batch 64,
  normalised), and its throughput over bare sentence-transformers' (the median of
  ``--repeats`` paired rounds in this process, as benchmarks/embed_backends.py measures).
- ``--datasets ...``: the named candidates (``--candidates``) encode each dataset's whole
  corpus and queries with irflow's ``embed_file`` (batch 64, chunks of 4,096 as the workflow
  embeds), search them exactly (``dense_search`` on a sharded flat search, top 1,000, ArguAna
  without self-matches) and score the run with irflow's ``score_run`` (pytrec_eval); nDCG@10
  is printed beside torch's published value (MTEB's, from config/reference/published.yaml,
  which irflow's torch path reproduces: docs/validation.md) and the difference.

Run from the repository root, e.g.::

    python benchmarks/onnx_quantization_choice.py --screen 512
    python benchmarks/onnx_quantization_choice.py --datasets scifact nfcorpus arguana \
        --candidates matmul "float: attention output"
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _harness import (
    local_minilm,
    median_paired_ratio,
    model_spec,
    report,
    timings,
    write_corpus,
)

from irflow.core import contracts
from irflow.data.filter import queries_to_score
from irflow.data.ingest import ingest
from irflow.encoding.embed import embed_file
from irflow.encoding.models import Encoder
from irflow.encoding.onnx_export import EXPORT_SETTINGS
from irflow.evaluation.published import load_published
from irflow.evaluation.score import score_run
from irflow.retrieval.retrieve import dense_search

BACKEND = "onnx-fused-int8"
LAYERS = 6  # all-MiniLM-L6-v2
# Node-name patterns of the linear layers the fused graph keeps as MatMul nodes (the query,
# key and value projections are inside each fused Attention node, named Attention_<layer>).
ATTENTION_OUTPUT = r"attention/output/dense/MatMul"
FFN_UP = r"/intermediate/dense/MatMul"
FFN_DOWN = r"layer\.\d+/output/dense/MatMul"


def layer(index: int) -> str:
    return rf"layer\.{index}/(attention/output|intermediate|output)/dense/MatMul"


# Each candidate: the quantize_dynamic settings it changes.
CANDIDATES = {
    "matmul": {},
    "qattention": {"op_types": ["MatMul", "Attention"]},
    "reduce_range": {"reduce_range": True},
    "float: attention output": {"keep_float": [ATTENTION_OUTPUT]},
    "float: FFN up": {"keep_float": [FFN_UP]},
    "float: FFN down": {"keep_float": [FFN_DOWN]},
    **{f"float: layer {i}": {"keep_float": [layer(i)]} for i in range(LAYERS)},
    "float: layers 0, 5": {"keep_float": [layer(0), layer(LAYERS - 1)]},
    "qattention, float: FFN down": {"op_types": ["MatMul", "Attention"], "keep_float": [FFN_DOWN]},
    "qattention, float: layer 0": {"op_types": ["MatMul", "Attention"], "keep_float": [layer(0)]},
}
REMOVE_SELF_MATCHES = {"arguana"}  # as config/onnx.yaml and BEIR's ArguAna evaluation
PUBLISHED = Path("config/reference/published.yaml")
HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
BASELINE = "sentence-transformers"


@contextmanager
def candidate_in_place(changes: dict):
    """The backend's export settings with ``changes`` to its quantize_dynamic, while inside."""
    original = EXPORT_SETTINGS[BACKEND]
    EXPORT_SETTINGS[BACKEND] = original | {
        "quantize_dynamic": original["quantize_dynamic"] | changes
    }
    try:
        yield
    finally:
        EXPORT_SETTINGS[BACKEND] = original


def screen(model: str, dataset: Path, documents: int, names: list[str], repeats: int) -> dict:
    """Per candidate, on the first ``documents`` documents of ``dataset``: the least and mean
    cosine between its vectors and bare sentence-transformers', and its throughput over bare
    sentence-transformers' (median of paired rounds, ``_harness.timings``)."""
    from sentence_transformers import SentenceTransformer

    with tempfile.TemporaryDirectory() as scratch:
        texts = write_corpus(dataset, documents, Path(scratch) / "corpus.parquet")
    bare = SentenceTransformer(model, device="cpu")
    encoders = {
        BASELINE: lambda: bare.encode(
            texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False
        )
    }
    for name in names:
        with candidate_in_place(CANDIDATES[name]):
            encoder = Encoder.load(model_spec(model, 4096) | {"backend": BACKEND})
        encoders[name] = lambda encoder=encoder: encoder.encode(texts, "")
    vectors = {name: encode() for name, encode in encoders.items()}  # also the warm-up
    times = timings(encoders, repeats)
    results = {}
    for name in names:
        cosine = np.sum(vectors[name] * vectors[BASELINE], axis=1)
        speed = 1 / median_paired_ratio(times, name, BASELINE)
        results[name] = {
            "least_cosine": float(cosine.min()),
            "mean_cosine": float(cosine.mean()),
            "over_bare_median_paired": speed,
        }
        print(
            f"{name:<32} least {cosine.min():.5f}  mean {cosine.mean():.6f}  {speed:.2f}x bare",
            flush=True,
        )
    return results


def ingested(dataset: Path, out: Path) -> Path:
    """The BEIR folder ``dataset`` (test split) as irflow's corpus, queries and qrels tables,
    the queries cut to the judged ones as rule filter cuts them: int8 activations are quantised
    per batch, so a query's vector depends on the queries batched with it, and only the
    workflow's batches give the workflow's numbers."""
    ingest(dataset / "corpus.jsonl.gz", dataset / "queries.jsonl", dataset / "qrels/test.tsv", out)
    judged = queries_to_score(out / "queries.parquet", out / "qrels.parquet")
    contracts.write_table(judged, out / "queries.parquet", contracts.QUERIES)
    return out


def ndcg_at_10(encoder: Encoder, tables: Path, remove_self_matches: bool, work: Path) -> float:
    """nDCG@10 of ``encoder``'s exact dense run on the ingested dataset at ``tables``."""
    for side in ("corpus", "queries"):
        embed_file(encoder, tables / f"{side}.parquet", side, work / f"{side}.parquet")
    flat = {"type": "flat", "shard_rows": 10240, "recall_queries": 0}
    run, _ = dense_search(
        work / "unused.faiss", flat, work / "corpus.parquet", work / "queries.parquet",
        top_k=1000, remove_self_matches=remove_self_matches, batch_size=1024, latency_queries=0,
    )  # fmt: skip
    scores = score_run(run, pd.read_parquet(tables / "qrels.parquet"), ["ndcg_cut.10"])
    return float(scores.loc[scores["metric"] == "ndcg_cut_10", "value"].mean())


def published() -> dict[str, float]:
    """MTEB's nDCG@10 of the model, by dataset (the first listed where two sources give one)."""
    values: dict[str, float] = {}
    for entry in load_published(PUBLISHED):
        if entry["system"].get("model") == HUB_ID and entry["metric"] == "ndcg_cut_10":
            values.setdefault(entry["dataset"], entry["value"])
    return values


def evaluate(model: str, data_dir: Path, datasets: list[str], names: list[str]) -> dict:
    torch_ndcg = published()
    spec = model_spec(model, 4096) | {"backend": BACKEND}
    results = {}
    with tempfile.TemporaryDirectory(prefix="quantization-choice-") as scratch:
        for dataset in datasets:
            tables = ingested(data_dir / dataset, Path(scratch) / dataset)
            for name in names:
                with candidate_in_place(CANDIDATES[name]):
                    encoder = Encoder.load(spec)
                work = Path(tempfile.mkdtemp(dir=scratch))
                value = ndcg_at_10(encoder, tables, dataset in REMOVE_SELF_MATCHES, work)
                difference = value - torch_ndcg[dataset]
                results[f"{name} | {dataset}"] = {"ndcg_cut_10": value, "minus_torch": difference}
                print(
                    f"{name:<32} {dataset:<9} nDCG@10 {value:.5f}  torch {torch_ndcg[dataset]:.5f}"
                    f"  {difference:+.5f}  load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/datasets"))
    parser.add_argument("--screen", type=int, help="documents of SciFact to compare by cosine")
    parser.add_argument("--datasets", nargs="+", default=[], help="score nDCG@10 on these")
    parser.add_argument("--candidates", nargs="+", choices=CANDIDATES, default=list(CANDIDATES))
    parser.add_argument("--model", default=None, help="model folder (default: the MiniLM package)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds of the screen")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    model = args.model or local_minilm()
    torch.set_num_threads(args.threads)  # ONNX Runtime's sessions take the same count
    measurements = {"load_average_1min_before": os.getloadavg()[0]}
    if args.screen:
        screened = screen(
            model, args.data_dir / "scifact", args.screen, args.candidates, args.repeats
        )
        measurements |= {f"screen | {name}": values for name, values in screened.items()}
    if args.datasets:
        measurements |= evaluate(model, args.data_dir, args.datasets, args.candidates)
    measurements["load_average_1min_after"] = os.getloadavg()[0]
    measurements["command"] = " ".join(["python", *sys.argv])
    report("onnx_quantization_choice", measurements)


if __name__ == "__main__":
    main()
