"""local_files: the files of a local model or tokenizer folder that a job reads, so that
editing them reruns it (none for a Hugging Face id): the input functions' shared helpers."""

import functools
import re
from pathlib import Path

# The files a Hugging Face tokenizer is read from (not the weights beside them in a model's
# folder, so that replacing those does not rebuild what only the tokenizer decides).
TOKENIZER_FILES = re.compile(r"(.*token.*|vocab.*|merges\.txt|.*\.model|config\.json)")


@functools.cache
def local_folder_files(folder):
    """Every file under a local folder, listed once per workflow (not per job); none for a
    Hugging Face id."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(str(p) for p in folder.rglob("*") if p.is_file())


def tokenizer_files(source):
    """A local tokenizer's files, as inputs; none for a Hugging Face id."""
    folder = Path(source["id"])
    if not folder.is_dir():
        return []
    return sorted(
        str(p) for p in folder.iterdir() if p.is_file() and TOKENIZER_FILES.fullmatch(p.name)
    )
