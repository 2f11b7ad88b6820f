"""timing: the wall-clock seconds of each call, as cost's latencies measure them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable


def time_each(function: Callable[[object], object], items: Iterable) -> list[float]:
    """Wall-clock seconds of ``function(item)`` for each item, one at a time."""
    seconds = []
    for item in items:
        started = time.perf_counter()
        function(item)
        seconds.append(time.perf_counter() - started)
    return seconds
