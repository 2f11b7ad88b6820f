"""progress: how far a long step has got, as a log line every few seconds.

A job's stderr is no terminal (Snakemake runs it as a subprocess, a cluster writes it to a
file), so a tqdm bar there is either switched off (``disable=None``) or megabytes of carriage
returns. ``LoggedProgress`` is a tqdm whose every refresh is one line through ``logging``: it
reaches the terminal and the rule's log alike (scripts/_common.py), at most one line every
``IRFLOW_PROGRESS_SECONDS`` (10 by default) besides the first and the last, so a killed job's
log says how far it got, and at what rate.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from tqdm import tqdm

log = logging.getLogger("irflow.progress")

SECONDS_VARIABLE = "IRFLOW_PROGRESS_SECONDS"
DEFAULT_SECONDS = 10.0
# With a total: done, share, rate and time left; without one, done and rate.
KNOWN_TOTAL = (
    "{desc}: {n_fmt}/{total_fmt} {unit} ({percentage:.0f} %) in {elapsed}, {rate_fmt}, "
    "{remaining} left"
)
UNKNOWN_TOTAL = "{desc}: {n_fmt} {unit} in {elapsed}, {rate_fmt}"


def interval_seconds() -> float:
    return float(os.environ.get(SECONDS_VARIABLE) or DEFAULT_SECONDS)


class LoggedProgress(tqdm):
    """tqdm drawn as log lines: one when it starts, one every ``interval_seconds`` while it
    advances, and one when it closes."""

    def __init__(self, iterable=None, *, desc: str, total: float | None = None, **options):
        options.setdefault("unit", "items")
        options.setdefault("unit_scale", options["unit"] == "B")
        super().__init__(
            iterable,
            desc=desc,
            total=total,
            file=io.StringIO(),  # the bar itself goes nowhere: display() logs it
            mininterval=interval_seconds(),
            maxinterval=float("inf"),  # no monitor thread forcing a refresh
            miniters=0,
            dynamic_ncols=False,
            bar_format=KNOWN_TOTAL if total else UNKNOWN_TOTAL,
            **options,
        )

    def display(self, msg=None, pos=None) -> None:
        if msg is None:  # tqdm passes "" to clear a bar: nothing to log
            log.info("%s", str(self))  # as it is now, not when a handler formats it


def progress_named(name: str) -> type[LoggedProgress]:
    """A ``LoggedProgress`` class for a library that draws its own bars from a tqdm class it
    is given (huggingface_hub's ``snapshot_download(tqdm_class=...)``): each bar's lines start
    with ``name`` and the description the library gave it when made, less a remark in
    parentheses (huggingface_hub's "Reconstructing (incomplete total...)"); the library's bar
    format and later descriptions are dropped, so that every line reads as irflow's."""

    class NamedProgress(LoggedProgress):
        def __init__(self, iterable=None, **options):
            for drawn_by_the_library in ("bar_format", "name"):
                options.pop(drawn_by_the_library, None)
            given = (options.pop("desc", None) or "").split(" (")[0]
            super().__init__(iterable, desc=f"{name}: {given}" if given else name, **options)

        def set_description(self, desc=None, refresh=True) -> None:
            pass

        def set_description_str(self, desc=None, refresh=True) -> None:
            pass

    return NamedProgress


@contextmanager
def counting_batches(model, progress: LoggedProgress) -> Iterator[None]:
    """Advance ``progress`` by the rows of each batch that ``model`` (a sentence-transformers
    model or cross-encoder: a torch module) runs forward, as it runs: its first argument is the
    tokenizer's features, a tensor per name, a row per text or pair. One call encodes thousands
    of rows in minutes, a batch a few dozen; the model computes as it would without."""
    if model is None:
        yield
        return

    def count(_module, args, _output) -> None:
        progress.update(len(next(iter(args[0].values()))))

    handle = model.register_forward_hook(count)
    try:
        yield
    finally:
        handle.remove()
