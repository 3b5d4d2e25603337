"""Verify in two processes (issue 30, item 4): a log's pieces shared with a forked process (it
takes them from the last back, this one from the first, until the two meet) give the report
the one-process check gives, on a sound log and on every kind of damage, wherever it is: in a
later piece, a broken link exactly where a piece starts, a torn tail, a side index record that
is not a member's start, a redaction across pieces; and whoever checks more of the pieces.

Each test writes down the report it expects first (seq, offset, reason), then checks that
both ways of verifying give exactly it.

Only a caller that asks (``parallel="auto"``: ``ari-ledger verify``) gets the second process:
library code may run in a process with threads (ARI's MCP server), which a fork must not copy,
so ``Ledger.verify`` and the library's callers of it never fork."""

from __future__ import annotations

import errno
import io
import os
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger.log
import ledger.verify
from ledger import Ledger, VerifyReport
from ledger.anchor import Anchor
from ledger.chain import sign
from ledger.events import Event, UnsignedEvent
from ledger.layout import store_dir
from ledger.log import LOG_NAME, Member, compress_member, scan_members
from ledger.maintenance.bundle import export_bundle, import_bundle
from ledger.maintenance.redact import Selector, redact
from ledger.maintenance.repair import repair
from ledger.verify import verify

MEMBERS = 24
PER_MEMBER = 5


@pytest.fixture(autouse=True)
def every_member_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A side index record for every member, so a small log offers splits anywhere."""
    monkeypatch.setattr(ledger.log, "IDX_STRIDE", 1)


def write_log(ckpt: Path, members: int = MEMBERS, secret_at: int | None = None) -> None:
    with Ledger.open(ckpt) as lg:
        for m in range(members):
            with lg.batch() as batch:
                for i in range(PER_MEMBER):
                    n = m * PER_MEMBER + i
                    text = "the secret key" if n == secret_at else f"result {n} " + "x" * (n % 40)
                    batch.append("root", "memory_added", {"text": text}, current_node="root")


def log_path(ckpt: Path) -> Path:
    return store_dir(ckpt) / LOG_NAME


def members(ckpt: Path) -> list[Member]:
    return list(scan_members(io.BytesIO(log_path(ckpt).read_bytes())))


def split_of(ckpt: Path) -> int:
    """Where the middle one of the pieces verify cuts this log into starts."""
    with Ledger.open_readonly(ckpt) as lg:
        pieces = ledger.verify._pieces(lg.file.read_index(), lg.file.size())
    assert len(pieces) > 2
    return pieces[len(pieces) // 2][0]


def reindex(ckpt: Path) -> None:
    """A side index record for every member of the log as it is now."""
    idx = log_path(ckpt).with_name(LOG_NAME + ".idx")
    records = [(m.offset, first_seq_at(ckpt, m.offset)) for m in members(ckpt)]
    idx.write_bytes(b"".join(ledger.log._IDX_RECORD.pack(*r) for r in records))


def first_seq_at(ckpt: Path, offset: int) -> int:
    member = next(m for m in members(ckpt) if m.offset == offset)
    return int(msgspec.json.decode(member.data.split(b"\n")[0], type=Event).seq)


def both(ckpt: Path, anchors: tuple[Anchor, ...] = (), *, joined: bool) -> tuple[VerifyReport, VerifyReport, list[int]]:
    """(one process, two processes, the counts the second reported), checking that the
    second one did fork, and whether its halves were ``joined`` (else the whole log was
    checked again in one process, to name the damage)."""
    forks: list[int] = []
    counts: list[int] = []
    again: list[int] = []
    serial_check = ledger.verify._verify_serial

    def counted_serial(*args: object) -> object:
        again.append(1)
        return serial_check(*args)  # type: ignore[arg-type]

    class Counted(ledger.verify.Beside):  # type: ignore[type-arg]
        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            forks.append(1)

    with Ledger.open_readonly(ckpt) as lg:
        serial = verify(lg, anchors, parallel=False)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ledger.verify, "Beside", Counted)
            mp.setattr(ledger.verify, "_verify_serial", counted_serial)
            # the split's reports are under test, not the thread guard: earlier tests of a session
            # may leave an idle thread alive (can_fork() would then refuse, rightly, to fork)
            mp.setattr(ledger.verify, "can_fork", lambda: True)
            parallel = verify(lg, anchors, lambda done, _total: counts.append(done), parallel=True)
    assert forks == [1]
    assert again == ([] if joined else [1])
    return serial, parallel, counts


def rewrite_from(ckpt: Path, offset: int, *, seq_shift: int = 0, first_prev: str | None = None) -> None:
    """Every member from ``offset`` on re-signed (so each line's own hash and every link after
    the first check out) with seqs moved by ``seq_shift`` or the first prev replaced."""
    path = log_path(ckpt)
    data = path.read_bytes()
    out = [data[:offset]]
    prev = first_prev
    for member in scan_members(io.BytesIO(data), offset):
        lines = []
        for line in member.data.split(b"\n")[:-1]:
            e = msgspec.json.decode(line, type=Event)
            u = UnsignedEvent(e.v, e.seq + seq_shift, e.id, e.ts, e.ckpt, e.node, e.type, e.body, prev or e.prev)
            event, signed = sign(u)
            lines.append(signed)
            prev = event.hash
        out.append(compress_member(b"".join(lines)))
    path.write_bytes(b"".join(out))


def test_sound_log_same_report_and_counts(ckpt: Path) -> None:
    write_log(ckpt)
    total = MEMBERS * PER_MEMBER
    with Ledger.open_readonly(ckpt) as lg:
        second_half_hash = next(e.hash for e in lg.events() if e.seq == total - 2)
        first_half_hash = next(e.hash for e in lg.events() if e.seq == 3)
    heads = (Anchor("--head", second_half_hash[:16]), Anchor("--head", first_half_hash[:16]))
    expected = VerifyReport(
        True,
        total,
        total,
        log_path(ckpt).stat().st_size,
        found={second_half_hash[:16]: total - 2, first_half_hash[:16]: 3},
    )
    serial, parallel, counts = both(ckpt, heads, joined=True)
    assert serial == expected
    assert parallel == expected
    assert counts == sorted(counts) and counts[-1] == total


def test_damage_in_a_later_piece(ckpt: Path) -> None:
    write_log(ckpt)
    split = split_of(ckpt)
    victim = [m for m in members(ckpt) if m.offset > split][2]
    seq = first_seq_at(ckpt, victim.offset)
    raw = bytearray(log_path(ckpt).read_bytes())
    raw[(victim.offset + victim.end) // 2] ^= 0xFF
    log_path(ckpt).write_bytes(bytes(raw))
    serial, parallel, _ = both(ckpt, joined=False)
    assert (serial.ok, serial.first_bad_seq, serial.offset, serial.torn_tail) == (False, seq, victim.offset, False)
    assert serial.reason is not None and serial.reason.startswith("invalid gzip data")
    assert serial.reason.endswith("damaged, not torn")
    assert parallel == serial


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            {"first_prev": "0" * 64},
            "prev does not match the previous event's hash (missing, reordered or edited event)",
        ),
        ({"seq_shift": 1}, "expected seq {seq}, found seq {next} (missing, repeated or reordered event)"),
    ],
)
def test_broken_link_exactly_where_a_piece_starts(ckpt: Path, change: dict[str, object], why: str) -> None:
    write_log(ckpt)
    split = split_of(ckpt)
    seq = first_seq_at(ckpt, split)
    rewrite_from(ckpt, split, **change)  # type: ignore[arg-type]
    reason = f"seq {seq} at byte offset {split}: " + why.format(seq=seq, next=seq + 1)
    serial, parallel, _ = both(ckpt, joined=False)
    assert (serial.ok, serial.first_bad_seq, serial.offset, serial.reason) == (False, seq, split, reason)
    assert parallel == serial


def test_torn_tail(ckpt: Path) -> None:
    write_log(ckpt)
    size = log_path(ckpt).stat().st_size
    member = zlib.compress(b'{"v":3}\n' * 50, 1, wbits=31)
    with log_path(ckpt).open("ab") as f:
        f.write(member[: len(member) // 2])
    total = MEMBERS * PER_MEMBER
    serial, parallel, _ = both(ckpt, joined=False)
    assert (serial.ok, serial.first_bad_seq, serial.offset, serial.torn_tail, serial.reason) == (
        False,
        total + 1,
        size,
        True,
        "gzip member cut short (torn write)",
    )
    assert parallel == serial


def test_index_record_not_at_a_member(ckpt: Path) -> None:
    write_log(ckpt)
    split = split_of(ckpt)
    seq = first_seq_at(ckpt, split)
    idx = log_path(ckpt).with_name(LOG_NAME + ".idx")
    records = [(o + 3 if o == split else o, s) for o, s in ledger.log._IDX_RECORD.iter_unpack(idx.read_bytes())]
    idx.write_bytes(b"".join(ledger.log._IDX_RECORD.pack(*r) for r in records))
    serial, parallel, _ = both(ckpt, joined=False)  # the piece before does not end at the record
    assert serial.ok and serial.problems[0].startswith(
        f"side index {idx.name}: record ({split + 3}, seq {seq}) does not point at the start of a member"
    )
    assert parallel == serial


def test_redaction_across_pieces(ckpt: Path) -> None:
    write_log(ckpt, secret_at=2)  # the stub in the first piece, the redaction event in the last
    redact(ckpt, Selector(text="the secret key"), reason="leak", by="tester")
    serial, parallel, _ = both(ckpt, joined=True)
    assert serial.ok and serial.events == MEMBERS * PER_MEMBER + 1
    assert parallel == serial


def test_stub_nobody_accounts_for_in_a_later_piece(ckpt: Path) -> None:
    write_log(ckpt)
    split = split_of(ckpt)
    seq = first_seq_at(ckpt, split) + PER_MEMBER + 1
    path = log_path(ckpt)
    data = path.read_bytes()
    out = [data[:split]]
    prev: str | None = None
    for member in scan_members(io.BytesIO(data), split):  # the event at seq: its body replaced by a seal
        lines = []
        for line in member.data.split(b"\n")[:-1]:
            e = msgspec.json.decode(line, type=Event)
            body = {"sha256": "ab" * 32} if e.seq == seq else e.body
            event, signed = sign(UnsignedEvent(e.v, e.seq, e.id, e.ts, e.ckpt, e.node, e.type, body, prev or e.prev))
            lines.append(signed)
            prev = event.hash
        out.append(compress_member(b"".join(lines)))
    path.write_bytes(b"".join(out))
    reindex(ckpt)  # (the members re-signed differ in size: each piece must end where the next starts)
    serial, parallel, _ = both(ckpt, joined=True)  # found once the pieces are joined
    expected = f"seq {seq}'s body was removed but no redaction event records it (edited log)"
    assert (serial.ok, serial.first_bad_seq, serial.offset, serial.reason) == (False, seq, None, expected)
    assert parallel == serial


@pytest.fixture
def refused_forks(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A log written whose size makes it "large", a second CPU free and no other thread (forced),
    and every fork counted and refused (as a system out of processes refuses it: verify then
    checks the log in one process)."""
    write_log(ckpt)
    monkeypatch.setattr(ledger.verify, "PARALLEL_FROM", log_path(ckpt).stat().st_size)
    monkeypatch.setattr(ledger.verify, "can_fork", lambda: True)
    monkeypatch.setattr(ledger.verify, "second_cpu", lambda: True)
    forks: list[int] = []

    def refused() -> int:
        forks.append(1)
        raise OSError(errno.EAGAIN, "fork refused by the test")

    monkeypatch.setattr(os, "fork", refused)
    return forks


def test_library_verify_never_forks(ckpt: Path, tmp_path: Path, refused_forks: list[int]) -> None:
    total = MEMBERS * PER_MEMBER
    with Ledger.open_readonly(ckpt) as lg:
        assert lg.verify(parallel="auto").ok and refused_forks == [1]  # these conditions do ask for a fork
        refused_forks.clear()
        report = lg.verify()
    assert report.ok and report.events == total
    manifest = export_bundle(ckpt, tmp_path / "bundle.tar")
    assert import_bundle(tmp_path / "bundle.tar", tmp_path / "copy") == manifest
    repaired = repair(ckpt)
    assert (repaired.kept, repaired.reason) == (total, None)  # nothing to repair
    assert refused_forks == []


@settings(max_examples=300, deadline=None)
@given(pieces=st.integers(1, 12), schedule=st.lists(st.booleans(), max_size=80))
def test_meeting_claims_leave_no_piece_unchecked(pieces: int, schedule: list[bool]) -> None:
    """The two processes' claims (:class:`ledger.verify._Meet`), in any interleaving of their
    steps: every piece is checked, each process's pieces run on from its own end, and at most
    one piece is checked twice (both claimed it before either saw the other's claim)."""
    meet = ledger.verify._Meet(pieces)
    first: list[int] = []
    last: list[int] = []

    def claims(from_last: bool, order: range, checked: list[int]) -> Iterator[None]:
        """One process's steps, each a point where the other may run: the claim written, then
        read back against the other's, then the piece checked."""
        for piece in order:
            meet.claim(from_last, piece)
            yield
            if not meet.may_check(from_last, piece):
                return
            yield
            checked.append(piece)
        meet.claim(from_last, order.stop)  # none left: the other stops at its next claim

    steps = [claims(False, range(pieces), first), claims(True, range(pieces - 1, -1, -1), last)]
    for which in schedule:
        next(steps[which], None)
    for rest in steps:
        for _ in rest:
            pass
    assert sorted(set(first) | set(last)) == list(range(pieces))
    assert first == list(range(len(first))) and last == list(range(pieces - 1, pieces - 1 - len(last), -1))
    assert len(set(first) & set(last)) <= 1


def test_the_second_process_checks_every_piece_while_this_one_is_busy(ckpt: Path) -> None:
    """This process busy until the forked one has checked the whole log (as ``ari-ledger
    verify`` is while it checks the snapshot): it then checks no piece, and the report is the
    one-process one; the same when it starts at once and they share the pieces."""
    write_log(ckpt)
    total = MEMBERS * PER_MEMBER
    mine: list[int] = []
    check_piece = ledger.verify._check_piece

    def counted(*args: Any) -> Any:
        mine.append(1)  # (the forked process counts in its own copy of this list)
        return check_piece(*args)

    with Ledger.open_readonly(ckpt) as lg, pytest.MonkeyPatch.context() as mp:
        serial = verify(lg, parallel=False)
        mp.setattr(ledger.verify, "_check_piece", counted)
        mp.setattr(ledger.verify, "can_fork", lambda: True)
        busy = ledger.verify.LogCheck(lg, parallel=True)
        assert busy._second is not None and len(busy.pieces) > 2
        deadline = time.monotonic() + 60
        while busy._second.beside.done() < total and time.monotonic() < deadline:
            time.sleep(0.01)
        assert busy.run()[0] == serial and mine == []
        at_once = ledger.verify.LogCheck(lg, parallel=True)
        assert at_once.run()[0] == serial and 0 < len(mine) <= len(at_once.pieces)
