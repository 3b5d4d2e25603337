"""The access log's writer: lines appended from a thread of their own, chained, locked, rotated.

A memory call only encodes its line and queues it (ARI's own access log queues too, and its
tests drain the queue with ``flush_and_close()``); the writer thread lets a burst gather for
20 ms, takes whatever is queued and appends it as one ``write()`` on an ``O_APPEND`` descriptor kept open, holding an exclusive
``flock`` on it, each line chained onto the one before it (``projections.access.chain``)
and, once the lines are ``fdatasync``ed, the batch's last line recorded in the head file (so a
crash can leave lines the head does not name yet, never a head naming lines that are not there;
a line a crash tore is cut off by the next writer, under the lock). Many processes share one file: after the
lock, a writer checks that its inode is still the one named ``memory_access.jsonl`` and reopens
if not, so only the holder of the current file's lock rotates it, to
``memory_access.<unix time>.jsonl`` (``_<n>`` when taken). Without ``flock`` (some network file
systems) lines are still appended, unlocked, never rotated. A forked child starts with an
empty queue, its own descriptor and its own thread (the parent writes what it queued); the
queue is drained at exit, so a line is lost only with its process killed within 20 ms of the
call (the access log is an audit trail, not a source of truth).
"""

from __future__ import annotations

import atexit
import collections
import errno
import fcntl
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger.anchor import AnchorUnreadable, HeadFile
from ledger.checkpoint_format import ACCESS_ROTATED
from ledger.log import fsync_dir
from ledger.safe_io import open_file
from projections import settings
from projections.access.chain import GENESIS, chain_onto, last_line, link

log = logging.getLogger(__name__)

ROTATED_GLOB = ACCESS_ROTATED.format(stamp="*")  # what ``ari memory compact-access`` collects
HEAD_ID = "memory_access"  # the head file's record names the access log, not a ledger
_SETTLE_ATTEMPTS = 1000  # reopen-after-rotation rounds before a batch is given up
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC  # read: the last line, to chain onto
_TAIL_WINDOW = 4096
_CHAIN_BYTES = 165  # what the chain adds to a line: ',"n":…,"prev":"…","hash":"…"' and a newline
_IDLE_S = 2.0  # an idle writer thread ends; the next line starts another
_GATHER_S = 0.02  # how long the first line of a burst waits for the rest (unless flushed)
_LIVE: weakref.WeakSet[LineWriter] = weakref.WeakSet()

Problem = Callable[[str, BaseException], None]


class LineWriter:
    """Appends lines (dicts, encoded by ``encode`` in the writer thread) to one access log file,
    chained."""

    def __init__(self, path: Path, head: HeadFile, problem: Problem, encode: Callable[[Any], bytes]) -> None:
        self.path, self.head, self._problem, self._encode = path, head, problem, encode
        self._fresh()
        _LIVE.add(self)

    def _fresh(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._pending: collections.deque[Any] = collections.deque()
        self._queued = self._done = 0
        self._urgent = False  # a flush is waiting: write what is queued now
        self._thread: threading.Thread | None = None
        self._io = threading.Lock()  # the kept descriptor: the writer thread, or a close
        self._fd = -1
        self._end: tuple[int, int, int] | None = None  # (dev, ino, size) just past our last line…
        self._last: tuple[int, str] = (0, GENESIS)  # …which is this (n, hash)

    def put(self, line: Any) -> None:
        """Queue one line for the writer thread; the caller hands it over (never changes it)."""
        if self._pid != os.getpid():
            self.forked()
        with self._cond:
            self._pending.append(line)
            self._queued += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ari-access-log", daemon=True)
                self._thread.start()
            elif len(self._pending) == 1:
                self._cond.notify()  # wake an idle writer; it then lets a batch gather

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every line queued so far is written (or given up, as a problem)."""
        if self._pid != os.getpid():
            self.forked()
        with self._cond:
            target = self._queued
            if self._done >= target:
                return True
            self._urgent = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._done >= target, timeout)

    def close(self) -> None:
        """Flush, then close the kept descriptor and the head file (the next line reopens)."""
        self.flush()
        with self._io:
            self._drop()
        self.head.close()

    def forked(self) -> None:
        """In a forked child: the parent writes what it queued; this process starts afresh
        (the parent's locks may be held by threads that are not here, and a ``flock`` belongs
        to the open file, which the fork shares)."""
        inherited = self._fd
        self._fresh()
        if inherited >= 0:
            os.close(inherited)
        self.head.forked()

    # the writer thread ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: bool(self._pending), _IDLE_S):
                    self._thread = None
                    return
                self._cond.wait_for(lambda: self._urgent, _GATHER_S)  # one write for the lines of a burst
                lines = list(self._pending)
                self._pending.clear()
                self._urgent = False
            try:
                batch = [self._encode(line) for line in lines]
                with self._io:
                    self._append(batch)
            except Exception as exc:  # telemetry never stops
                self._problem("append", exc)
            with self._cond:
                self._done += len(lines)
                self._cond.notify_all()

    def _append(self, batch: list[bytes]) -> None:
        """Append the batch, as few ``write()`` calls as the size limit allows, each under an
        exclusive lock on the current file, rotating it whenever it has reached the limit."""
        max_bytes = settings.access_log_max_bytes()
        while batch:
            batch = batch[self._append_some(batch, max_bytes) :]

    def _append_some(self, batch: list[bytes], max_bytes: int) -> int:
        """Append the lines of ``batch`` that fit below the limit (at least one) to the current
        file; returns how many are done with (written, or given up as a problem)."""
        for _ in range(_SETTLE_ATTEMPTS):
            try:
                fd = self._descriptor()
            except OSError as exc:
                self._problem("open", exc)
                return len(batch)
            locked = False
            try:
                locked = self.lock(fd)
                mine = os.fstat(fd)
                try:
                    named = os.stat(self.path)
                except FileNotFoundError:
                    named = None  # rotated (or removed) while we waited
                if named is None or (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino):
                    self._drop()  # another process rotated our inode away: reopen
                    continue
                if locked and mine.st_size >= max_bytes:
                    try:
                        self._rotate()
                        self._drop()
                        continue
                    except OSError as exc:  # keep the lines in the big file rather than lose them
                        self._problem("rotate", exc)
                size = self._cut_torn(fd, mine.st_size) if locked else mine.st_size
                some = _fitting(batch, max_bytes - size) if locked else len(batch)
                data, last = self._chained(fd, (mine.st_dev, mine.st_ino, size), batch[:some])
                self._write_once(fd, data, some)
                if locked:
                    self._anchor(fd, last)
                return some
            except OSError as exc:
                self._problem("write", exc)
                self._drop()
                return len(batch)
            finally:
                if locked and self._fd == fd:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        self._problem("write", OSError(errno.EAGAIN, f"no stable {self.path.name} after {_SETTLE_ATTEMPTS} reopens"))
        return len(batch)

    def _descriptor(self) -> int:
        """The kept descriptor, opened when there is none: never through a link (a link in the
        log's place is a problem, and no line is written through it), a regular file only."""
        if self._fd < 0:
            existed = os.path.lexists(self.path)
            self._fd = open_file(self.path, _OPEN_FLAGS, 0o644)
            if not existed:  # a new file (also after a rotation): its name durable before a head names its lines
                fsync_dir(self.path.parent)
        return self._fd

    def _drop(self) -> None:
        """Close the kept descriptor (releasing its lock); the next batch opens the current file."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def _chained(self, fd: int, end: tuple[int, int, int], batch: list[bytes]) -> tuple[bytes, tuple[int, str]]:
        """The batch chained onto the file's last line (``end``: the file's dev, inode and size),
        one line each, and the (n, hash) of the last. Only under the lock is the last line still
        last when ours land: unlocked (no ``flock``), lines are chained as well as they can be."""
        if end == self._end:
            (n, prev), glue = self._last, b""  # our own line is still the last: no read back
        else:
            (n, prev), glue = self._tail(fd, end[2])
        out = [glue]
        for data in batch:
            n += 1
            line, prev = chain_onto(data, n, prev)
            out += (line, b"\n")
        joined = b"".join(out)
        self._end, self._last = (end[0], end[1], end[2] + len(joined)), (n, prev)
        return joined, (n, prev)

    def _anchor(self, fd: int, last: tuple[int, str]) -> None:
        """Under the lock, after the batch's ``write``: make the lines durable, then name the last
        in the head file. The order is the promise: a head never names a line a crash can take
        back (a SIGKILL between the two leaves lines the head does not name yet: a short head,
        never a false "lines were cut")."""
        try:
            os.fdatasync(fd)
        except OSError as exc:
            self._problem("fsync", exc)
            return  # not durable: the head keeps naming an older line
        n, hash = last
        try:
            if not os.path.lexists(self.head.path):
                self.head.close()  # a descriptor of a head file removed meanwhile: the new one is opened afresh
                self._create_head(n, hash)
            else:
                self.head.write(HEAD_ID, n, hash, ordered=True)  # a link in its place: refused, a problem
        except FileNotFoundError:
            pass  # no memory_ledger/ (an access log without a ledger): no head to keep
        except OSError as exc:
            self._problem("head", exc)

    def _create_head(self, n: int, hash: str) -> None:
        """A new head file, whole or not at all: both slots written to a temporary file made
        exclusively under an unpredictable name, synced, renamed into place, the directory synced
        (an empty head file left by a crash would read as "holds no valid record")."""
        self.head.create(HEAD_ID, n, hash)

    def _cut_torn(self, fd: int, size: int) -> int:
        """Under the lock: cut off a line a crash tore (the file does not end with a newline; no
        writer is inside a ``write``, they all hold this lock) and return the file's new size.
        The torn line was never acknowledged (a flush returns after the whole batch is written)
        and no head names it; chaining onto it would leave an unchained line inside the chain."""
        if not size or os.pread(fd, 1, size - 1) == b"\n":
            return size
        window = _TAIL_WINDOW
        while True:
            start = max(0, size - window)
            keep = os.pread(fd, size - start, start).rfind(b"\n")
            if keep >= 0 or start == 0:
                keep = start + keep + 1 if keep >= 0 else 0
                break
            window *= 8
        os.ftruncate(fd, keep)
        self._end = None
        log.warning("%s: cut %d bytes of a line a crash tore at its end (never acknowledged)", self.path, size - keep)
        return keep

    def _tail(self, fd: int, size: int) -> tuple[tuple[int, str], bytes]:
        """(n, hash) of the last line of the file (of the chain before it, when the file is new
        after a rotation), and a newline to write first when a torn line ends it."""
        if size == 0:
            return self._before_rotation(), b""
        window = _TAIL_WINDOW
        while True:
            start = max(0, size - window)
            data = os.pread(fd, size - start, start)
            line = last_line(data)
            if line is None and start == 0:
                line = data.rstrip(b"\n")
            if line is not None:
                found = link(line)
                return (found.n or 0, found.hash), b"" if data.endswith(b"\n") else b"\n"
            window *= 8

    def _before_rotation(self) -> tuple[int, str]:
        """Where a new (empty) file's chain goes on from: the last line of the newest rotated
        file, else (``ari memory compact-access`` removed them) the head file's record."""
        rotated = sorted(self.path.parent.glob(ROTATED_GLOB))
        if rotated:
            fd = open_file(rotated[-1], os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                if size:
                    return self._tail(fd, size)[0]
            finally:
                os.close(fd)
        try:
            anchor = self.head.read()
        except AnchorUnreadable:
            anchor = None
        return (anchor.seq or 0, anchor.hash) if anchor else (0, GENESIS)

    def lock(self, fd: int) -> bool:
        """Take the exclusive lock. A file system without ``flock`` (Lustre mounted without
        ``-o flock`` answers ENOSYS) still gets the lines, unlocked and never rotated."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return True
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                raise
            self._problem("lock", exc)
            return False

    def _write_once(self, fd: int, data: bytes, lines: int) -> None:
        """One ``write()``. A short write (a full disk) is cut back off when the file still
        ends with it, which holding the lock guarantees, so no partial line stays."""
        written = os.write(fd, data)
        if written != len(data):
            end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: just past our piece
            if os.fstat(fd).st_size == end:
                os.ftruncate(fd, end - written)
            self._end = None
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes), {lines} line(s) dropped")

    def _rotate(self) -> None:
        """Rename the current file (the caller holds its lock) to a free rotated name."""
        stamp = int(time.time())
        target = self.path.with_name(ACCESS_ROTATED.format(stamp=stamp))
        n = 0
        while target.exists():
            n += 1
            target = self.path.with_name(ACCESS_ROTATED.format(stamp=f"{stamp}_{n:03d}"))
        os.rename(self.path, target)
        log.info("access log rotated to %s", target.name)


def _fitting(batch: list[bytes], room: int) -> int:
    """How many lines of ``batch`` fit in ``room`` bytes (their chain keys counted), at least one."""
    used = 0
    for i, data in enumerate(batch):
        used += len(data) + _CHAIN_BYTES
        if used > room:
            return max(1, i)
    return len(batch)


def flush_all(timeout: float = 10.0) -> None:
    """Every access log of this process written out (at exit; a reader in this process)."""
    for writer in list(_LIVE):
        writer.flush(timeout)


def _reset_in_child() -> None:
    for writer in list(_LIVE):
        writer.forked()


atexit.register(flush_all)
os.register_at_fork(after_in_child=_reset_in_child)
