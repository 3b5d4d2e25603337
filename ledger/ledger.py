"""The Ledger: the one source of truth of a checkpoint's memory.

Every write is an immutable, hash-chained event appended to
``{checkpoint}/memory_ledger.jsonl.gz``. Appends are validated, guarded (copy-on-write),
sequenced and made durable under an exclusive inter-process lock, so several processes
may append to one checkpoint at once. Nothing in the log is ever rewritten; a torn tail
left by a crash is moved aside to a named file on open, never dropped silently.
"""
from __future__ import annotations

import bisect
import logging
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from .chain import ChainError, check_link, decode_line, sign
from .errors import LedgerNotFound, LogCorrupted
from . import events as schema
from .events import (
    Event,
    UnsignedEvent,
    check_node_id,
    new_event_id,
    upcast,
    utc_now,
    validate_body,
)
from .guard import check_writer
from .log import IDX_STRIDE, LOG_NAME, BadMember, LogFile, Member, compress_member, scan_members, valid_member_after

log = logging.getLogger("ledger")


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


@dataclass(frozen=True)
class VerifyReport:
    """Result of checking every member, line, hash and link of the log."""

    ok: bool
    events: int
    last_seq: int
    file_size: int
    first_bad_seq: int | None = None
    offset: int | None = None
    reason: str | None = None
    torn_tail: bool = False

    def summary(self) -> str:
        if self.ok:
            return f"ok: {self.events} events, chain intact, last seq {self.last_seq}"
        what = "torn tail" if self.torn_tail else "damaged"
        return f"{what}: first bad seq {self.first_bad_seq} at byte offset {self.offset}: {self.reason}"


@dataclass
class _Head:
    """What the writer knows of the log's end."""

    end: int = 0
    seq: int = 0
    hash: str = ""


class Ledger:
    """An open checkpoint log. Use :meth:`open`; close it (or use ``with``) when done."""

    def __init__(self, checkpoint_dir: Path, logfile: LogFile) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.path = logfile.path
        self._file = logfile
        self._head = _Head()
        self._ckpt: str | None = None
        self._index: list[tuple[int, int]] = []
        self._last_member = (0, 1)  # (offset, first seq) of the newest member seen: cheap tail reads
        self._thread_lock = threading.RLock()
        self._in_batch = False
        self.recovered: list[RecoveryReport] = []

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(cls, checkpoint_dir: str | Path, *, create: bool = True) -> "Ledger":
        """Open (creating if asked) the checkpoint's log, recovering a torn tail."""
        directory = Path(checkpoint_dir)
        path = directory / LOG_NAME
        if not path.exists():
            if not create:
                raise LedgerNotFound(f"no ledger at {path} (is {directory} a checkpoint directory?)")
            directory.mkdir(parents=True, exist_ok=True)
        ledger = cls(directory, LogFile(path, create=create))
        try:
            with ledger._locked():
                pass  # the locked section syncs the head and recovers a torn tail
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def open_readonly(cls, checkpoint_dir: str | Path) -> "Ledger":
        """Open an existing log only to read or verify it: no lock, no recovery, no writes."""
        directory = Path(checkpoint_dir)
        path = directory / LOG_NAME
        if not path.exists():
            raise LedgerNotFound(f"no ledger at {path} (is {directory} a checkpoint directory?)")
        return cls(directory, LogFile(path, writable=False))

    def close(self) -> None:
        self._file.close()

    @property
    def closed(self) -> bool:
        return self._file.fd < 0

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- properties ------------------------------------------------------------------

    @property
    def ckpt(self) -> str | None:
        """The checkpoint id, minted with the first event; None while the log is empty."""
        return self._ckpt

    @property
    def last_seq(self) -> int:
        """The last seq this process has seen (``refresh()`` looks for other writers)."""
        return self._head.seq

    def refresh(self) -> int:
        """Catch up with appends made by other processes; return the last seq on disk."""
        with self._thread_lock:
            if self._file.size() != self._head.end:
                self._sync(recover=False)
            return self._head.seq

    # -- writing ---------------------------------------------------------------------

    def append(self, node_id: str, type: str, body: Any, *, current_node: str | None = None) -> Event:
        """Validate, guard and durably append one event; return it as stored.

        Raises InvalidInput (nothing written) or CopyOnWriteViolation (nothing written).
        """
        prepared = _prepare(node_id, type, body, current_node)  # checked before taking the lock
        with self._thread_lock:
            if self._in_batch:
                raise RuntimeError("append inside a batch: use the batch's append")
            with self._locked():
                batch = Batch(self)
                try:
                    event = batch._add(*prepared)
                    batch._commit()
                finally:
                    if not batch._committed:
                        batch._rollback()
        return event

    @contextmanager
    def batch(self) -> Iterator["Batch"]:
        """Group commit: every append inside lands in one gzip member with one fsync.

        The lock is held for the whole block; an exception inside discards the batch.
        """
        with self._thread_lock:
            if self._in_batch:
                raise RuntimeError("batches do not nest")
            with self._locked():
                batch = Batch(self)
                self._in_batch = True
                try:
                    yield batch
                    batch._commit()
                finally:
                    self._in_batch = False
                    if not batch._committed:
                        batch._rollback()

    # -- reading ---------------------------------------------------------------------

    def events(self, as_of: int | None = None, after: int = 0) -> Iterator[Event]:
        """Events with ``after < seq <= as_of`` in seq order, each hash and link checked."""
        start = self._index_before(after + 1)
        first = {"seq": 1, "prev": ""} if start == 0 else {}
        with self._file.reader() as f:
            try:
                for _member, events in self._walk(f, start, **first):
                    for event in events:
                        if as_of is not None and event.seq > as_of:
                            return
                        if event.seq > after:
                            yield event
            except BadMember as bad:
                if not self._is_tail(f, bad):
                    raise self._damage(bad) from None

    def verify(self) -> VerifyReport:
        """Check the whole log from byte 0: gzip members, lines, hashes, links, ckpt."""
        events = 0
        with self._file.reader() as f:
            size = self._file.size()
            try:
                for _member, batch in self._walk(f, 0, seq=1, prev=""):
                    events += len(batch)
            except LogCorrupted as exc:
                return VerifyReport(False, events, events, size, exc.seq, exc.offset, str(exc))
            except BadMember as bad:
                torn = self._is_tail(f, bad)
                return VerifyReport(False, events, events, size, events + 1, bad.offset, bad.reason, torn_tail=torn)
        return VerifyReport(True, events, events, size)

    # -- internals -------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            self._file.lock()
            try:
                self._sync(recover=True)
                yield
            finally:
                self._file.unlock()

    def _sync(self, *, recover: bool) -> None:
        """Bring the head up to the end of the file; recover a torn tail when holding the lock."""
        if self._head.end == 0:
            self._load_start(persist=recover)
        elif self._file.size() == self._head.end:
            return  # nobody appended since we last looked
        with self._file.reader() as f:
            try:
                for member, events in self._walk(f, self._head.end, seq=self._head.seq + 1, prev=self._head.hash):
                    self._advance(member, events, persist_index=recover)
            except BadMember as bad:
                if not self._is_tail(f, bad):
                    raise self._damage(bad) from None
                if recover:
                    self._recover(bad)

    def _load_start(self, *, persist: bool) -> None:
        """First sync: read the checkpoint id and start the head at the last indexed member."""
        size = self._file.size()
        with self._file.reader() as f:
            try:
                first = next(self._walk(f, 0, seq=1, prev=""), None)
            except BadMember:
                first = None  # a torn first member: the scan from 0 recovers it
            if first is None or not first[1]:
                return
            self._ckpt = first[1][0].ckpt
            index = [rec for rec in self._file.read_index() if rec[0] < size]
            if index and index[-1][0] > 0:
                offset, first_seq = index[-1]
                try:
                    member, events = next(self._walk(f, offset))
                except (BadMember, LogCorrupted, StopIteration):
                    member, events = None, []
                if events and events[0].seq == first_seq:
                    self._index = index
                    self._head = _Head(member.end, events[-1].seq, events[-1].hash)
                    self._last_member = (offset, first_seq)
                    return
            self._index = [(0, 1)]
            if persist:
                self._file.write_index(self._index)
            self._head = _Head(first[0].end, first[1][-1].seq, first[1][-1].hash)

    def _walk(self, f, start: int, *, seq: int | None = None, prev: str | None = None):
        """Decode and chain-check the members from ``start``: yield (member, events).

        ``seq``/``prev`` are the expected first link; None accepts whatever the first event
        says (a scan starting mid-log). Raises LogCorrupted for damage inside a complete
        member, and lets BadMember through for the caller to classify.
        """
        ckpt = self._ckpt
        for member in scan_members(f, start):
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
                events.append(event if event.v == schema.SCHEMA_VERSION else upcast(event))
            yield member, events

    def _advance(self, member: Member, events: list[Event], *, persist_index: bool) -> None:
        if not events:
            return
        if self._ckpt is None:
            self._ckpt = events[0].ckpt
        last_indexed = self._index[-1][0] if self._index else -IDX_STRIDE
        if member.offset - last_indexed >= IDX_STRIDE or not self._index:
            self._index.append((member.offset, events[0].seq))
            if persist_index:
                self._file.add_index(member.offset, events[0].seq)
        self._head = _Head(member.end, events[-1].seq, events[-1].hash)
        self._last_member = (member.offset, events[0].seq)

    def _is_tail(self, f, bad: BadMember) -> bool:
        return bad.incomplete or valid_member_after(f, bad.offset) is None

    def _damage(self, bad: BadMember) -> LogCorrupted:
        seq = self._seq_at(bad.offset)
        return LogCorrupted(f"seq {seq} at byte offset {bad.offset}: {bad.reason}", seq=seq, offset=bad.offset)

    def _seq_at(self, offset: int) -> int:
        """The seq of the first event at or after ``offset`` (for error messages)."""
        seq = 1
        with self._file.reader() as f:
            try:
                for member, events in self._walk(f, 0):
                    if member.offset >= offset:
                        break
                    seq = events[-1].seq + 1 if events else seq
            except (BadMember, LogCorrupted):
                pass
        return seq

    def _recover(self, bad: BadMember) -> None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        saved = self.path.with_name(f"{self.path.name}.torn-{stamp}")
        size = self._file.cut(bad.offset, saved)
        self._index = [rec for rec in self._index if rec[0] < bad.offset]
        self._file.write_index(self._index)
        report = RecoveryReport(bad.offset, size, saved, self._head.seq, bad.reason)
        self.recovered.append(report)
        log.warning("%s", report)

    def _index_before(self, seq: int) -> int:
        """Byte offset of the last known member whose first seq is <= ``seq``."""
        if self._last_member[1] <= seq:
            return self._last_member[0]
        if not self._index:
            return 0
        i = bisect.bisect_right([rec[1] for rec in self._index], seq) - 1
        return self._index[i][0] if i >= 0 else 0


def _prepare(node_id: str, type: str, body: Any, current_node: str | None) -> tuple[str, str, dict[str, Any]]:
    """Validate and guard one event (no lock needed): (node, type, canonical body)."""
    check_node_id(node_id, "node_id")
    canonical_body = validate_body(type, body)
    check_writer(node_id, type, current_node)
    return node_id, type, canonical_body


class Batch:
    """The appends of one group commit (see :meth:`Ledger.batch`)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._start = ledger._head
        self._lines: list[bytes] = []
        self._events: list[Event] = []
        self._committed = False

    def append(self, node_id: str, type: str, body: Any, *, current_node: str | None = None) -> Event:
        """Validate, guard and queue one event; it is durable when the batch ends."""
        return self._add(*_prepare(node_id, type, body, current_node))

    def _add(self, node_id: str, type: str, canonical_body: dict[str, Any]) -> Event:
        ledger = self._ledger
        head = ledger._head
        if ledger._ckpt is None:
            ledger._ckpt = new_event_id()
        unsigned = UnsignedEvent(
            v=schema.SCHEMA_VERSION,
            seq=head.seq + 1,
            id=new_event_id(),
            ts=utc_now(),
            ckpt=ledger._ckpt,
            node=node_id,
            type=type,
            body=canonical_body,
            prev=head.hash,
        )
        event, line = sign(unsigned)
        self._lines.append(line)
        self._events.append(event)
        ledger._head = _Head(head.end, event.seq, event.hash)
        return event

    @property
    def events(self) -> list[Event]:
        return list(self._events)

    def _commit(self) -> None:
        ledger = self._ledger
        if self._lines:
            member = compress_member(b"".join(self._lines))
            ledger._file.append(member, self._start.end)
            end = self._start.end + len(member)
            ledger._advance(Member(self._start.end, end, b""), self._events, persist_index=True)
        self._committed = True

    def _rollback(self) -> None:
        ledger = self._ledger
        ledger._head = self._start
        if self._start.seq == 0:
            ledger._ckpt = None
