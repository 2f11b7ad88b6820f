"""filter: documents per second of irflow's filter stage, by which filters are on, and the two
filters backed by a library against that library called bare on the same texts.

- basic: the default rules (empty documents), what every run of the workflow pays;
- gopher: the ten Arctic-Embed / Gopher quality measures (pure Python, no library to compare);
- language: py3langid only, against bare py3langid (``LanguageIdentifier.rank`` with
  normalised probabilities) on every document;
- near_duplicates: MinHash LSH only, against bare datasketch (MinHash of the same shingles,
  LSH query and insert, estimated Jaccard of each candidate);
- all: everything at once.

irflow's times include reading the corpus Parquet, writing the kept rows and the audit.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
from _harness import best_of, report
from datasketch import LeanMinHash, MinHash, MinHashLSH
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from irflow.config import load_schema, validate_config
from irflow.contracts import document_texts
from irflow.dedup import shingles
from irflow.filter import run_filter
from irflow.ingest import ingest
from irflow.quality import FILTERS, Document, expected_language_probability

REPO = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(REPO / "config" / "config.schema.yaml")
# Every quality filter but language identification.
GOPHER = [name for name in FILTERS if name != "language"]


def rules(quality: list[str], near_duplicates: bool) -> dict:
    """The validated ``filter`` block with these filters on and the schema's defaults."""
    config = {
        "datasets": {"d": {"source": {"path": "."}}},
        "retrievers": {"r": {"type": "bm25"}},
        "filter": {
            "quality": {name: {"enabled": True} for name in quality},
            "near_duplicates": {"enabled": near_duplicates},
        },
    }
    return validate_config(config, SCHEMA)["filter"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/arguana"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    settings = {
        "basic": rules([], False),
        "gopher": rules(GOPHER, False),
        "language": rules(["language"], False),
        "near_duplicates": rules([], True),
        "all": rules(list(FILTERS), True),
    }
    near = settings["near_duplicates"]["near_duplicates"]

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus_file = next(args.dataset.glob("corpus.jsonl*"))
        ingest(
            corpus_file, args.dataset / "queries.jsonl", args.dataset / "qrels" / "test.tsv", tmp
        )
        corpus = pq.read_table(tmp / "corpus.parquet")
        texts = document_texts(
            corpus.column("title").to_pylist(), corpus.column("text").to_pylist()
        )

        def irflow(name: str):
            def run() -> None:
                out = tmp / name
                run_filter(
                    tmp / "corpus.parquet",
                    tmp / "queries.parquet",
                    tmp / "qrels.parquet",
                    settings[name],
                    out / "corpus.parquet",
                    out / "queries.parquet",
                    out / "audit.parquet",
                    out / "clusters.parquet",
                )

            return run

        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)

        def bare_language() -> None:
            for text in texts:
                identifier.rank(text)

        def bare_near_duplicates() -> None:
            lsh = MinHashLSH(threshold=near["threshold"], num_perm=near["permutations"])
            signatures = {}
            for position, text in enumerate(texts):
                grams = shingles(text, near["shingle_words"])
                if not grams:
                    continue
                minhash = MinHash(num_perm=near["permutations"], seed=near["seed"])
                minhash.update_batch([g.encode() for g in grams])
                minhash = LeanMinHash(minhash)
                for other in lsh.query(minhash):
                    minhash.jaccard(signatures[other])
                lsh.insert(position, minhash)
                signatures[position] = minhash

        # Load irflow's copy of the model before timing, as the bare one is loaded above.
        expected_language_probability(Document.of("warm up"), "en")
        functions = {f"irflow_{name}": irflow(name) for name in settings}
        functions |= {"bare_language": bare_language, "bare_near_duplicates": bare_near_duplicates}
        seconds = best_of(functions, args.repeats)

    documents = len(texts)
    measurements: dict = {"dataset": args.dataset.name, "documents": documents}
    for name in settings:
        measurements[f"{name}_docs_per_second"] = documents / seconds[f"irflow_{name}"]
    for name in ("language", "near_duplicates"):
        measurements[f"bare_{name}_docs_per_second"] = documents / seconds[f"bare_{name}"]
        # The basic rules and the Parquet input and output are paid by every configuration.
        measurements[f"{name}_time_over_bare"] = seconds[f"irflow_{name}"] / seconds[f"bare_{name}"]
        measurements[f"{name}_added_time_over_bare"] = (
            seconds[f"irflow_{name}"] - seconds["irflow_basic"]
        ) / seconds[f"bare_{name}"]
    report("filter_throughput", measurements)


if __name__ == "__main__":
    main()
