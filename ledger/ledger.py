"""The Ledger: the one source of truth of a checkpoint's memory.

Every write is an immutable, hash-chained event appended to
``{checkpoint}/memory_ledger.jsonl.gz``. Appends are validated, guarded (copy-on-write),
sequenced and made durable under an exclusive inter-process lock, so several processes
may append to one checkpoint at once. Nothing in the log is ever rewritten; a torn tail
left by a crash is moved aside to a named file on open, never dropped silently, and bytes
that held acknowledged events are never taken for a torn tail. The newest acknowledged
event is anchored outside the log (``ledger.anchor``), so a log cut back is refused, not
silently continued.
"""

from __future__ import annotations

import bisect
import errno
import itertools
import json
import logging
import os
import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from . import events as schema
from . import layout
from .anchor import Anchor, AnchorUnreadable, HeadFile, anchor_problem
from .chain import ChainError, check_link, decode_line, decode_lines, sign
from .errors import ACT_ON_ROLLBACK, LedgerNotFound, LedgerReadOnly, LockUnavailable, LogCorrupted, RollbackDetected
from .events import (
    Event,
    UnsignedEvent,
    check_node_id,
    new_event_id,
    upcast,
    upcast_all,
    utc_now,
    validate_body,
)
from .guard import check_writer
from .log import (
    IDX_STRIDE,
    LOG_NAME,
    BadMember,
    IndexCheck,
    LogFile,
    Member,
    compress_member,
    fsync_dir,
    index_shape_problem,
    scan_members,
    valid_member_after,
)

log = logging.getLogger("ledger")

ROLLBACKS_SUFFIX = ".rollbacks"  # what people accepted with `verify --accept-rollback`, one JSON line each
INSPECTING = "opened read-only to inspect"  # open_readonly: the caller reports what it finds
IN_FLIGHT = "in flight"  # a member a writer was still appending when an unlocked reader got to it
_READONLY_ERRNOS = {
    errno.EROFS: "read-only file system (EROFS)",
    errno.EACCES: "permission denied (EACCES)",
    errno.EPERM: "operation not permitted (EPERM)",
}


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
    """Result of checking every member, line, hash and link of the log, and its anchors.

    ``ok`` is the log's own state: chain intact and every anchor an event of it. ``rollback``
    lists anchors the log does not hold (acknowledged events missing); ``problems`` lists
    what is wrong beside the log (the side index, an unreadable head file); ``found`` maps
    each ``verify --head`` hash to its seq.
    """

    ok: bool
    events: int
    last_seq: int
    file_size: int
    first_bad_seq: int | None = None
    offset: int | None = None
    reason: str | None = None
    torn_tail: bool = False
    rollback: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    found: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        if self.reason is not None:
            what = "torn tail" if self.torn_tail else "damaged"
            return f"{what}: first bad seq {self.first_bad_seq} at byte offset {self.offset}: {self.reason}"
        if self.rollback:
            return f"rolled back: {self.rollback[0]}"
        return f"ok: {self.events} events, chain intact, last seq {self.last_seq}"


@dataclass(slots=True)
class _Head:
    """What the writer knows of the log's end (a batch advances seq and hash as it queues)."""

    end: int = 0
    seq: int = 0
    hash: str = ""


class Ledger:
    """An open checkpoint log. Use :meth:`open` (or :meth:`open_readonly` to inspect one);
    close it (or use ``with``) when done."""

    def __init__(self, checkpoint_dir: Path, logfile: LogFile, *, readonly: str | None = None) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.path = logfile.path
        self.readonly_reason = readonly
        self.recovered: list[RecoveryReport] = []
        self.torn_tail: BadMember | None = None  # a torn tail a read-only open left in place
        self.damage: LogCorrupted | None = None  # damage open_readonly found (verify names it)
        self._file = logfile
        self._head_file = HeadFile(logfile.path)
        self._head = _Head()
        self._ckpt: str | None = None
        self._index: list[tuple[int, int]] = []
        self._index_dirty = False  # a seek found the index wrong: rebuild it under the lock
        self._head_write_failed = False
        self._last_member = (0, 1)  # (offset, first seq) of the newest member seen: cheap tail reads
        self._thread_lock = threading.RLock()
        self._in_batch = False
        self._inherited = False  # set in a forked child: reopen before the next locked section
        _LIVE.add(self)

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        checkpoint_dir: str | Path,
        *,
        create: bool = True,
        readonly: bool = False,
        readonly_fallback: bool = False,
    ) -> Ledger:
        """Open the checkpoint's log to use it: recover a torn tail, refuse damage and rollback.

        ``create``: make the log when there is none. ``readonly``: no lock, no recovery, no
        writes (a torn tail is left in place and reads stop before it); appends raise
        LedgerReadOnly. ``readonly_fallback``: open for writing, but when the checkpoint
        cannot be written (read-only file system, permission denied) open it read-only and
        say why in ``readonly_reason``.

        Raises LedgerNotFound, LogCorrupted (damage inside the log, including a complete
        member that fails its CRC or bytes that held acknowledged events), RollbackDetected
        (the log ends before, or differs from, the head file's anchor).
        """
        directory = Path(checkpoint_dir)
        if not readonly:
            try:
                layout.move_legacy_files(directory)
            except OSError as exc:  # a read-only checkpoint: read it where it is
                if not (readonly_fallback and exc.errno in _READONLY_ERRNOS):
                    raise
        path = layout.log_path(directory)
        if not path.exists():
            _refuse_missing_log(path)
            if not create or readonly:
                raise LedgerNotFound(f"no ledger at {path} (is {directory} a checkpoint directory?)")
        reason = "opened read-only" if readonly else None
        logfile = None
        if reason is None:
            try:
                if not path.exists():
                    path.parent.mkdir(parents=True, exist_ok=True)
                logfile = LogFile(path, create=create)
            except OSError as exc:
                if not (readonly_fallback and exc.errno in _READONLY_ERRNOS):
                    raise
                if not path.exists():
                    raise LedgerReadOnly(f"cannot create a ledger at {path}: {_READONLY_ERRNOS[exc.errno]}") from None
                reason = _READONLY_ERRNOS[exc.errno]
                log.warning("%s cannot be opened for writing (%s): opened read-only", path, reason)
        ledger = cls(directory, logfile or LogFile(path, writable=False), readonly=reason)
        try:
            if ledger.readonly:
                ledger._sync(recover=False)
                ledger._check_head(adopt=False)
            else:
                with ledger._locked():
                    ledger._check_head(adopt=True)
        except LockUnavailable as exc:
            ledger.close()
            if not readonly_fallback:
                raise
            log.warning("%s cannot be opened for writing (%s): opened read-only", path, exc)
            ledger = cls(directory, LogFile(path, writable=False), readonly=str(exc))
            ledger._sync(recover=False)
            ledger._check_head(adopt=False)
        except BaseException:
            ledger.close()
            raise
        return ledger

    @classmethod
    def open_readonly(cls, checkpoint_dir: str | Path) -> Ledger:
        """Open an existing log only to inspect it (verify, status, log, export).

        No lock, no recovery, no writes, and no refusal: damage (``damage``), a torn tail
        (``torn_tail``) and a rollback (``head_problem()``) are left for the caller to report.
        """
        directory = Path(checkpoint_dir)
        path = layout.log_path(directory)
        if not path.exists():
            raise LedgerNotFound(f"no ledger at {path} (is {directory} a checkpoint directory?)")
        ledger = cls(directory, LogFile(path, writable=False), readonly=INSPECTING)
        try:
            ledger._sync(recover=False)
        except LogCorrupted as exc:
            ledger.damage = exc
        return ledger

    @classmethod
    def accept_rollback(
        cls, checkpoint_dir: str | Path, anchored_files: Iterable[tuple[Path, Anchor]] = ()
    ) -> list[str]:
        """Accept the log as it is, after a person has looked: the only way to clear an alarm.

        A damaged tail (bytes that held acknowledged events) is moved aside to a ``.torn-*``
        file, never deleted; the head file is re-anchored at the log's end; each of
        ``anchored_files`` (a snapshot, ``verified_context.json``) whose anchor the log does
        not hold is renamed ``<name>.rolled-back-<stamp>``; what was accepted is appended to
        ``memory_ledger.jsonl.gz.rollbacks``. Returns what was accepted, [] when the log holds
        every anchor. Damage before the tail is still refused (LogCorrupted).
        """
        directory = Path(checkpoint_dir)
        layout.move_legacy_files(directory)
        path = layout.log_path(directory)
        head = HeadFile(path)
        if not path.exists():  # every anchor points at events that are gone
            files = [head.path, *(file for file, _anchor in anchored_files)]
            accepted = [f"{LOG_NAME} is missing; {f.name} moved to {_set_aside(f).name}" for f in files if f.exists()]
            if not accepted:
                raise LedgerNotFound(f"no ledger at {path} (is {directory} a checkpoint directory?)")
            _record_rollback(path, accepted, None)
            return accepted
        ledger = cls(directory, LogFile(path))
        try:
            with ledger._locked(accept=True):
                accepted = [str(r) for r in ledger.recovered]
                problem = ledger.head_problem()
                if problem:
                    accepted.append(problem)
                for file, anchor in anchored_files:
                    problem = ledger.anchor_problem(anchor) if file.exists() else None
                    if problem:
                        accepted.append(f"{problem}; {file.name} moved to {_set_aside(file).name}")
                if accepted:
                    if ledger._ckpt is None:  # nothing left to anchor
                        ledger._head_file.close()
                        if head.path.exists():
                            accepted.append(f"{head.source} moved to {_set_aside(head.path).name}")
                    else:
                        ledger._head_file.write(
                            ledger._ckpt, ledger._head.seq, ledger._head.hash, both=True, durable=True
                        )
                    _record_rollback(path, accepted, ledger._head if ledger._ckpt else None)
        finally:
            ledger.close()
        return accepted

    def close(self) -> None:
        self._file.close()
        self._head_file.close()

    @property
    def closed(self) -> bool:
        return self._file.fd < 0

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- properties ------------------------------------------------------------------

    @property
    def readonly(self) -> bool:
        """True when appends are refused (see ``readonly_reason``)."""
        return self.readonly_reason is not None

    @property
    def ckpt(self) -> str | None:
        """The checkpoint id, minted with the first event; None while the log is empty."""
        return self._ckpt

    @property
    def last_seq(self) -> int:
        """The last seq this process has seen (``refresh()`` looks for other writers)."""
        return self._head.seq

    @property
    def last_hash(self) -> str:
        """The hash of the event at ``last_seq`` ("" while the log is empty)."""
        return self._head.hash

    def refresh(self) -> int:
        """Catch up with appends made by other processes; return the last seq on disk."""
        with self._thread_lock:
            self._own()
            if self._file.size() != self._head.end:
                self._sync(recover=False)
            return self._head.seq

    # -- anchors ---------------------------------------------------------------------

    def head_anchor(self) -> Anchor | None:
        """The head file's anchor (None when there is none). Raises AnchorUnreadable."""
        return self._head_file.read()

    @property
    def head_damaged_slot(self) -> bool:
        """The last read of the head file found one of its two records damaged."""
        return self._head_file.damaged_slot

    def head_problem(self) -> str | None:
        """Why the log does not hold the head file's anchor (a rollback), or None."""
        try:
            anchor = self._head_file.read()
        except AnchorUnreadable:
            return None  # not a rollback; verify reports it
        return None if anchor is None else self.anchor_problem(anchor)

    def anchor_problem(self, anchor: Anchor) -> str | None:
        """Why the log does not hold ``anchor`` (an event seen from outside), or None.

        An anchor beyond what this ledger has read may just be newer than its last look (other
        processes append, then advance the head file and save snapshots): the log is read
        again first, so only events the log no longer holds are called removed."""
        if anchor.seq is not None and anchor.seq > self._head.seq and not self.closed:
            self.refresh()
        return anchor_problem(anchor, self._ckpt, self._head.seq, self._hash_at)

    def event_at(self, seq: int) -> Event | None:
        """The event with this seq, checked, or None past the end."""
        return next(self.events(after=seq - 1, as_of=seq), None) if seq >= 1 else None

    def _hash_at(self, seq: int) -> str | None:
        if seq == self._head.seq:
            return self._head.hash
        event = self.event_at(seq)
        return event.hash if event else None

    def _check_head(self, *, adopt: bool) -> None:
        """Refuse a log that ends before (or differs from) the head anchor; anchor a log
        that has none yet (``adopt``, writers only)."""
        try:
            anchor = self._head_file.read()
        except AnchorUnreadable as exc:
            log.warning("%s; re-anchoring at the log's end (seq %d)", exc, self._head.seq)
            anchor = None
        if anchor is not None:
            problem = self.anchor_problem(anchor)
            if problem:
                raise RollbackDetected(f"{problem}; {ACT_ON_ROLLBACK}", seq=min(anchor.seq or 0, self._head.seq + 1))
        if (
            adopt
            and self._ckpt is not None
            and (anchor is None or (anchor.seq or 0) < self._head.seq or self._head_file.damaged_slot)
        ):
            self._write_head(self._ckpt, both=True)

    def _write_head(self, ckpt: str, *, both: bool = False) -> None:
        try:
            self._head_file.write(ckpt, self._head.seq, self._head.hash, both=both)
            self._head_write_failed = False
        except OSError as exc:  # the log itself is durable; only rollback detection lags
            if not self._head_write_failed:
                log.warning(
                    "could not update %s (%s); rollback detection lags until it can be written",
                    self._head_file.path,
                    exc,
                )
            self._head_write_failed = True

    def _acknowledged(self) -> int:
        """The newest seq the head file says was acknowledged (0 when unknown or another log's)."""
        try:
            anchor = self._head_file.read()
        except AnchorUnreadable:
            return 0
        if anchor is None or (self._ckpt is not None and anchor.ckpt != self._ckpt):
            return 0
        return anchor.seq or 0

    # -- writing ---------------------------------------------------------------------

    def append(self, node_id: str, type: str, body: Any, *, current_node: str | None = None) -> Event:
        """Validate, guard and durably append one event; return it as stored.

        Raises InvalidInput (nothing written), CopyOnWriteViolation (nothing written) or
        LedgerReadOnly (opened read-only; nothing written).
        """
        self._refuse_if_readonly()
        prepared = _prepare(node_id, type, body, current_node)  # checked before taking the lock
        with self._thread_lock:
            if self._in_batch:
                raise RuntimeError("append inside a batch: use the batch's append")
            self._lock()
            try:
                minted = self._ckpt is None
                try:
                    event, line = self._sign(self._head.seq + 1, self._head.hash, *prepared)
                    self._write_member(self._head.end, line, [event])
                except BaseException:
                    if minted:
                        self._ckpt = None
                    raise
            finally:
                self._file.unlock()
        return event

    @contextmanager
    def batch(self) -> Iterator[Batch]:
        """Group commit: every append inside lands in one gzip member with one fsync.

        The lock is held for the whole block; an exception inside discards the batch.
        """
        self._refuse_if_readonly()
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

    def _sign(
        self, seq: int, prev: str, node_id: str, type: str, canonical_body: dict[str, Any]
    ) -> tuple[Event, bytes]:
        """The event at ``seq`` after ``prev``, signed, and its log line (the first event
        mints the checkpoint id)."""
        if self._ckpt is None:
            self._ckpt = new_event_id()
        unsigned = UnsignedEvent(
            schema.SCHEMA_VERSION, seq, new_event_id(), utc_now(), self._ckpt, node_id, type, canonical_body, prev
        )
        return sign(unsigned)

    def _write_member(self, start: int, data: bytes, events: list[Event]) -> None:
        """Write ``data`` (the events' lines) as one member at ``start``, durably, then move
        the head and the head anchor past it."""
        member = compress_member(data, single_event=len(events) == 1)
        self._file.append(member, start)
        self._advance(start, start + len(member), events, persist_index=True)
        self._write_head(events[-1].ckpt)

    def _refuse_if_readonly(self) -> None:
        if self.readonly_reason is not None:
            raise LedgerReadOnly(f"{self.path} is open read-only ({self.readonly_reason}); nothing was written")

    # -- reading ---------------------------------------------------------------------

    def events(self, as_of: int | None = None, after: int = 0) -> Iterator[Event]:
        """Events with ``after < seq <= as_of`` in seq order, each hash and link checked.

        A read that seeks (through the side index) to a member that is not what the index
        says falls back to the start of the log and has the index rebuilt.
        """
        start, first_seq = self._seek(after + 1)
        with self._file.reader() as f:
            members = self._walk(f, start, seq=first_seq, prev="" if start == 0 else None)
            if start:
                try:
                    first = next(members, None)
                except (BadMember, LogCorrupted) as exc:
                    self._distrust_index(start, first_seq, exc)
                    yield from self.events(as_of, after)
                    return
                members = itertools.chain([first] if first else [], members)
            seen = first_seq - 1
            try:
                for _member, events in members:
                    for event in events:
                        if as_of is not None and event.seq > as_of:
                            return
                        if event.seq > after:
                            yield event
                    seen = events[-1].seq if events else seen
            except BadMember as bad:
                why = self._why_not_torn(f, bad, seen, locked=False)
                if why is not None and why != IN_FLIGHT:
                    raise self._damage(bad, why) from None

    def verify(self, anchors: Iterable[Anchor] = ()) -> VerifyReport:
        """Check the whole log from byte 0 (gzip members, lines, hashes, links, ckpt), the side
        index against the members, and that the head file's anchor and ``anchors`` are events
        of this chain. Read-only: no lock, no recovery."""
        anchors = list(anchors)
        problems: list[str] = []
        try:
            head = self._head_file.read()
        except AnchorUnreadable as exc:
            head = None
            problems.append(f"{exc}: a rollback of the newest events cannot be detected by it")
        if head is not None:
            anchors.insert(0, head)
        if head is not None and self._head_file.damaged_slot:
            problems.append(
                f"{self._head_file.source}: one of its two records is damaged; the other (seq {head.seq}) is used"
            )
        want_seq = {a.seq for a in anchors if a.seq is not None}
        heads = [a.hash for a in anchors if a.seq is None]
        at_seq: dict[int, str] = {}
        found: dict[str, int] = {}
        index = self._file.read_index()
        size = self._file.size()
        shape = index_shape_problem(index, size)
        check = IndexCheck([] if shape else index)
        events, ckpt, end = 0, None, 0
        with self._file.reader() as f:
            try:
                for member, batch in self._walk(f, 0, seq=1, prev=""):
                    if batch:
                        first = batch[0].seq  # seqs run on without a gap inside a checked member
                        check.member(member.offset, first)
                        ckpt = ckpt or batch[0].ckpt
                        at_seq.update((s, batch[s - first].hash) for s in want_seq if first <= s < first + len(batch))
                    for h in heads:
                        found.update((h, event.seq) for event in batch if event.hash.startswith(h))
                    events += len(batch)
                    end = member.end
            except LogCorrupted as exc:
                return VerifyReport(False, events, events, size, exc.seq, exc.offset, str(exc))
            except BadMember as bad:
                why = self._why_not_torn(f, bad, events, locked=False)
                if why != IN_FLIGHT:  # (else: the log verified so far ends where a writer is appending)
                    reason = bad.reason if why is None else f"{bad.reason}; {why}"
                    return VerifyReport(
                        False, events, events, size, events + 1, bad.offset, reason, torn_tail=why is None
                    )
        index_problem = shape or check.finish(end)
        if index_problem:
            problems.append(
                f"side index {self._file.idx_path.name}: {index_problem} (derived data: reads that reach a wrong "
                "record fall back to the log; delete the file and the next writable open rebuilds it)"
            )
        rollback = [p for a in anchors if a.seq is not None and (p := anchor_problem(a, ckpt, events, at_seq.get))]
        rollback += [
            f"{h[:12]}… (--head) is not the hash of any event of this log (last seq {events}): "
            "the log was cut back, rewritten, or is another log"
            for h in heads
            if h not in found
        ]
        return VerifyReport(
            not rollback, events, events, size, rollback=tuple(rollback), problems=tuple(problems), found=found
        )

    # -- internals -------------------------------------------------------------------

    @contextmanager
    def _locked(self, *, accept: bool = False) -> Iterator[None]:
        with self._thread_lock:
            self._lock(accept=accept)
            try:
                yield
            finally:
                self._file.unlock()

    def _lock(self, *, accept: bool = False) -> None:
        """Take the log's lock and bring the head up to date; the caller holds the thread lock
        and unlocks the file when done (this unlocks it itself when it raises)."""
        self._own()
        self._file.lock()
        try:
            self._sync(recover=True, accept=accept)
            if self._index_dirty:
                self._index_dirty = False
                self._persist_index()
        except BaseException:
            self._file.unlock()
            raise

    def _forked(self) -> None:
        """In a forked child, at once (no I/O): the thread lock may be held by a parent thread
        that does not exist here, so it is replaced; the rest waits for :meth:`_own`."""
        self._thread_lock = threading.RLock()
        self._in_batch = False
        self._inherited = not self.closed

    def _own(self) -> None:
        """Reopen the log in this process if it was opened in another (a fork), before any
        locked section or refresh. ``flock`` belongs to the open file description, which a
        fork shares: through the parent's descriptor, parent and child would both hold the lock
        and append at once. So the child gets its own descriptor (its own lock) and forgets
        what it inherited of the log's end: the head is read again from the file."""
        if not self._inherited:
            return
        self._inherited = False
        inherited = self._file
        self._file = LogFile(self.path, writable=inherited.writable)
        inherited.close()  # the parent's description stays open (and locked, if it was) in the parent
        self._head_file.close()
        self._head_file = HeadFile(self.path)
        self._head, self._index, self._last_member, self._index_dirty = _Head(), [], (0, 1), False
        self._sync(recover=False)

    def _sync(self, *, recover: bool, accept: bool = False) -> None:
        """Bring the head up to the end of the file; recover a torn tail when holding the lock."""
        if self._head.end == 0:
            self._load_start(persist=recover)
        else:
            size = self._file.size()
            if size == self._head.end:
                return  # nobody appended since we last looked
            if size < self._head.end:
                raise RollbackDetected(
                    f"{LOG_NAME} shrank from {self._head.end} to {size} bytes while open (last seq seen "
                    f"{self._head.seq}): acknowledged events were removed; {ACT_ON_ROLLBACK}",
                    seq=self._head.seq,
                )
        with self._file.reader() as f:
            try:
                for member, events in self._walk(f, self._head.end, seq=self._head.seq + 1, prev=self._head.hash):
                    self._advance(member.offset, member.end, events, persist_index=recover)
            except BadMember as bad:
                why = self._why_not_torn(f, bad, self._head.seq, locked=recover)
                if why == IN_FLIGHT:
                    return  # a writer is finishing that member: the next refresh reads it
                if why is not None and not (accept and (bad.incomplete or valid_member_after(f, bad.offset) is None)):
                    raise self._damage(bad, why) from None
                if recover:
                    self._recover(bad)
                else:
                    if self.torn_tail is None or self.torn_tail.offset != bad.offset:  # said once per tail
                        self._warn(
                            "%s: torn tail at byte offset %d left in place (%s)",
                            self.path,
                            bad.offset,
                            self.readonly_reason,
                        )
                    self.torn_tail = bad

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
            index = self._file.read_index()
            problem = index_shape_problem(index, size)
            if not problem and len(index) > 1:
                offset, first_seq = index[-1]
                try:
                    found = next(self._walk(f, offset), None)
                except (BadMember, LogCorrupted):
                    found = None
                if found is not None and found[1] and found[1][0].seq == first_seq:
                    member, events = found
                    self._index = index
                    self._head = _Head(member.end, events[-1].seq, events[-1].hash)
                    self._last_member = (offset, first_seq)
                    return
                problem = f"its last record ({offset}, seq {first_seq}) is not the start of a member with that seq"
            if problem:
                self._warn("side index %s is wrong (%s); rebuilding it from the log", self._file.idx_path.name, problem)
            self._index = [(0, 1)]
            if persist and (problem or len(index) != 1):
                self._persist_index()
            self._head = _Head(first[0].end, first[1][-1].seq, first[1][-1].hash)

    def _walk(
        self, f: BinaryIO, start: int, *, seq: int | None = None, prev: str | None = None
    ) -> Iterator[tuple[Member, list[Event]]]:
        """Decode and chain-check the members from ``start``: yield (member, events).

        ``seq``/``prev`` are the expected first link; None accepts whatever the first event
        says (a scan starting mid-log). Raises LogCorrupted for damage inside a complete
        member, and lets BadMember through for the caller to classify.
        """
        ckpt = self._ckpt
        for member in scan_members(f, start):
            events = decode_lines(member.data, seq, prev, ckpt)
            events = _check_line_by_line(member, seq, prev, ckpt) if events is None else upcast_all(events)
            if events:
                last = events[-1]
                ckpt, prev, seq = last.ckpt, last.hash, last.seq + 1
            yield member, events

    def _advance(self, offset: int, end: int, events: list[Event], *, persist_index: bool) -> None:
        """Move the head past the member at ``offset``..``end`` holding ``events``."""
        if not events:
            return
        if self._ckpt is None:
            self._ckpt = events[0].ckpt
        first_seq = events[0].seq
        if not self._index or offset - self._index[-1][0] >= IDX_STRIDE:
            self._index.append((offset, first_seq))
            if persist_index:
                self._persist_index(offset, first_seq)
        self._head = _Head(end, events[-1].seq, events[-1].hash)
        self._last_member = (offset, first_seq)
        if self.torn_tail is not None and self.torn_tail.offset <= offset:
            self.torn_tail = None  # what looked torn was finished after all

    def _warn(self, message: str, *args: object) -> None:
        """A warning, unless this ledger was opened to inspect: its caller reports what it finds."""
        if self.readonly_reason != INSPECTING:
            log.warning(message, *args)

    def _persist_index(self, *record: int) -> None:
        """Append one record (or rewrite the whole index); the index is derived data, so a
        failure (disk full) costs a slower open later, never the append that caused it."""
        try:
            if record:
                self._file.add_index(*record)
            else:
                self._file.write_index(self._index)
        except OSError as exc:
            log.warning(
                "could not write the side index %s (%s); it is rebuilt when found wrong", self._file.idx_path.name, exc
            )

    def _distrust_index(self, offset: int, first_seq: int, exc: Exception) -> None:
        """A read seeked to ``offset`` (seq ``first_seq``) and did not find that member:
        rebuild the index from the log now, and write it at the next locked section."""
        self._warn(
            "side index %s: (%d, seq %d) is not the start of a member with that seq (%s); rebuilding it from the log",
            self._file.idx_path.name,
            offset,
            first_seq,
            exc,
        )
        self._index, self._last_member = [], (0, 1)
        with self._file.reader() as f:
            for member, events in self._walk(f, 0, seq=1, prev=""):
                if events and (not self._index or member.offset - self._index[-1][0] >= IDX_STRIDE):
                    self._index.append((member.offset, events[0].seq))
                if events:
                    self._last_member = (member.offset, events[0].seq)
                if member.end >= self._head.end:
                    break
        self._index_dirty = not self.readonly

    def _why_not_torn(self, f: BinaryIO, bad: BadMember, last_good_seq: int, *, locked: bool) -> str | None:
        """Why the bad member where a scan stopped is damage and not a torn write, or None
        (torn), or IN_FLIGHT (a writer was appending it while we read, without the lock).

        A crash mid-append leaves a prefix of one member at the end of the file, after every
        acknowledged event. So a member whose gzip trailer is there but fails its check, bytes
        the head file says held acknowledged events, or a bad member with a good one after it
        are damage: reported, never moved aside.
        """
        if bad.whole:
            return "the member was written whole (its gzip trailer is there) and fails its check: damaged, not torn"
        acknowledged = self._acknowledged()
        if acknowledged > last_good_seq:
            # The head is written after the member is complete: without the lock, a member we
            # read half-written may have been finished (and acknowledged) since.
            if not locked and self._complete_now(bad.offset):
                return IN_FLIGHT
            return f"{self._head_file.source} records seq {acknowledged} as acknowledged, so these bytes held acknowledged events: damaged, not torn"
        if not locked and self._in_flight(bad.offset):
            return IN_FLIGHT
        if not bad.incomplete and valid_member_after(f, bad.offset) is not None:
            return "a complete member follows it"
        return None

    def _in_flight(self, offset: int) -> bool:
        """An unfinished member met without the lock is being appended (a writer holds the
        lock), or was finished before the shared lock was had; otherwise it is torn."""
        with self._file.quiet() as quiet:
            return quiet is False or (quiet is True and self._complete_now(offset))

    def _complete_now(self, offset: int) -> bool:
        with self._file.reader() as f:
            try:
                return next(scan_members(f, offset), None) is not None
            except BadMember:
                return False

    def _damage(self, bad: BadMember, why: str) -> LogCorrupted:
        seq = self._seq_at(bad.offset)
        return LogCorrupted(f"seq {seq} at byte offset {bad.offset}: {bad.reason}; {why}", seq=seq, offset=bad.offset)

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
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        saved = self.path.with_name(f"{self.path.name}.torn-{stamp}")
        size = self._file.cut(bad.offset, saved)
        self._index = [rec for rec in self._index if rec[0] < bad.offset]
        self._persist_index()
        report = RecoveryReport(bad.offset, size, saved, self._head.seq, bad.reason)
        self.recovered.append(report)
        log.warning("%s", report)

    def _seek(self, seq: int) -> tuple[int, int]:
        """(byte offset, first seq) of the last known member whose first seq is <= ``seq``."""
        if self._last_member[1] <= seq:
            return self._last_member
        if not self._index:
            return 0, 1
        i = bisect.bisect_right([rec[1] for rec in self._index], seq) - 1
        return self._index[i] if i >= 0 else (0, 1)


_LIVE: weakref.WeakSet[Ledger] = weakref.WeakSet()  # every ledger not yet collected, for the fork hook


def _after_fork_in_child() -> None:
    for ledger in list(_LIVE):
        ledger._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _refuse_missing_log(path: Path) -> None:
    """A head file without its log: the log was removed after events were acknowledged."""
    try:
        anchor = HeadFile(path).read()
    except AnchorUnreadable:
        anchor = None
    if anchor is not None:
        raise RollbackDetected(
            f"{path.name} is missing, but {anchor.source} records seq {anchor.seq} as acknowledged: "
            f"the log was removed; {ACT_ON_ROLLBACK}",
            seq=1,
        )


def _set_aside(path: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.rolled-back-{stamp}")
    os.replace(path, target)
    return target


def _record_rollback(log_path: Path, accepted: list[str], head: _Head | None) -> None:
    """Append what a person accepted to ``memory_ledger.jsonl.gz.rollbacks`` (fsynced)."""
    record = {
        "ts": utc_now(),
        "accepted": accepted,
        "anchored_at": {"seq": head.seq, "hash": head.hash} if head else None,
    }
    target = log_path.with_name(log_path.name + ROLLBACKS_SUFFIX)
    with open(target, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(target.parent)


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
        head = ledger._head
        self._start = _Head(head.end, head.seq, head.hash)  # the batch advances ledger._head in place
        self._lines: list[bytes] = []
        self._events: list[Event] = []
        self._committed = False

    def append(self, node_id: str, type: str, body: Any, *, current_node: str | None = None) -> Event:
        """Validate, guard and queue one event; it is durable when the batch ends."""
        return self._add(*_prepare(node_id, type, body, current_node))

    def _add(self, node_id: str, type: str, canonical_body: dict[str, Any]) -> Event:
        head = self._ledger._head
        event, line = self._ledger._sign(head.seq + 1, head.hash, node_id, type, canonical_body)
        self._lines.append(line)
        self._events.append(event)
        head.seq, head.hash = event.seq, event.hash
        return event

    @property
    def events(self) -> list[Event]:
        return list(self._events)

    def _commit(self) -> None:
        if self._lines:
            self._ledger._write_member(self._start.end, b"".join(self._lines), self._events)
        self._committed = True

    def _rollback(self) -> None:
        ledger = self._ledger
        ledger._head = self._start
        if self._start.seq == 0:
            ledger._ckpt = None
