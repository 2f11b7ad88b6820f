"""Atomic writes (irflow.core.atomic): a file appears whole or not at all, and two processes
writing the same output never touch each other's half-written file."""

from __future__ import annotations

import pytest

from irflow.core import atomic
from irflow.core.manifest import Manifest


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_manifest_write_leaves_other_processes_temporaries_alone(tmp_path, monkeypatch):
    """A rerun writes a manifest while another process is half-way through the same one.
    Before, every process wrote ``.<name>.tmp``: the second took the first's half-written text
    and renamed it into place, and the first then found its file gone."""
    target = tmp_path / "manifests" / "m.json"
    monkeypatch.setattr(atomic.os, "getpid", lambda: 1001)
    with atomic.atomic_path(target) as first:
        first.write_text('{"by": 1001}')
        in_progress = tmp_path / "manifests" / ".m.json.tmp"  # any other writer's file
        in_progress.write_text("another writer's")
        monkeypatch.setattr(atomic.os, "getpid", lambda: 1002)
        Manifest(target, stage="score", measures=[], queries=0, lineage={}).write()  # another
        assert first.read_text() == '{"by": 1001}'
        assert in_progress.read_text() == "another writer's"
        assert '"stage": "score"' in target.read_text()
    assert target.read_text() == '{"by": 1001}'
