"""seeds: a sampling step run under several seeds, and the spread of its results over them.

The overview of benchmarks and metrics asks a paper to "Report variance across multiple runs
(3-5 seeds)" (shared/references/benchmarks-and-metrics.txt, line 629) and to "Report mean and
standard deviation across runs" (benchmarks-and-metrics.txt, line 643). Every step of irflow that
samples (a generated benchmark, a positionalize block's random fillers, the subsampling of
benchmark agreement) takes its ``seed`` as one integer, as before, or as a list of them.

- A step that makes datasets makes one per seed: the first seed's keeps the configured name
  (so a config that lists one seed, or adds seeds after it, reruns nothing it ran before), each
  other seed's is the name with ``@seed<seed>`` (``airbench-scifact@seed1``), which no
  configured name can be (``@`` is not allowed in one). Adding a seed runs only that seed's jobs.
- The tables show a dataset made under several seeds once, as the mean ± the standard deviation
  over its seeds (``mean_sd``: the sample standard deviation, ddof 1, as pandas and
  ``numpy.std(ddof=1)`` compute it); the summary and the database keep each seed's rows, with
  the seed in a ``seed`` column (null for a dataset made under one seed).
"""

from __future__ import annotations

import math

import numpy as np

# The mark between a dataset's name and its seed: "name@seed1".
SEED_MARK = "@seed"


def seed_list(value: int | list[int]) -> list[int]:
    """A config's ``seed``, one integer or a list of them, as a list."""
    return [value] if isinstance(value, int) else list(value)


def seeded_names(name: str, value: int | list[int]) -> dict[str, int]:
    """Each seed's name for what ``name`` makes under ``value`` (its config's ``seed``): the
    first seed keeps ``name``, each other is ``name@seed<seed>``."""
    seeds = seed_list(value)
    return {name: seeds[0]} | {f"{name}{SEED_MARK}{seed}": seed for seed in seeds[1:]}


def seed_groups(copies: dict[str, dict[str, int]]) -> dict[str, dict]:
    """``copies`` (per name as configured, its ``seeded_names``) as the results tables' layout
    wants it: each dataset made under more than one seed, with the name its seeds are shown
    under (``of``) and its ``seed``. A dataset made under one seed is left out, so that a
    config of one seed lays its tables out as before."""
    return {
        name: {"of": first, "seed": seed}
        for first, names in copies.items()
        if len(names) > 1
        for name, seed in names.items()
    }


def mean_sd(values: list[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (ddof 1; NaN for a single value)."""
    array = np.asarray(values, dtype=float)
    sd = float(array.std(ddof=1)) if len(array) > 1 else math.nan
    return float(array.mean()), sd


def mean_sd_text(values: list[float]) -> str:
    """``0.4123 ± 0.0123``: four decimals, as the tables print a value."""
    mean, sd = mean_sd(values)
    return f"{mean:.4f} ± {sd:.4f}"
