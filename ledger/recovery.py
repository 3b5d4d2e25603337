"""The open scan: bring an open log's head up to the end of the file, and say why it stopped.

The scan decodes and chain-checks gzip members from where the head is (the side index's last
record on a first open) and moves the head past each. Where a member is bad it tells a torn
write (a crash mid-append, after every acknowledged event) from a member a writer is still
appending (in flight: the next look reads it) and from damage (refused, never moved aside).
Holding the lock, it recovers a torn tail: moved aside to a named ``.torn-*`` file, never
dropped. Reads and ``verify`` walk the log with the same checks.

The scan works on the public members of an open log named by :class:`OpenLog` (a ``Ledger`` is
one) and folds what it reads into its :class:`~ledger.state.LogState`, not on the ``Ledger``
class, so the class that calls it is not imported here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Protocol

from .anchor import HeadFile
from .chain import ChainError, check_link, decode_line, decode_lines
from .checkpoint_format import TORN_MARK
from .errors import ACT_ON_ROLLBACK, LogCorrupted, RollbackDetected
from .events import Event, EventsRedacted, upcast, upcast_all
from .log import (
    LOG_NAME,
    BadMember,
    LogFile,
    Member,
    index_due,
    index_shape_problem,
    scan_members,
    valid_member_after,
)
from .safe_io import GZIP_MAGIC
from .state import Head, LogState

log = logging.getLogger("ledger")

INSPECTING = "opened read-only to inspect"  # open_readonly: the caller reports what it finds
IN_FLIGHT = "in flight"  # a member a writer was still appending when an unlocked reader got to it


@dataclass(frozen=True)
class RecoveryReport:
    """What an open did about a torn tail: where it was, how big, where it went."""

    torn_offset: int
    torn_bytes: int
    saved_to: Path
    kept_events: int
    reason: str

    def __str__(self) -> str:
        return (
            f"recovered {LOG_NAME}: {self.reason}; {self.torn_bytes} torn bytes at offset "
            f"{self.torn_offset} moved to {self.saved_to.name}; {self.kept_events} events kept"
        )


class OpenLog(Protocol):
    """What the scan reads and moves of an open log (a ``Ledger``'s public members): its files,
    its state (the head, the side index as far as it has read it), and what it found
    (``torn_tail``, ``recovered``, ``redacted_at``)."""

    path: Path
    readonly_reason: str | None
    recovered: list[RecoveryReport]
    torn_tail: BadMember | None
    redacted_at: int  # seq of the newest events_redacted event read (0: none)
    state: LogState

    @property
    def file(self) -> LogFile: ...

    @property
    def head_file(self) -> HeadFile: ...

    def acknowledged(self) -> int:
        """The newest seq the head file says was acknowledged (0 when unknown or another log's)."""
        ...


def sync(ledger: OpenLog, *, recover: bool, accept: bool = False) -> None:
    """Bring the head up to the end of the file; recover a torn tail when holding the lock."""
    if ledger.state.head.end == 0:
        _load_start(ledger, persist=recover)
    else:
        size = ledger.file.size()
        if size == ledger.state.head.end:
            return  # nobody appended since we last looked
        if size < ledger.state.head.end:
            raise RollbackDetected(
                f"{LOG_NAME} shrank from {ledger.state.head.end} to {size} bytes while open (last seq seen "
                f"{ledger.state.head.seq}): acknowledged events were removed; {ACT_ON_ROLLBACK}",
                seq=ledger.state.head.seq,
            )
    f = ledger.file.tail_reader()  # sync runs under the ledger's thread lock
    try:
        for member, events in walk(
            ledger, f, ledger.state.head.end, seq=ledger.state.head.seq + 1, prev=ledger.state.head.hash
        ):
            advance(ledger, member.offset, member.end, events, persist=recover)
    except BadMember as bad:
        why = why_not_torn(ledger, f, bad, ledger.state.head.seq, locked=recover)
        if why == IN_FLIGHT:
            return  # a writer is finishing that member: the next refresh reads it
        not_a_log = refused_as_not_a_log(ledger, f, bad)
        if not_a_log is not None:  # never moved aside, not even when a rollback is accepted
            raise damage(ledger, bad, not_a_log) from None
        if why is not None and not (accept and (bad.incomplete or valid_member_after(f, bad.offset) is None)):
            raise damage(ledger, bad, why) from None
        if recover:
            _recover(ledger, bad)
        else:
            if ledger.torn_tail is None or ledger.torn_tail.offset != bad.offset:  # said once per tail
                _warn(
                    ledger,
                    "%s: torn tail at byte offset %d left in place (%s)",
                    ledger.path,
                    bad.offset,
                    ledger.readonly_reason,
                )
            ledger.torn_tail = bad


def _load_start(ledger: OpenLog, *, persist: bool) -> None:
    """First sync: read the checkpoint id and start the head at the last indexed member."""
    size = ledger.file.size()
    with ledger.file.reader() as f:
        try:
            first = next(walk(ledger, f, 0, seq=1, prev=""), None)
        except BadMember:
            first = None  # a torn first member: the scan from 0 recovers it
        if first is None or not first[1]:
            return
        ledger.state.ckpt = first[1][0].ckpt
        index = ledger.file.read_index()
        problem = index_shape_problem(index, size)
        if not problem and len(index) > 1:
            offset, first_seq = index[-1]
            try:
                found = next(walk(ledger, f, offset), None)
            except (BadMember, LogCorrupted):
                found = None
            if found is not None and found[1] and found[1][0].seq == first_seq:
                member, events = found
                ledger.state.index = index
                ledger.state.head = Head(member.end, events[-1].seq, events[-1].hash)
                ledger.state.last_member = (offset, first_seq)
                return
            problem = f"its last record ({offset}, seq {first_seq}) is not the start of a member with that seq"
        if problem:
            _warn(ledger, "side index %s is wrong (%s); rebuilding it from the log", ledger.file.idx_path.name, problem)
        ledger.state.index = [(0, 1)]
        if persist and (problem or len(index) != 1):
            persist_index(ledger)
        ledger.state.head = Head(first[0].end, first[1][-1].seq, first[1][-1].hash)


def walk(
    ledger: OpenLog, f: BinaryIO, start: int, *, seq: int | None = None, prev: str | None = None
) -> Iterator[tuple[Member, list[Event]]]:
    """Decode and chain-check the members from ``start``: yield (member, events).

    ``seq``/``prev`` are the expected first link; None accepts whatever the first event
    says (a scan starting mid-log). Raises LogCorrupted for damage inside a complete
    member, and lets BadMember through for the caller to classify.
    """
    ckpt = ledger.state.ckpt
    for member in scan_members(f, start):
        events = decode_lines(member.data, seq, prev, ckpt)
        events = _check_line_by_line(member, seq, prev, ckpt) if events is None else upcast_all(events)
        if events:
            last = events[-1]
            ckpt, prev, seq = last.ckpt, last.hash, last.seq + 1
        yield member, events


def advance(ledger: OpenLog, offset: int, end: int, events: list[Event], *, persist: bool) -> None:
    """Move the head past the member at ``offset``..``end`` holding ``events``."""
    if not events:
        return
    if ledger.state.ckpt is None:
        ledger.state.ckpt = events[0].ckpt
    first_seq = events[0].seq
    if index_due(ledger.state.index, offset):
        ledger.state.index.append((offset, first_seq))
        if persist:
            persist_index(ledger, offset, first_seq)
    ledger.state.head = Head(end, events[-1].seq, events[-1].hash)
    ledger.state.last_member = (offset, first_seq)
    redactions = [e.seq for e in events if e.type == EventsRedacted.type_name]
    if redactions:
        ledger.redacted_at = redactions[-1]
    if ledger.torn_tail is not None and ledger.torn_tail.offset <= offset:
        ledger.torn_tail = None  # what looked torn was finished after all


def _warn(ledger: OpenLog, message: str, *args: object) -> None:
    """A warning, unless this ledger was opened to inspect: its caller reports what it finds."""
    if ledger.readonly_reason != INSPECTING:
        log.warning(message, *args)


def persist_index(ledger: OpenLog, *record: int) -> None:
    """Append one record (or rewrite the whole index); the index is derived data, so a
    failure (disk full) costs a slower open later, never the append that caused it."""
    try:
        if record:
            ledger.file.add_index(*record)
        else:
            ledger.file.write_index(ledger.state.index)
    except OSError as exc:
        log.warning(
            "could not write the side index %s (%s); it is rebuilt when found wrong", ledger.file.idx_path.name, exc
        )


def distrust_index(ledger: OpenLog, offset: int, first_seq: int, exc: Exception) -> None:
    """A read seeked to ``offset`` (seq ``first_seq``) and did not find that member:
    rebuild the index from the log now, and write it at the next locked section."""
    _warn(
        ledger,
        "side index %s: (%d, seq %d) is not the start of a member with that seq (%s); rebuilding it from the log",
        ledger.file.idx_path.name,
        offset,
        first_seq,
        exc,
    )
    ledger.state.index, ledger.state.last_member = [], (0, 1)
    with ledger.file.reader() as f:
        for member, events in walk(ledger, f, 0, seq=1, prev=""):
            if events and index_due(ledger.state.index, member.offset):
                ledger.state.index.append((member.offset, events[0].seq))
            if events:
                ledger.state.last_member = (member.offset, events[0].seq)
            if member.end >= ledger.state.head.end:
                break
    ledger.state.index_dirty = ledger.readonly_reason is None


def why_not_torn(ledger: OpenLog, f: BinaryIO, bad: BadMember, last_good_seq: int, *, locked: bool) -> str | None:
    """Why the bad member where a scan stopped is damage and not a torn write, or None
    (torn), or IN_FLIGHT (a writer was appending it while we read, without the lock).

    A crash mid-append leaves a prefix of one member at the end of the file, after every
    acknowledged event. So a member whose gzip trailer is there but fails its check, bytes
    the head file says held acknowledged events, or a bad member with a good one after it
    are damage: reported, never moved aside.
    """
    if bad.whole:
        return "the member was written whole (its gzip trailer is there) and fails its check: damaged, not torn"
    not_a_log = refused_as_not_a_log(ledger, f, bad)
    if not_a_log is not None:
        return not_a_log
    acknowledged = ledger.acknowledged()
    if acknowledged > last_good_seq:
        # The head is written after the member is complete: without the lock, a member we
        # read half-written may have been finished (and acknowledged) since.
        if not locked and _complete_now(ledger, bad.offset):
            return IN_FLIGHT
        return f"{ledger.head_file.source} records seq {acknowledged} as acknowledged, so these bytes held acknowledged events: damaged, not torn"
    if not locked and _in_flight(ledger, bad.offset):
        return IN_FLIGHT
    if not bad.incomplete and valid_member_after(f, bad.offset) is not None:
        return "a complete member follows it"
    return None


def refused_as_not_a_log(ledger: OpenLog, f: BinaryIO, bad: BadMember) -> str | None:
    """Why a file whose first bytes are not (the start of) a gzip member is refused, or None.

    A crash in the first append leaves a prefix of a member: bytes that start like one and end
    early. Anything else at byte 0 (a file that is not gzip, another program's file, the target
    of a link) is not a log: refused with one line, never "recovered" by cutting it to 0 bytes.
    ``ari-ledger repair`` still sets such bytes aside when a person asks it to."""
    if bad.offset != 0 or bad.whole:
        return None
    f.seek(0)
    start = f.read(len(GZIP_MAGIC))
    if bad.incomplete and GZIP_MAGIC.startswith(start):
        return None
    return (
        f"{ledger.path} has no valid gzip member at its start, so it is not a log: refused, nothing moved "
        "or cut (`ari-ledger repair CKPT` sets its bytes aside, if that is what you want)"
    )


def _in_flight(ledger: OpenLog, offset: int) -> bool:
    """An unfinished member met without the lock is being appended (a writer holds the
    lock), or was finished before the shared lock was had; otherwise it is torn."""
    with ledger.file.quiet() as quiet:
        return quiet is False or (quiet is True and _complete_now(ledger, offset))


def _complete_now(ledger: OpenLog, offset: int) -> bool:
    with ledger.file.reader() as f:
        try:
            return next(scan_members(f, offset), None) is not None
        except BadMember:
            return False


def damage(ledger: OpenLog, bad: BadMember, why: str) -> LogCorrupted:
    seq = _seq_at(ledger, bad.offset)
    return LogCorrupted(f"seq {seq} at byte offset {bad.offset}: {bad.reason}; {why}", seq=seq, offset=bad.offset)


def _seq_at(ledger: OpenLog, offset: int) -> int:
    """The seq of the first event at or after ``offset`` (for error messages)."""
    seq = 1
    with ledger.file.reader() as f:
        try:
            for member, events in walk(ledger, f, 0):
                if member.offset >= offset:
                    break
                seq = events[-1].seq + 1 if events else seq
        except (BadMember, LogCorrupted):
            pass
    return seq


def _recover(ledger: OpenLog, bad: BadMember) -> None:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    saved = ledger.path.with_name(f"{ledger.path.name}{TORN_MARK}{stamp}")
    size = ledger.file.cut(bad.offset, saved)
    ledger.state.index = [rec for rec in ledger.state.index if rec[0] < bad.offset]
    persist_index(ledger)
    report = RecoveryReport(bad.offset, size, saved, ledger.state.head.seq, bad.reason)
    ledger.recovered.append(report)
    log.warning("%s", report)


def _check_line_by_line(member: Member, seq: int | None, prev: str | None, ckpt: str | None) -> list[Event]:
    """Check a member one line at a time, to raise LogCorrupted naming the first bad seq
    (what :func:`decode_lines` does in bulk, when that finds something wrong); events are
    upcast in order, so a newer version before the damage is reported first, as it was."""
    lines = member.data.split(b"\n")
    if lines[-1]:
        raise LogCorrupted(
            f"seq {seq} at byte offset {member.offset}: gzip member does not end with a newline",
            seq=seq,
            offset=member.offset,
        )
    events = []
    for line in lines[:-1]:
        try:
            event = decode_line(line)
            if seq is None:
                seq = event.seq
            check_link(event, seq, event.prev if prev is None else prev, ckpt)
        except ChainError as exc:
            raise LogCorrupted(
                f"seq {seq} at byte offset {member.offset}: {exc}", seq=seq, offset=member.offset
            ) from None
        ckpt, prev, seq = event.ckpt, event.hash, seq + 1
        events.append(upcast(event))
    return events
