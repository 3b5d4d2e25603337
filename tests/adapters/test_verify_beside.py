"""``ari-ledger verify`` reads the log once for both of its checks (issue 30, item 4): the log's,
and the snapshot's rows, compared as digests of what the events make with digests of the
stored rows, the log's pieces shared with a second process (one digest per piece). Its
verification is the one the two separate checks give (the log checked, then the snapshot
against a fresh read of it), on a sound checkpoint, on damage early or late in the log, and on
a snapshot row that differs early or late (then named by the row-by-row comparison), with one
count of progress that ends at the total. It also shares a large log with a second process,
which library verify never does.

A free CPU is forced, so each test fails where the second process is not used, whatever the
machine running it has free."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import ledger.log
import ledger.verify
import projections.engines.snapshot_check as snapshot_check
import projections.tools.checkpoint as checkpoint
from ledger import Ledger
from ledger.layout import SNAPSHOT_NAME, store_dir
from ledger.log import LOG_NAME
from projections.engines.local import Projector
from projections.engines.snapshot import open_snapshot
from projections.models.catalog import Catalog, EntryRecord
from projections.models.embedder import get_embedder
from projections.models.frozen import Records
from support.env import ari_ledger

MEMBERS = 12
PER_MEMBER = 25
EVENTS = MEMBERS * PER_MEMBER
FIRST_HALF_SEQ = 10  # a seq of the first piece of the log, where this process starts
SECOND_HALF_SEQ = EVENTS - 20  # a seq of the last piece, where the second process starts
NODES_AT = {4, EVENTS - 10}  # (0-based) events that start a node instead of adding an entry


@pytest.fixture
def folded(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkpoint of EVENTS entries in MEMBERS members (each in the side index, so the log
    splits at any of them) and its snapshot."""
    monkeypatch.setattr(ledger.log, "IDX_STRIDE", 1)
    with Ledger.open(ckpt) as lg:
        for m in range(MEMBERS):
            with lg.batch() as batch:
                for i in range(m * PER_MEMBER, (m + 1) * PER_MEMBER):
                    node = f"node_{i % 7}"
                    if i in NODES_AT:  # a node of the small tables in each half
                        batch.append(node, "node_started", {"label": "draft", "depth": i}, current_node=node)
                    else:
                        batch.append(node, "memory_added", {"text": f"entry {i}: stencil"}, current_node=node)
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


def both(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, list[int], list[int], list[int]]:
    """(the two checks one after the other, the one read split in two processes, the counts
    the latter reported, the row-by-row comparisons it fell back to, the whole log's reads in
    one process it fell back to), checking that its second process was started."""
    monkeypatch.setattr(checkpoint, "ONE_READ_FROM", 10**12)
    alone = checkpoint.verify(ckpt)
    forks: list[int] = []
    rows_compared: list[int] = []
    again: list[int] = []
    by_rows = snapshot_check.catalog_problem
    serial = ledger.verify._verify_serial

    def counted_serial(*args: Any) -> Any:
        again.append(1)
        return serial(*args)

    def counted_by_rows(*args: Any, **kwargs: Any) -> Any:
        rows_compared.append(1)
        return by_rows(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "ONE_READ_FROM", 0)
    monkeypatch.setattr(ledger.verify, "PARALLEL_FROM", 0)
    monkeypatch.setattr(ledger.verify, "Beside", counted_beside(forks))
    monkeypatch.setattr(snapshot_check, "catalog_problem", counted_by_rows)  # its fall-back, not check_snapshot's call
    monkeypatch.setattr(ledger.verify, "_verify_serial", counted_serial)
    # a second CPU and no other thread, whatever this machine has free or earlier tests left running
    monkeypatch.setattr(ledger.verify, "second_cpu", lambda: True)
    counts: list[int] = []
    beside = checkpoint.verify(ckpt, progress=lambda done, _total: counts.append(done))
    assert forks == [1], "the log was not split between two processes"
    return alone, beside, counts, rows_compared, again


def test_sound_checkpoint(folded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone, beside, counts, rows_compared, again = both(folded, monkeypatch)
    assert again == [], "the pieces were not joined"
    assert alone.passed and alone.snapshot is not None and alone.snapshot.cursor == EVENTS
    assert beside.as_dict() == alone.as_dict()
    assert rows_compared == [], "the digests disagreed on a sound snapshot"
    assert counts == sorted(counts) and counts[-1] == 2 * EVENTS  # the log's events and the snapshot's


def forge(ckpt: Path, seq: int, edit: Callable[[Any, Any, int], None]) -> None:
    """A snapshot with valid checksums whose row of ``seq`` was changed by ``edit(rows, block, i)``
    (a bug, or an edit): the log folded afresh, edited in memory, saved."""
    with Ledger.open(ckpt) as lg:
        event = next(e for e in lg.events() if e.seq == seq)
        p = Projector(lg, get_embedder(), use_snapshot=False)
        p.catch_up()
        rows = p.catalog.fresh(event.node)
        edit(rows, p.index.blocks[event.node], rows.seqs.index(seq))
        assert p.save()


def other_text(rows: Any, _block: Any, i: int) -> None:
    ts, body, kind = msgspec.json.decode(rows.records[i])
    rows.records[i] = msgspec.json.encode(EntryRecord(ts, {**body, "text": "a text that is not in the log"}, kind))


def keys_reordered(rows: Any, _block: Any, i: int) -> None:
    ts, body, kind = msgspec.json.decode(rows.records[i])
    rows.records[i] = json.dumps([ts, dict(reversed(list(body.items()))), kind], separators=(", ", ": ")).encode()


def other_id(rows: Any, block: Any, i: int) -> None:
    rows.ids[i] = block.ids[i] = "01a234eb-0000-7000-8000-000000000000"


@pytest.mark.parametrize("seq", [FIRST_HALF_SEQ, SECOND_HALF_SEQ], ids=["first_half", "second_half"])
@pytest.mark.parametrize(
    ("edit", "sound"),
    [(other_text, False), (other_id, False), (keys_reordered, True)],
    ids=["other_text", "other_id", "same_record_in_other_bytes"],
)
def test_a_row_that_differs_in_either_half(
    folded: Path, monkeypatch: pytest.MonkeyPatch, seq: int, edit: Callable[[Any, Any, int], None], sound: bool
) -> None:
    forge(folded, seq, edit)
    alone, beside, _, rows_compared, again = both(folded, monkeypatch)
    assert again == [] and rows_compared == [1], "the digests did not tell the rows apart"
    assert beside.as_dict() == alone.as_dict()
    assert alone.passed == sound
    if not sound:
        assert any(f"seq {seq}" in p and "disagrees with the log" in p for p in alone.problems), alone.problems


@pytest.mark.parametrize("where", [0.1, 0.9], ids=["first_half", "second_half"])
@pytest.mark.parametrize("damaged", [LOG_NAME, SNAPSHOT_NAME])
def test_damage_in_either_half(folded: Path, monkeypatch: pytest.MonkeyPatch, damaged: str, where: float) -> None:
    path = store_dir(folded) / damaged
    raw = bytearray(path.read_bytes())
    raw[int(len(raw) * where)] ^= 0xFF
    path.write_bytes(bytes(raw))
    alone, beside, _, _, again = both(folded, monkeypatch)
    assert not alone.passed
    if damaged == LOG_NAME:
        assert alone.report.reason is not None and alone.snapshot is None  # a damaged log: no snapshot verdict
        assert again == [1], "damage was not reported by the one-process check"
    else:
        assert any(SNAPSHOT_NAME in p for p in alone.problems)
    assert beside.as_dict() == alone.as_dict()


def test_digests_do_not_depend_on_chunks_and_see_every_column(folded: Path) -> None:
    """The stored rows' digests, cut at any seq, equal those of what the events make on each
    side of that cut, whatever the chunks the rows came in; a change to any column of one row
    changes them."""
    with Ledger.open_readonly(folded) as lg:
        events = list(lg.events())
        view = open_snapshot(lg.path.with_name(SNAPSHOT_NAME), check=True)
        catalog = Catalog(view, view.tables)
        for cut in (1, 2, FIRST_HALF_SEQ, EVENTS, EVENTS + 1):
            parts = [snapshot_check.MadeRows(EVENTS), snapshot_check.MadeRows(EVENTS)]
            for start in range(0, EVENTS, 7):  # chunks unlike the members'
                batch = events[start : start + 7]
                parts[0].see([e for e in batch if e.seq < cut])
                parts[1].see([e for e in batch if e.seq >= cut])
            made = [p.outcome().rows for p in parts]
            assert made == snapshot_check.stored_digests(catalog, [1, cut])
    one = snapshot_check.RowDigest()
    one.add((["a", "b"], ["i1", "i2"], [1, 2], Records.of([b"x", b"yz"])))
    for changed in [
        (["a", "c"], ["i1", "i2"], [1, 2], [b"x", b"yz"]),
        (["a", "b"], ["i1", "i3"], [1, 2], [b"x", b"yz"]),
        (["a", "b"], ["i1", "i2"], [1, 3], [b"x", b"yz"]),
        (["a", "b"], ["i1", "i2"], [1, 2], [b"xy", b"z"]),  # the same bytes, cut elsewhere
    ]:
        other = snapshot_check.RowDigest()
        names, ids, seqs, records = changed
        other.add((names, ids, seqs, Records.of(records)))
        assert other.digest() != one.digest()


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


@pytest.mark.parametrize("node", ["node_4", "node_3"], ids=["first_half", "second_half"])
def test_a_node_the_snapshot_lacks_in_either_half(folded: Path, monkeypatch: pytest.MonkeyPatch, node: str) -> None:
    """The small tables (nodes, seeds, tombstones) folded from every piece's events, in order."""
    with Ledger.open(folded) as lg:
        p = Projector(lg, get_embedder(), use_snapshot=False)
        p.catch_up()
        assert node in p.catalog.nodes
        del p.catalog.nodes[node]
        assert p.save()
    alone, beside, _, rows_compared, again = both(folded, monkeypatch)
    assert again == [] and rows_compared == []  # the rows are the log's: only the tables differ
    assert beside.as_dict() == alone.as_dict()
    assert any("its nodes, seeds or tombstones differ" in p for p in alone.problems), alone.problems
