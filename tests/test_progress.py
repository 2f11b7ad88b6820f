"""Progress as log lines: the first, one per interval while it advances, the last; and a
model's batches counted as it runs them, its output unchanged."""

from __future__ import annotations

import logging
import re

import torch

from irflow.core.progress import SECONDS_VARIABLE, LoggedProgress, counting_batches


def test_progress_is_a_log_line_per_interval(monkeypatch, caplog):
    monkeypatch.setenv(SECONDS_VARIABLE, "3600")  # no line but the first and the last
    clock = iter(range(100_000))  # a second a reading: more than a minute in all
    monkeypatch.setattr("tqdm.std.time", lambda: next(clock))
    with caplog.at_level(logging.INFO, logger="irflow.progress"):
        with LoggedProgress(desc="embed corpus", total=1000, unit="rows") as progress:
            for _ in range(10):
                progress.update(100)
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("embed corpus: 0/1000 rows (0 %) in 00:00")
    assert re.fullmatch(
        r"embed corpus: 1000/1000 rows \(100 %\) in \d\d:\d\d, +[\d.]+rows/s, 00:00 left", lines[1]
    )


def test_every_update_past_the_interval_is_a_line(monkeypatch, caplog):
    monkeypatch.setenv(SECONDS_VARIABLE, "0")
    with caplog.at_level(logging.INFO, logger="irflow.progress"):
        with LoggedProgress(desc="download x.zip", unit="B") as progress:
            for _ in range(3):
                progress.update(2048)
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0].startswith("download x.zip: 0.00 B in")  # no total: no share, no time left
    assert [line.split(" in ")[0] for line in lines[1:4]] == [
        f"download x.zip: {size} B" for size in ("2.05k", "4.10k", "6.14k")
    ]


class FeaturesModel(torch.nn.Module):
    """Takes a tokenizer's features as sentence-transformers models do."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, features: dict) -> torch.Tensor:
        return self.linear(features["input_ids"].float())


def test_a_models_batches_are_counted_as_it_runs_them(monkeypatch):
    monkeypatch.setenv(SECONDS_VARIABLE, "3600")
    model = FeaturesModel()
    batches = [
        {"input_ids": torch.ones(rows, 4), "attention_mask": torch.ones(rows, 4)}
        for rows in (8, 8, 3)
    ]
    expected = [model(batch) for batch in batches]
    with LoggedProgress(desc="encode", total=19, unit="rows") as progress:
        with counting_batches(model, progress):
            seen = [model(batch) for batch in batches]
            counted = progress.n
        model(batches[0])  # after the block: no longer counted
    assert counted == 19 and progress.n == 19
    assert all(torch.equal(a, b) for a, b in zip(seen, expected))
