"""``ari-ledger verify`` checks the snapshot in a second process while it checks the log (issue
30, item 4): the same verification as one process gives, on a sound checkpoint, a snapshot
that disagrees with the log, and a damaged log (whose snapshot check is then not reported),
with one count of progress that ends at the total."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ledger.verify
import projections.tools.checkpoint as checkpoint
from ledger import Ledger
from ledger.layout import SNAPSHOT_NAME, store_dir
from ledger.log import LOG_NAME
from support.env import subprocess_env

EVENTS = 300


@pytest.fixture
def folded(ckpt: Path) -> Path:
    """A checkpoint of EVENTS entries and its snapshot."""
    with Ledger.open(ckpt) as lg, lg.batch() as batch:
        for i in range(EVENTS):
            batch.append(f"node_{i % 7}", "memory_added", {"text": f"entry {i}: stencil"}, current_node=f"node_{i % 7}")
    run = subprocess.run(
        [sys.executable, "-m", "projections", "rebuild", str(ckpt)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=300,
    )
    assert (store_dir(ckpt) / SNAPSHOT_NAME).exists(), run.stderr
    return ckpt


def both(ckpt: Path, monkeypatch: pytest.MonkeyPatch, *, beside_used: bool = True) -> tuple[Any, Any, list[int]]:
    """(as one process verifies, with the snapshot checked beside, the counts the second reported)."""
    forks: list[int] = []

    class Counted(ledger.verify.Beside):  # type: ignore[type-arg]
        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            forks.append(1)

    monkeypatch.setattr(checkpoint, "BESIDE_FROM", 10**12)
    alone = checkpoint.verify(ckpt)
    monkeypatch.setattr(checkpoint, "BESIDE_FROM", 0)
    monkeypatch.setattr(checkpoint, "Beside", Counted)
    counts: list[int] = []
    beside = checkpoint.verify(ckpt, progress=lambda done, _total: counts.append(done))
    assert forks == [1] or not ledger.verify.second_cpu()
    return alone, beside, counts


def test_sound_checkpoint(folded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone, beside, counts = both(folded, monkeypatch)
    assert alone.passed and alone.snapshot is not None and alone.snapshot.cursor == EVENTS
    assert beside.as_dict() == alone.as_dict()
    assert counts == sorted(counts) and counts[-1] == 2 * EVENTS  # the log's events, then the snapshot's


def test_snapshot_that_disagrees_with_the_log(folded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = store_dir(folded) / SNAPSHOT_NAME
    raw = bytearray(snapshot.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    snapshot.write_bytes(bytes(raw))
    alone, beside, _ = both(folded, monkeypatch)
    assert not alone.passed and any(SNAPSHOT_NAME in p for p in alone.problems)
    assert beside.as_dict() == alone.as_dict()


def test_damaged_log_reports_no_snapshot_check(folded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = store_dir(folded) / LOG_NAME
    raw = bytearray(log.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    log.write_bytes(bytes(raw))
    alone, beside, _ = both(folded, monkeypatch)
    assert alone.report.reason is not None and alone.snapshot is None
    assert dataclasses.asdict(beside.report) == dataclasses.asdict(alone.report) and beside.snapshot is None
