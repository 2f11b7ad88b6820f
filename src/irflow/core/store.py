"""store: results kept once per machine, shared by every experiment folder on it.

Two experiment folders that encode the same corpus with the same model make the same vectors;
the store keeps them once, under a key that is the hash of everything they depend on (the
caller's: ``irflow.encoding.vector_store``), and the second job links them instead of computing
them again. The store is a folder (``store_root``: the config key ``vector_store``, else the
environment variable ``IRFLOW_VECTOR_STORE``, else the user's cache folder,
``~/.cache/irflow/vectors`` on Linux) holding one folder per key::

    <root>/<key[:2]>/<key>/entry.json     the files' MD5 and sizes, the facts of their making
    <root>/<key[:2]>/<key>/<name>         the files

An entry is made and read under an OS lock of its key (``irflow.core.locks``): two experiments
that need the same key at once make it once, the second waiting for the first and then linking
its files. It is written whole under a temporary name in its folder and renamed into place
(``irflow.core.atomic``), so a killed writer leaves no entry, only a temporary that ``prune``
removes. Each file's MD5, recorded when it is written, is checked whenever it is read: a
damaged entry (a flipped bit, a truncated file, an unreadable ``entry.json``) is removed,
said so in the job's log, and made again.

A file is placed in an experiment folder as a copy, dated now: a hard link would share its
date with every folder's file of that inode, and dating it for one experiment would rerun what
follows it in another. Each read dates its ``entry.json``: ``prune`` removes the entries not
used for a number of days, or the least recently used ones beyond a total size.

    python -m irflow.core.store list [--root FOLDER]
    python -m irflow.core.store prune [--older-than DAYS] [--max-size SIZE] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from irflow.core import atomic, locks
from irflow.core.atomic import atomic_path
from irflow.core.fingerprint import file_md5

log = logging.getLogger(__name__)

ENVIRONMENT = "IRFLOW_VECTOR_STORE"
# IRFLOW_VECTOR_STORE=off: no store (the tests' default, tests/conftest.py).
OFF = "off"
ENTRY = "entry.json"


def store_root(configured: str | bool | None = None) -> Path | None:
    """The store's folder: ``configured`` (the config key ``vector_store``) when it names one,
    none when it is ``false``; else (null or true) ``$IRFLOW_VECTOR_STORE`` (``off``: none);
    else the user's cache folder (platformdirs), ``irflow/vectors`` in it."""
    if configured is False:
        return None
    if isinstance(configured, str):
        return Path(configured).expanduser()
    from_environment = os.environ.get(ENVIRONMENT)
    if from_environment == OFF:
        return None
    if from_environment:
        return Path(from_environment).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("irflow")) / "vectors"


@dataclass(frozen=True)
class Entry:
    """One entry as ``list`` shows it."""

    folder: Path
    key: str
    bytes: int
    last_used: float  # seconds since the epoch
    describes: dict


def _place(source: Path, target: Path) -> str:
    """``target`` holds a copy of ``source``'s bytes, dated now (the job's inputs, made just
    before it, must not be newer); returns how it was placed. A copy, not a hard link: dating a
    hard link dates every folder's file of that inode, and Snakemake then reruns what follows
    them in the experiment that made them (test_workflow's second experiment folder did)."""
    with atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)
    os.utime(target)
    return "copy"


def _damage(folder: Path) -> tuple[dict | None, str | None]:
    """(the entry's record, None), or (None, what is wrong with it)."""
    try:
        record = json.loads((folder / ENTRY).read_text(encoding="utf-8"))
        files = record["files"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        return None, f"its {ENTRY} cannot be read ({error})"
    for name, recorded in files.items():
        path = folder / name
        if not path.is_file():
            return None, f"{name} is missing"
        if path.stat().st_size != recorded["bytes"]:
            return None, f"{name} holds {path.stat().st_size} bytes, not {recorded['bytes']}"
        if file_md5(path) != recorded["md5"]:
            return None, f"{name} has the MD5 {file_md5(path)}, not {recorded['md5']}"
    return record, None


class Store:
    """The entries under ``root``."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def folder(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{8,}", key):
            raise ValueError(f"a store key is a hex digest, not {key!r}")
        return self.root / key[:2] / key

    def obtain(
        self, key: str, targets: dict[str, Path], make: Callable[[], dict], describes: dict
    ) -> tuple[dict, dict]:
        """The files of ``key`` at ``targets`` (name in the entry -> path): linked from the
        store when it holds them intact, else made by ``make()`` (which writes every target
        and returns the facts of their making) and stored. Returns those facts and what the
        store did: ``found`` (and each file's ``placed``: a copy), and, when an
        entry was damaged, ``rebuilt`` saying how."""
        folder = self.folder(key)
        done = {"key": key, "entry": str(folder)}
        with locks.holding(folder):
            if folder.exists():
                record, damage = _damage(folder)
                if record is not None:
                    placed = {name: _place(folder / name, path) for name, path in targets.items()}
                    os.utime(folder / ENTRY)
                    return record["facts"], done | {"found": True, "placed": placed}
                log.warning("vector store entry %s is damaged: %s; made again", folder, damage)
                shutil.rmtree(folder)
                done["rebuilt"] = damage
            facts = make()
            self._put(folder, key, targets, facts, describes)
        return facts, done | {"found": False}

    @staticmethod
    def _put(folder: Path, key: str, targets: dict, facts: dict, describes: dict) -> None:
        with atomic_path(folder) as tmp:
            tmp.mkdir()
            files = {}
            for name, path in targets.items():
                _place(path, tmp / name)
                files[name] = {"md5": file_md5(tmp / name), "bytes": (tmp / name).stat().st_size}
            record = {
                "key": key,
                "describes": describes,
                "files": files,
                "facts": facts,
                "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
            text = json.dumps(record, indent=2, sort_keys=True, default=str) + "\n"
            (tmp / ENTRY).write_text(text, encoding="utf-8")

    def entries(self) -> list[Entry]:
        """Every entry, least recently used first (damaged ones too: their files are not
        checked here)."""
        found = []
        for record_path in self.root.glob(f"*/*/{ENTRY}"):
            folder = record_path.parent
            if atomic.temporary_owner(folder.name) is not None:
                continue
            try:
                describes = json.loads(record_path.read_text(encoding="utf-8"))["describes"]
            except (OSError, ValueError, KeyError):
                describes = {"damaged": f"its {ENTRY} cannot be read"}
            size = sum(path.stat().st_size for path in folder.iterdir() if path.is_file())
            found.append(Entry(folder, folder.name, size, record_path.stat().st_mtime, describes))
        return sorted(found, key=lambda entry: entry.last_used)

    def prune(
        self, older_than_days: float | None, max_bytes: int | None, dry_run: bool = False
    ) -> list[Entry]:
        """Remove the entries last used more than ``older_than_days`` ago, then the least
        recently used ones until the rest hold at most ``max_bytes``, and the temporaries of
        writers that were killed; returns the entries removed (with ``dry_run``, that would
        be)."""
        entries = self.entries()
        now = time.time()
        removed = [
            entry
            for entry in entries
            if older_than_days is not None and now - entry.last_used > older_than_days * 86400
        ]
        kept = [entry for entry in entries if entry not in removed]
        total = sum(entry.bytes for entry in kept)
        for entry in kept:
            if max_bytes is None or total <= max_bytes:
                break
            removed.append(entry)
            total -= entry.bytes
        if not dry_run:
            for entry in removed:
                with locks.holding(entry.folder):
                    shutil.rmtree(entry.folder, ignore_errors=True)
            if self.root.is_dir():
                atomic.remove_dead_temporaries(self.root)
        return removed


SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes of ``500M``, ``20G``, ``1.5T`` or ``1048576`` (units of 1024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 500M, 20G or 1.5T")
    return int(float(match[1]) * SIZE_UNITS[match[2].upper()])


def _shown(size: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if size >= SIZE_UNITS[unit]:
            return f"{size / SIZE_UNITS[unit]:.1f}{unit}"
    return f"{size}B"


def _line(entry: Entry) -> str:
    used = datetime.fromtimestamp(entry.last_used, timezone.utc).strftime("%Y-%m-%d %H:%M")
    what = " ".join(f"{key}={value}" for key, value in sorted(entry.describes.items()))
    return f"{entry.key}  {_shown(entry.bytes):>7}  {used}  {what}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m irflow.core.store",
        description="List the vector store shared by this machine's experiments, or prune it.",
    )
    parser.add_argument(
        "--root",
        type=Path,
        help=f"the store's folder (default: ${ENVIRONMENT}, else the user's cache folder)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="each entry: key, size, last used (UTC), what it holds")
    prune = commands.add_parser("prune", help="remove entries by age or total size")
    prune.add_argument("--older-than", type=float, metavar="DAYS", help="not used for DAYS")
    prune.add_argument("--max-size", type=parse_size, metavar="SIZE", help="e.g. 20G")
    prune.add_argument("--dry-run", action="store_true", help="say what would be removed")
    args = parser.parse_args(argv)
    root = args.root or store_root()
    if root is None:
        parser.error(f"{ENVIRONMENT}={OFF}: no store; name one with --root")
    store = Store(root)
    if args.command == "list":
        entries = store.entries()
        for entry in entries:
            print(_line(entry))
        print(f"{len(entries)} entries, {_shown(sum(e.bytes for e in entries))} in {root}")
        return 0
    if args.older_than is None and args.max_size is None:
        parser.error("prune needs --older-than DAYS, --max-size SIZE or both")
    removed = store.prune(args.older_than, args.max_size, args.dry_run)
    for entry in removed:
        print(("would remove " if args.dry_run else "removed ") + _line(entry))
    freed = _shown(sum(entry.bytes for entry in removed))
    print(f"{len(removed)} entries, {freed}" + (" would be freed" if args.dry_run else " freed"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
