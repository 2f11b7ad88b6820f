"""The two layouts of a dataset folder, told apart by its file names alone:
- BEIR: ``corpus.jsonl[.gz]``, ``queries.jsonl[.gz]`` and ``qrels/<split>.tsv``;
- PosIR (one language/domain folder of PosIR-Benchmark-v1, as its eval.sh reads it):
  ``corpus.parquet``, ``queries.parquet`` and ``qrels/<split>.parquet``.
A folder complete in both is refused rather than guessed at.

Apart from irflow.data.download, so that what every job imports to check its dataset's files
(irflow.workflow.stamps) loads neither the config's validation nor an HTTP client (0.17 s of
each job's start).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from irflow.core.errors import DownloadError
from irflow.core.fingerprint import file_md5

# Each layout's corpus, queries and qrels files, in that order; each entry lists the names the
# file may have, the first found wins.
LAYOUT_FILES = {
    "beir": (
        ("corpus.jsonl", "corpus.jsonl.gz"),
        ("queries.jsonl", "queries.jsonl.gz"),
        ("qrels/{split}.tsv",),
    ),
    "posir": (("corpus.parquet",), ("queries.parquet",), ("qrels/{split}.parquet",)),
}
LAYOUT_NAMES = {"beir": "BEIR", "posir": "PosIR"}


def _layout_files(folder: Path, layout: str, split: str) -> tuple[list[Path], list[str]]:
    """The files of ``layout`` present in ``folder`` (corpus, queries, qrels) and those missing."""
    found, missing = [], []
    for candidates in LAYOUT_FILES[layout]:
        names = [name.format(split=split) for name in candidates]
        present = [folder / name for name in names if (folder / name).is_file()]
        if present:
            found.append(present[0])
        else:
            missing.append(" or ".join(names))
    return found, missing


def missing_files(folder: Path, split: str) -> str:
    """What ``folder`` lacks, for an error message: of each layout it holds a file of, or of
    BEIR's alone when it holds none (a BEIR user is not told of PosIR's files)."""
    lacking = {layout: _layout_files(folder, layout, split)[1] for layout in LAYOUT_FILES}
    started = [
        layout for layout in LAYOUT_FILES if len(lacking[layout]) < len(LAYOUT_FILES[layout])
    ]
    return "; ".join(
        f"{LAYOUT_NAMES[layout]} layout lacks {', '.join(lacking[layout])}"
        for layout in started or ["beir"]
    )


def dataset_layout(folder: Path, split: str) -> str | None:
    """``"beir"`` or ``"posir"``: the layout whose files are all in ``folder``; None if neither.

    A folder complete in both layouts is refused: which files are the dataset would be a guess.
    """
    if not folder.is_dir():
        return None
    complete = [layout for layout in LAYOUT_FILES if not _layout_files(folder, layout, split)[1]]
    if len(complete) > 1:
        files = ", ".join(
            str(path.relative_to(folder))
            for layout in complete
            for path in _layout_files(folder, layout, split)[0]
        )
        raise DownloadError(
            f"{folder} holds a dataset in both BEIR and PosIR layout ({files}); "
            "keep the files of one layout only"
        )
    return complete[0] if complete else None


def dataset_files(folder: Path, split: str) -> list[Path]:
    """The corpus, queries and qrels files of ``folder``, in that order, in its layout."""
    layout = dataset_layout(folder, split)
    if layout is None:
        raise DownloadError(f"{folder} is not a dataset folder: {missing_files(folder, split)}")
    return _layout_files(folder, layout, split)[0]


def dataset_fingerprint(folder: Path, split: str) -> dict:
    """MD5 of each dataset file, keyed by path relative to ``folder``, and one checksum over all."""
    files = {
        path.relative_to(folder).as_posix(): file_md5(path) for path in dataset_files(folder, split)
    }
    lines = "".join(f"{relpath}:{md5}\n" for relpath, md5 in sorted(files.items()))
    return {"files": files, "checksum": hashlib.md5(lines.encode()).hexdigest()}
