"""``ari-ledger verify`` checks the snapshot in a second process while it checks the log (issue
30, item 4): the same verification as one process gives, on a sound checkpoint, a snapshot
that disagrees with the log, and a damaged log (whose snapshot check is then not reported),
with one count of progress that ends at the total. It also checks half of a large log in a
second process, which library verify never does.

A free CPU is forced, so each test fails where the second process is not used, whatever the
machine running it has free."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ledger.log
import ledger.verify
import projections.tools.checkpoint as checkpoint
from ledger import Ledger
from ledger.layout import SNAPSHOT_NAME, store_dir
from ledger.log import LOG_NAME
from support.env import ari_ledger

EVENTS = 300


@pytest.fixture
def folded(ckpt: Path) -> Path:
    """A checkpoint of EVENTS entries and its snapshot."""
    with Ledger.open(ckpt) as lg, lg.batch() as batch:
        for i in range(EVENTS):
            batch.append(f"node_{i % 7}", "memory_added", {"text": f"entry {i}: stencil"}, current_node=f"node_{i % 7}")
    run = ari_ledger("rebuild", ckpt)
    assert (store_dir(ckpt) / SNAPSHOT_NAME).exists(), run.stderr
    return ckpt


def counted_beside(forks: list[int]) -> type[ledger.verify.Beside[Any]]:
    """:class:`ledger.verify.Beside`, each process it starts counted in ``forks``."""

    class Counted(ledger.verify.Beside):  # type: ignore[type-arg]
        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            forks.append(1)

    return Counted


def both(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, list[int]]:
    """(as one process verifies, with the snapshot checked beside, the counts the second reported),
    checking that the second process was started and that its check is the one used (none of
    the snapshot's checking ran in this process)."""
    forks: list[int] = []
    here: list[int] = []
    check = checkpoint.check_snapshot

    def counted_check(*args: Any, **kwargs: Any) -> Any:
        here.append(1)  # (a call in the forked process is counted in its own copy)
        return check(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "BESIDE_FROM", 10**12)
    alone = checkpoint.verify(ckpt)
    monkeypatch.setattr(checkpoint, "BESIDE_FROM", 0)
    monkeypatch.setattr(checkpoint, "Beside", counted_beside(forks))
    monkeypatch.setattr(checkpoint, "check_snapshot", counted_check)
    # a second CPU and no other thread, whatever this machine has free or earlier tests left running
    monkeypatch.setattr(checkpoint, "second_cpu", lambda: True)
    counts: list[int] = []
    beside = checkpoint.verify(ckpt, progress=lambda done, _total: counts.append(done))
    assert forks == [1], "the snapshot was not checked in a second process"
    assert here == [], "the snapshot was checked in this process, not (only) beside it"
    return alone, beside, counts


def test_sound_checkpoint(folded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone, beside, counts = both(folded, monkeypatch)
    assert alone.passed and alone.snapshot is not None and alone.snapshot.cursor == EVENTS
    assert beside.as_dict() == alone.as_dict()
    assert counts == sorted(counts) and counts[-1] == 2 * EVENTS  # the log's events, then the snapshot's


@pytest.mark.parametrize(
    ("damaged", "found"),
    [
        pytest.param(
            SNAPSHOT_NAME,
            lambda v: not v.passed and any(SNAPSHOT_NAME in p for p in v.problems),
            id="snapshot_that_disagrees_with_the_log",
        ),
        pytest.param(
            LOG_NAME,
            lambda v: v.report.reason is not None and v.snapshot is None,
            id="damaged_log_reports_no_snapshot_check",
        ),
    ],
)
def test_damage(folded: Path, monkeypatch: pytest.MonkeyPatch, damaged: str, found: Callable[[Any], bool]) -> None:
    path = store_dir(folded) / damaged
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    alone, beside, _ = both(folded, monkeypatch)
    assert found(alone) and found(beside)
    assert beside.as_dict() == alone.as_dict()


def test_large_log_is_checked_in_two_processes(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``ari-ledger verify`` asks for ("auto") splits a log of PARALLEL_FROM bytes or more
    where a CPU is free; ``Ledger.verify`` on the same log does not."""
    monkeypatch.setattr(ledger.log, "IDX_STRIDE", 1)  # a side index record at every member: splits anywhere
    with Ledger.open(ckpt) as lg:
        for m in range(12):
            with lg.batch() as batch:
                for i in range(5):
                    batch.append("root", "memory_added", {"text": f"result {m}.{i}"}, current_node="root")
    forks: list[int] = []
    monkeypatch.setattr(ledger.verify, "PARALLEL_FROM", (store_dir(ckpt) / LOG_NAME).stat().st_size)
    monkeypatch.setattr(ledger.verify, "second_cpu", lambda: True)
    monkeypatch.setattr(ledger.verify, "Beside", counted_beside(forks))
    with Ledger.open_readonly(ckpt) as lg:
        serial = lg.verify()
        assert forks == [], "library verify forked"
        found = checkpoint.verify_open(lg)
    assert forks == [1], "ari-ledger verify checked the log in one process"
    assert found.passed and found.report == serial and serial.events == 60
