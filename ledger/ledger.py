"""The Ledger: the one source of truth of a checkpoint's memory.

Every write is an immutable, hash-chained event appended to
``{checkpoint}/memory_ledger.jsonl.gz``. Appends are validated, guarded (copy-on-write),
sequenced and written under an exclusive inter-process lock, so several processes may append
to one checkpoint at once, and made durable before they return. Nothing in the log is ever rewritten; a torn tail
left by a crash is moved aside to a named file on open, never dropped silently, and bytes
that held acknowledged events are never taken for a torn tail. The newest acknowledged
event is anchored outside the log (``ledger.anchor``), so a log cut back is refused, not
silently continued.

This module is append, batch and read, with the open, the lock and the anchor checks. Beside
it, as ZODB's ``fsrecover`` and ``fstest`` are beside ``FileStorage``: the open scan and
torn-tail recovery (``ledger.recovery``), the whole-log check (``ledger.verify``), and the tools
a person runs, ``ledger.maintenance.rollback`` (accept a rollback), ``ledger.maintenance.redact`` and ``ledger.maintenance.repair``.

The tools reach the log through public members only: ``state`` (:class:`~ledger.state.LogState`,
what the scan has read: head, checkpoint id, side index), ``file`` and ``head_file``,
``acknowledged()``, ``locked()`` (the lock, the state up to date), and ``replace_log()``:
replacing the log file is the Ledger's own operation (as ZODB's ``FileStorage.pack``), which a
tool only feeds with the new file's members, and which the other open ledgers follow.
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import itertools
import logging
import os
import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import events as schema
from . import layout
from .anchor import Anchor, AnchorUnreadable, HeadFile, anchor_problem
from .chain import sign
from .errors import (
    ACT_ON_ROLLBACK,
    LedgerNotFound,
    LedgerReadOnly,
    LockUnavailable,
    LogCorrupted,
    RollbackDetected,
    WriteUnconfirmed,
    act_on_missing_log,
)
from .events import Event, EventType, UnsignedEvent, new_event_id, utc_now
from .guard import prepare_event
from .log import BadMember, LogFile, compress_member, fsync_dir, make_durable
from .progress import Progress
from .recovery import (
    IN_FLIGHT,
    INSPECTING,
    RecoveryReport,
    advance,
    damage,
    distrust_index,
    persist_index,
    sync,
    walk,
    why_not_torn,
)
from .replacement import LogReplacement
from .safe_io import create_new, kept_mode
from .state import Head, LogState
from .verify import Parallel, VerifyReport
from .verify import verify as verify_log

log = logging.getLogger("ledger")

_READONLY_ERRNOS = {
    errno.EROFS: "read-only file system (EROFS)",
    errno.EACCES: "permission denied (EACCES)",
    errno.EPERM: "operation not permitted (EPERM)",
}


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
        self.redacted_at = 0  # seq of the newest redaction this ledger has read (ledger.maintenance.redact)
        self._file = logfile
        self._head_file = HeadFile(logfile.path)
        # what the scan has read of the file (ledger.state): only the scan and this class move it
        self.state = LogState()
        self._head_write_failed = False
        self._thread_lock = threading.RLock()
        self._held = False  # inside locked(): the lock held, the state up to date
        self._head_file.forked()
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
            _refuse_missing_log(path, directory)
            if not create or readonly:
                raise LedgerNotFound(_no_ledger(path, directory))
            misplaced = layout.misplaced_log(directory)
            if misplaced is not None:  # never an empty log in its place
                raise LedgerNotFound(f"no ledger at {path}, so none is created: {act_on_missing_log(path, misplaced)}")
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
                sync(ledger, recover=False)
                ledger._check_head(adopt=False)
            else:
                with ledger.locked():
                    # A redaction killed before its rename left its new log (with the removed text):
                    # removed, durably. Its intent (``.redact``) is left for the next redaction, which
                    # finishes it (ledger.maintenance.redact.pending): it is what the derived files must still lose.
                    leftover = path.with_name(path.name + layout.REDACT_TMP_SUFFIX)
                    if leftover.exists() or leftover.is_symlink():
                        leftover.unlink(missing_ok=True)
                        fsync_dir(path.parent)
                    ledger._check_head(adopt=True)
        except LockUnavailable as exc:
            ledger.close()
            if not readonly_fallback:
                raise
            log.warning("%s cannot be opened for writing (%s): opened read-only", path, exc)
            ledger = cls(directory, LogFile(path, writable=False), readonly=str(exc))
            sync(ledger, recover=False)
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
            raise LedgerNotFound(_no_ledger(path, directory))
        ledger = cls(directory, LogFile(path, writable=False), readonly=INSPECTING)
        try:
            sync(ledger, recover=False)
        except LogCorrupted as exc:
            ledger.damage = exc
        return ledger

    def check_usable(self) -> None:
        """Refuse this log as :meth:`open` refuses one: the damage an inspecting open left in
        ``damage`` (LogCorrupted), a log that ends before or differs from the head file's anchor
        (RollbackDetected). For a tool that inspected the log (:meth:`open_readonly`, e.g. to
        verify it) and reads it next: one open for both. Writes nothing."""
        if self.damage is not None:
            raise self.damage
        self._check_head(adopt=False)

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
        return self.state.ckpt

    @property
    def last_seq(self) -> int:
        """The last seq this process has seen (``refresh()`` looks for other writers)."""
        return self.state.head.seq

    @property
    def last_hash(self) -> str:
        """The hash of the event at ``last_seq`` ("" while the log is empty)."""
        return self.state.head.hash

    @property
    def file(self) -> LogFile:
        """The open log file (readers, size, side index); the Ledger alone appends to it, and
        :meth:`replace_log` alone replaces it. Another object after a reopen (a fork, a
        replaced log): ask again rather than keep it."""
        return self._file

    @property
    def head_file(self) -> HeadFile:
        """The head file (``memory_ledger.jsonl.gz.head``), the newest acknowledged event."""
        return self._head_file

    def refresh(self) -> int:
        """Catch up with appends made by other processes; return the last seq on disk."""
        with self._thread_lock:
            self._own()
            self._follow_replacement()
            if self._file.size() != self.state.head.end:
                sync(self, recover=False)
            return self.state.head.seq

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
        if anchor.seq is not None and anchor.seq > self.state.head.seq and not self.closed:
            self.refresh()
        return anchor_problem(anchor, self.state.ckpt, self.state.head.seq, self._hash_at)

    def event_at(self, seq: int) -> Event | None:
        """The event with this seq, checked, or None past the end."""
        return next(self.events(after=seq - 1, as_of=seq), None) if seq >= 1 else None

    def _hash_at(self, seq: int) -> str | None:
        if seq == self.state.head.seq:
            return self.state.head.hash
        event = self.event_at(seq)
        return event.hash if event else None

    def _check_head(self, *, adopt: bool) -> None:
        """Refuse a log that ends before (or differs from) the head anchor; anchor a log
        that has none yet (``adopt``, writers only)."""
        try:
            anchor = self._head_file.read()
        except AnchorUnreadable as exc:
            log.warning("%s; re-anchoring at the log's end (seq %d)", exc, self.state.head.seq)
            anchor = None
        if anchor is not None:
            problem = self.anchor_problem(anchor)
            if problem:
                act = (  # an empty log is not accepted in place of one that looks missing
                    ACT_ON_ROLLBACK
                    if self.state.head.seq
                    else act_on_missing_log(self.path, layout.misplaced_log(self.checkpoint_dir))
                )
                raise RollbackDetected(f"{problem}; {act}", seq=min(anchor.seq or 0, self.state.head.seq + 1))
        if (
            adopt
            and self.state.ckpt is not None
            and (anchor is None or (anchor.seq or 0) < self.state.head.seq or self._head_file.damaged_slot)
        ):
            self._write_head(self.state.ckpt, both=True)

    def _write_head(self, ckpt: str, *, both: bool = False, seq: int | None = None, hash: str = "") -> None:
        """Anchor ``seq``/``hash`` (default: the head) in the head file."""
        if seq is None:
            seq, hash = self.state.head.seq, self.state.head.hash
        try:
            self._head_file.write(ckpt, seq, hash, both=both)
            self._head_write_failed = False
        except OSError as exc:  # the log itself is durable; only rollback detection lags
            if not self._head_write_failed:
                log.warning(
                    "could not update %s (%s); rollback detection lags until it can be written",
                    self._head_file.path,
                    exc,
                )
            self._head_write_failed = True

    def acknowledged(self) -> int:
        """The newest seq the head file says was acknowledged (0 when unknown or another log's)."""
        try:
            anchor = self._head_file.read()
        except AnchorUnreadable:
            return 0
        if anchor is None or (self.state.ckpt is not None and anchor.ckpt != self.state.ckpt):
            return 0
        return anchor.seq or 0

    # -- writing ---------------------------------------------------------------------

    def append(self, node_id: str, type: EventType, body: Any, *, current_node: str | None = None) -> Event:
        """Validate, guard and durably append one event; return it as stored.

        Raises InvalidInput (nothing written), CopyOnWriteViolation (nothing written) or
        LedgerReadOnly (opened read-only; nothing written).
        """
        self._refuse_if_readonly()
        prepared = prepare_event(node_id, type, body, current_node)  # checked before taking the lock
        with self._thread_lock:
            if self._in_batch:
                raise RuntimeError("append inside a batch: use the batch's append")
            self._lock()
            try:
                minted = self.state.ckpt is None
                try:
                    event, line = self._sign(self.state.head.seq + 1, self.state.head.hash, *prepared)
                    written = self._write_member(self.state.head.end, line, [event])
                except BaseException:
                    if minted:
                        self.state.ckpt = None
                    raise
            finally:
                self._file.unlock()
        self._settle(written, event)
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
            written: int | None = None
            with self.locked():
                batch = Batch(self)
                self._in_batch = True
                try:
                    yield batch
                    written = batch._commit()
                finally:
                    self._in_batch = False
                    if not batch._committed:
                        batch._rollback()
        if written is not None:
            self._settle(written, batch._events[-1])

    def _sign(
        self, seq: int, prev: str, node_id: str, type: EventType, canonical_body: dict[str, Any]
    ) -> tuple[Event, bytes]:
        """The event at ``seq`` after ``prev``, signed, and its log line (the first event
        mints the checkpoint id)."""
        if self.state.ckpt is None:
            self.state.ckpt = new_event_id()
        unsigned = UnsignedEvent(
            schema.SCHEMA_VERSION, seq, new_event_id(), utc_now(), self.state.ckpt, node_id, type, canonical_body, prev
        )
        return sign(unsigned)

    def _write_member(self, start: int, data: bytes, events: list[Event]) -> int:
        """Write ``data`` (the events' lines) as one member at ``start`` and move the head past
        it, under the lock; return the descriptor :meth:`_settle` makes it durable through."""
        member = compress_member(data, single_event=len(events) == 1)
        written = self._file.append(member, start)
        advance(self, start, start + len(member), events, persist=True)
        return written

    def _settle(self, written: int, last: Event) -> None:
        """Outside the locks: make a written member durable, then anchor its last event (the
        head file never leads the log). Raises WriteUnconfirmed when ``fdatasync`` fails."""
        try:
            make_durable(written)
        except OSError as exc:
            raise WriteUnconfirmed(
                exc.errno,
                f"seq {last.seq} (id {last.id}) was written to {self.path} but fdatasync failed ({exc.strerror}): "
                "it was not acknowledged and may not survive a power loss; check the disk, then `ari-ledger verify`",
            ) from exc
        self._write_head(last.ckpt, seq=last.seq, hash=last.hash)

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
            members = walk(self, f, start, seq=first_seq, prev="" if start == 0 else None)
            if start:
                try:
                    first = next(members, None)
                except (BadMember, LogCorrupted) as exc:
                    distrust_index(self, start, first_seq, exc)
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
                why = why_not_torn(self, f, bad, seen, locked=False)
                if why is not None and why != IN_FLIGHT:
                    raise damage(self, bad, why) from None

    def verify(
        self, anchors: Iterable[Anchor] = (), progress: Progress | None = None, *, parallel: Parallel = False
    ) -> VerifyReport:
        """Check the whole log, its side index, and that the head file's anchor and ``anchors``
        are events of this chain (:func:`ledger.verify.verify`). Read-only: no lock, no recovery.
        ``progress(events checked, events)`` after each member. In this process only unless
        ``parallel`` asks for a forked second one ("auto" or True): a library caller may run
        threads, which a fork must not copy."""
        return verify_log(self, anchors, progress, parallel=parallel)

    # -- the tools' seam (ledger.maintenance.redact, ledger.maintenance.rollback) --------------------------------

    @contextmanager
    def locked(self, *, accept: bool = False) -> Iterator[None]:
        """The log's lock, and the state up to date (a torn tail recovered), for the block: no
        other writer appends meanwhile. ``accept`` is for :func:`ledger.maintenance.rollback.accept_rollback`:
        a damaged tail is moved aside, not refused. Not nested, and not around an append or a
        batch of this ledger (they take the lock themselves)."""
        with self._thread_lock:
            self._lock(accept=accept)
            self._held = True
            try:
                yield
            finally:
                self._held = False
                self._file.unlock()

    @contextmanager
    def replace_log(self) -> Iterator[LogReplacement]:
        """Replace the log by a new file a tool writes (as ZODB's ``FileStorage.pack`` takes the
        file its packer wrote), inside :meth:`locked`.

        The block writes the new log into the :class:`LogReplacement` it is given (made
        exclusively beside the log, under the log's mode, and locked, so whoever opens it once
        it is renamed waits for its side index and head) and calls its ``commit``: synced,
        renamed over the log, the directory synced, its side index written, the head file
        anchored at its last event. This ledger then reads the new file, still holding the
        lock; other open ledgers follow it at their next lock or refresh (and refuse a new
        file that does not hold the last event they saw). A block that ends without a commit,
        or raises before its rename, leaves the log as it was and the new file removed; one
        the process is killed in leaves it beside the log, and the next writable open
        removes it."""
        with self._thread_lock:
            if not self._held:
                raise RuntimeError("replace_log runs inside locked()")
            path = self.path.with_name(self.path.name + layout.REDACT_TMP_SUFFIX)
            path.unlink(missing_ok=True)  # a leftover, or a planted link: the name itself goes, never its target
            fd = create_new(path, kept_mode(self.path) or 0o644)  # exclusive, no link followed; the log's mode kept
            with open(fd, "wb") as out:  # closed at the end of the block: that releases the new file's lock
                fcntl.flock(fd, fcntl.LOCK_EX)  # whoever opens it once it is renamed waits for its index and head
                new = LogReplacement(self._file, self._head_file, self._sign, path, out)
                try:
                    yield new
                finally:
                    if not new.replaced:
                        path.unlink(missing_ok=True)
            if new.replaced:
                self._reopen(lock=True)

    # -- internals -------------------------------------------------------------------

    def _lock(self, *, accept: bool = False) -> None:
        """Take the log's lock and bring the head up to date; the caller holds the thread lock
        and unlocks the file when done (this unlocks it itself when it raises)."""
        self._own()
        self._file.lock()
        try:
            while self._follow_replacement():  # a redaction replaced the file while we waited for its lock
                self._file.lock()
            sync(self, recover=True, accept=accept)
            if self.state.index_dirty:
                self.state.index_dirty = False
                persist_index(self)
        except BaseException:
            self._file.unlock()
            raise

    def _forked(self) -> None:
        """In a forked child, at once (no I/O): the thread lock may be held by a parent thread
        that does not exist here, so it is replaced; the rest waits for :meth:`_own`."""
        self._thread_lock = threading.RLock()
        self._head_file.forked()
        self._in_batch = False
        self._held = False
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
        self._reopen()

    def _reopen(self, *, lock: bool = False) -> None:
        """Open the log's path afresh and read the head from it (the old description is closed:
        in a fork the parent's stays open in the parent; after a redaction nothing writes the old
        file, whose lock is released with it). ``lock``: the new file is locked before the old
        one's lock is released (:meth:`replace_log`, inside :meth:`locked`), so nothing is
        appended between."""
        old = self._file
        self._file = LogFile(self.path, writable=old.writable)
        if lock:
            self._file.lock()
        old.close()
        self._head_file.close()
        self._head_file = HeadFile(self.path)
        self.state.restart()
        sync(self, recover=lock)

    def _follow_replacement(self) -> bool:
        """When the log's path names another file than the one open (another ledger's
        :meth:`replace_log`: a redaction renamed a rewritten log over it), reopen it and return
        True. One ``fstat``; a log whose path is gone (a checkpoint being deleted) is left open
        as it is.

        A redaction keeps every event's seq and hash, so the new file must still hold the last
        event this ledger saw; one that does not (an older copy renamed over the log) is a
        rollback, refused like one found at open, never continued silently."""
        mine = os.fstat(self._file.fd)
        if mine.st_nlink:  # a file renamed over ours leaves ours with no name
            return False
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return False
        if (named.st_ino, named.st_dev) == (mine.st_ino, mine.st_dev):
            return False
        log.info("%s was replaced (a redaction); reading the new file", self.path)
        head = self.state.head
        seen = Anchor(f"this process's last look at {self.path.name}", head.hash, head.seq, self.state.ckpt)
        self._reopen()
        problem = self.anchor_problem(seen) if seen.seq else None
        if problem:
            raise RollbackDetected(f"{problem}; {ACT_ON_ROLLBACK}", seq=min(seen.seq or 0, self.state.head.seq + 1))
        return True

    def _seek(self, seq: int) -> tuple[int, int]:
        """(byte offset, first seq) of the last known member whose first seq is <= ``seq``."""
        if self.state.last_member[1] <= seq:
            return self.state.last_member
        if not self.state.index:
            return 0, 1
        i = bisect.bisect_right([rec[1] for rec in self.state.index], seq) - 1
        return self.state.index[i] if i >= 0 else (0, 1)


_LIVE: weakref.WeakSet[Ledger] = weakref.WeakSet()  # every ledger not yet collected, for the fork hook


def _after_fork_in_child() -> None:
    for ledger in list(_LIVE):
        ledger._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _refuse_missing_log(path: Path, directory: Path) -> None:
    """A head file without its log: the log was removed (or moved) after events were
    acknowledged. Refused, never replaced by an empty log, and not offered for acceptance."""
    try:
        anchor = HeadFile(path).read()
    except AnchorUnreadable:
        anchor = None
    if anchor is not None:
        raise RollbackDetected(
            f"{path.name} is missing, but {anchor.source} records seq {anchor.seq} as acknowledged; "
            f"{act_on_missing_log(path, layout.misplaced_log(directory))}",
            seq=1,
        )


def _no_ledger(path: Path, directory: Path) -> str:
    """Why there is no ledger to open: none at ``path``, and where one lies when an earlier
    version moved it one level too deep."""
    misplaced = layout.misplaced_log(directory)
    if misplaced is None:
        return f"no ledger at {path} (is {directory} a checkpoint directory?)"
    return f"no ledger at {path}: {act_on_missing_log(path, misplaced)}"


class Batch:
    """The appends of one group commit (see :meth:`Ledger.batch`)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        head = ledger.state.head
        self._start = Head(head.end, head.seq, head.hash)  # the batch advances ledger.state.head in place
        self._lines: list[bytes] = []
        self._events: list[Event] = []
        self._committed = False

    def append(self, node_id: str, type: EventType, body: Any, *, current_node: str | None = None) -> Event:
        """Validate, guard and queue one event; it is durable when the batch ends."""
        return self._add(*prepare_event(node_id, type, body, current_node))

    def _add(self, node_id: str, type: EventType, canonical_body: dict[str, Any]) -> Event:
        head = self._ledger.state.head
        event, line = self._ledger._sign(head.seq + 1, head.hash, node_id, type, canonical_body)
        self._lines.append(line)
        self._events.append(event)
        head.seq, head.hash = event.seq, event.hash
        return event

    @property
    def events(self) -> list[Event]:
        return list(self._events)

    def _commit(self) -> int | None:
        """Write the batch's member (None when it is empty); the ledger settles it."""
        written = (
            self._ledger._write_member(self._start.end, b"".join(self._lines), self._events) if self._lines else None
        )
        self._committed = True
        return written

    def _rollback(self) -> None:
        ledger = self._ledger
        ledger.state.head = self._start
        if self._start.seq == 0:
            ledger.state.ckpt = None
