"""The log file: multi-member gzip, scanned member by member, appended under a lock.

Each append (or batch) is one complete gzip member, written with one ``write`` under the lock
and made durable with ``fdatasync`` (after the lock is released) before the call returns. Readers never trust the ``gzip``
module (it hands back an unverified last line from a member whose trailer is damaged);
they decompress each member with ``zlib.decompressobj(wbits=31)``, which only reports a
member as complete once its CRC and length check out.

A sparse side index (``.idx``: pairs of byte offset and first seq) lets an open or a
read start near the end instead of at byte 0. It is derived data: its shape is checked
whenever it is read, each record is checked when a read seeks to it, and missing or wrong,
it is rebuilt from the log.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .checkpoint_format import INDEX_SUFFIX
from .checkpoint_format import LOG_NAME as LOG_NAME
from .errors import InvalidInput, LockUnavailable, LogCorrupted
from .safe_io import (
    GZIP_MAGIC,
    MEMBER_ENV,
    SET_ASIDE_MODE,
    SIDE_FILE_LIMIT,
    create_new,
    create_temp,
    kept_mode,
    max_member_bytes,
    open_file,
    read_file,
    write_all,
)

READ_CHUNK = 1 << 20
# A group commit compresses its member at level 1: 2-7 us per event, to 0.13-0.34 of the raw
# bytes (level 6 took 2-3x as long for a member 3-13% smaller). A one-event member is stored,
# not compressed: zlib spends 8-19 us on the 0.6-1 KB of a single event at any level from 1 to
# 9, as much as the rest of an append, and on this VM every microsecond of CPU between two
# fdatasyncs costs a durable append two to four (figures in docs/performance.md).
GROUP_LEVEL = 1
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\x03"  # as zlib writes it: no name, mtime 0, OS Unix
_STORED_BLOCK = struct.Struct("<BHH")  # BFINAL|BTYPE=00, LEN, NLEN
_GZIP_TRAILER = struct.Struct("<II")  # CRC-32, length mod 2**32
_STORED_MAX = 0xFFFF
IDX_STRIDE = 256 * 1024  # record a member in the side index at most every this many bytes
_IDX_RECORD = struct.Struct("<QQ")
# What a file system without flock answers (Lustre mounted without -o flock: ENOSYS).
NO_FLOCK_ERRNOS = frozenset({errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK})


@dataclass(frozen=True)
class Member:
    """One complete, CRC-checked gzip member and its decompressed bytes."""

    offset: int
    end: int
    data: bytes


@dataclass(frozen=True)
class BadMember(Exception):
    """The scan stopped at ``offset``: the member there is cut short or not valid gzip.

    ``incomplete``: the file ends inside the member (what a crash mid-write leaves).
    ``whole``: the member's data and trailer are all there but its CRC-32 or length check
    fails, so it was written whole and damaged afterwards: never a torn write.
    """

    offset: int
    reason: str
    incomplete: bool
    whole: bool = False


# zlib's messages when a member's data ended and its trailer was read but does not match.
_TRAILER_MISMATCH = ("incorrect data check", "incorrect length check")


def compress_member(data: bytes, *, single_event: bool = False) -> bytes:
    """One complete gzip member holding ``data`` (stored, not compressed, for one event).

    Refuses (InvalidInput, nothing written) data beyond :func:`ledger.safe_io.max_member_bytes`:
    readers refuse to inflate a larger member (a gzip bomb), so none is ever written."""
    limit = max_member_bytes()
    if len(data) > limit:
        raise InvalidInput(
            "batch",
            f"{len(data)} bytes of events in one gzip member; a member holds at most {limit} bytes "
            f"({MEMBER_ENV}): append them in smaller batches; nothing was written",
        )
    return stored_member(data) if single_event else zlib.compress(data, GROUP_LEVEL, wbits=31)


def stored_member(data: bytes) -> bytes:
    """A gzip member holding ``data`` in stored deflate blocks (RFC 1951 BTYPE 00), built here:
    the bytes ``zlib.compress(data, 0, wbits=31)`` makes for an event (zlib cuts blocks at other
    places beyond 64 KB), without the 256 KB of compressor state zlib allocates and frees for
    every member, whose cost depends on the heap (2 us, or 50 us when the heap gets trimmed)."""
    parts = [_GZIP_HEADER]
    for start in range(0, max(len(data), 1), _STORED_MAX):
        block = data[start : start + _STORED_MAX]
        final = start + _STORED_MAX >= len(data)
        parts += (_STORED_BLOCK.pack(final, len(block), len(block) ^ 0xFFFF), block)
    parts.append(_GZIP_TRAILER.pack(zlib.crc32(data), len(data) & 0xFFFFFFFF))
    return b"".join(parts)


def scan_members(f: BinaryIO, start: int = 0) -> Iterator[Member]:
    """Yield the complete members from ``start`` to EOF; raise BadMember where they stop.

    A member that inflates beyond :func:`ledger.safe_io.max_member_bytes` is not read on: it
    raises LogCorrupted (damage, never a torn tail), having held no more than that limit."""
    limit = max_member_bytes()
    f.seek(start)
    pos = start
    buf = b""
    decomp = None
    member_start = pos
    parts: list[bytes] = []
    size = 0
    while True:
        if not buf:
            buf = f.read(READ_CHUNK)
            if not buf:
                if decomp is not None:
                    raise BadMember(member_start, "gzip member cut short (torn write)", True)
                return
        if decomp is None:
            decomp = zlib.decompressobj(31)
            member_start = pos
            parts = []
            size = 0
        try:
            part = decomp.decompress(buf, limit + 1 - size)
        except zlib.error as exc:
            whole = any(m in str(exc) for m in _TRAILER_MISMATCH)
            raise BadMember(member_start, f"invalid gzip data ({exc})", False, whole) from None
        size += len(part)
        if size > limit:
            raise member_too_large(member_start, limit)
        parts.append(part)
        if decomp.eof:
            rest = decomp.unused_data
            pos += len(buf) - len(rest)
            buf = rest
            decomp = None
            yield Member(member_start, pos, b"".join(parts))
        else:
            rest = decomp.unconsumed_tail  # input left when the output reached its limit
            pos += len(buf) - len(rest)
            buf = rest


def member_too_large(offset: int, limit: int) -> LogCorrupted:
    """The refusal of a gzip member that inflates beyond the limit (never read on, never cut)."""
    return LogCorrupted(
        f"the gzip member at byte offset {offset} inflates to more than {limit} bytes, the limit of one "
        f"member ({MEMBER_ENV}); not read (a log this library writes never holds one)",
        offset=offset,
    )


def _complete_member_at(f: BinaryIO, offset: int, limit: int) -> bool:
    """True when a complete gzip member starts at ``offset`` (or one that inflates beyond
    ``limit``: it cannot be shown not to be one, so the caller keeps treating what is before it
    as damage), read a chunk at a time with bounded output."""
    f.seek(offset)
    decomp = zlib.decompressobj(31)
    size = 0
    buf = b""
    while True:
        if not buf:
            buf = f.read(READ_CHUNK)
            if not buf:
                return False
        try:
            size += len(decomp.decompress(buf, READ_CHUNK))
        except zlib.error:
            return False
        if decomp.eof or size > limit:
            return True
        buf = decomp.unconsumed_tail


def valid_member_after(f: BinaryIO, offset: int) -> int | None:
    """Offset of a complete gzip member somewhere after ``offset``, if any.

    Used to tell a torn tail (nothing valid follows) from damage inside the log. Reads the file a
    chunk at a time, and inflates no candidate beyond the limit of one member.
    """
    limit = max_member_bytes()
    pos = offset + 1
    overlap = len(GZIP_MAGIC) - 1
    while True:
        f.seek(pos)
        chunk = f.read(READ_CHUNK)
        i = chunk.find(GZIP_MAGIC)
        while i != -1:
            if _complete_member_at(f, pos + i, limit):
                return pos + i
            i = chunk.find(GZIP_MAGIC, i + 1)
        if len(chunk) <= overlap:
            return None
        pos += len(chunk) - overlap


class LogFile:
    """The open log file of one checkpoint: locked appends, truncation, side index.

    The log and its side index are never opened through a link, and must be regular files
    (:func:`ledger.safe_io.open_file`): a link planted in their place is refused, not written
    through."""

    def __init__(self, path: Path, *, create: bool = False, writable: bool = True) -> None:
        self.path = path
        self.idx_path = path.with_name(path.name + INDEX_SUFFIX)
        self.writable = writable
        flags = (os.O_RDWR | os.O_APPEND if writable else os.O_RDONLY) | (os.O_CREAT if create else 0)
        existed = os.path.lexists(path)
        self.fd = open_file(path, flags, 0o644)
        self._tail: BinaryIO | None = None
        if not existed:
            # the new name, and the directory holding it (``memory_ledger/``, made just before by
            # the open): without the second, a power loss could take the whole store with every
            # event acknowledged into it
            fsync_dir(path.parent)
            fsync_dir(path.parent.parent)

    def close(self) -> None:
        if self._tail is not None:
            self._tail.close()
            self._tail = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def lock(self) -> None:
        """The exclusive lock every append holds; LockUnavailable where the file system has none."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in NO_FLOCK_ERRNOS:
                raise
            raise LockUnavailable(no_flock_reason(exc)) from None

    def unlock(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    @contextmanager
    def quiet(self) -> Iterator[bool | None]:
        """For an unlocked reader that met an unfinished member: is a writer appending now?
        Tries a shared lock on a description of its own (never the writer's): False while a
        writer holds the exclusive lock (the member is in flight); True once the shared lock is
        held, kept for the block, so nothing is appended while the caller looks again; None
        where the file system has no ``flock`` (cannot tell)."""
        if os.path.exists("/proc/self/fd"):
            fd = os.open(f"/proc/self/fd/{self.fd}", os.O_RDONLY | os.O_CLOEXEC)
        else:
            fd = open_file(self.path, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                held: bool | None = True
            except BlockingIOError:
                held = False
            except OSError as exc:
                if exc.errno not in NO_FLOCK_ERRNOS:
                    raise
                held = None
            yield held
        finally:
            os.close(fd)  # releases the shared lock

    def size(self) -> int:
        """The file's length. ``lseek`` to the end costs a third of ``fstat``; the descriptor's
        offset means nothing here (appends are O_APPEND, reads use their own handles)."""
        return os.lseek(self.fd, 0, os.SEEK_END)

    def reader(self, buffering: int = -1) -> BinaryIO:
        """A fresh read handle on the open file, so concurrent scans never share a file position;
        opened through the descriptor (Linux's ``/proc/self/fd``), so a scan reads the file this
        log has open even after its name was moved (``ledger.layout``)."""
        try:
            return open(f"/proc/self/fd/{self.fd}", "rb", buffering)
        except OSError:
            return os.fdopen(open_file(self.path, os.O_RDONLY), "rb", buffering)

    def tail_reader(self) -> BinaryIO:
        """A read handle kept open for catching up with the log's end, for a caller that holds
        the ledger's thread lock (one user at a time): opening a fresh :meth:`reader` costs more
        than reading the few members other writers appended. Unbuffered, so a seek never serves
        bytes read before a cut."""
        if self._tail is None:
            self._tail = self.reader(buffering=0)
        return self._tail

    def append(self, member: bytes, at: int) -> int:
        """Write one member at the end (which must be ``at``), under the lock; return a
        descriptor for :func:`make_durable`, which the caller runs once the lock is released.

        Syncing outside the lock lets the appends of other processes and threads share a
        journal commit instead of queueing one ``fdatasync`` each behind the lock; the member
        is whole before the lock is released, so no reader takes it for a torn tail. On any
        failure of the write (disk full, I/O error) the file is cut back to ``at`` so no
        half-written member is left behind, and the error propagates.
        """
        try:
            written = os.write(self.fd, member)
            while written < len(member):  # a short write (rare): write the rest
                written += os.write(self.fd, memoryview(member)[written:])
            return os.dup(self.fd)  # under the lock: a close meanwhile cannot hand its number to another file
        except BaseException:
            os.ftruncate(self.fd, at)
            raise

    def cut(self, offset: int, save_to: Path) -> int:
        """Move the bytes from ``offset`` to EOF into ``save_to`` (a new file, made exclusively,
        readable by its owner only); return how many."""
        fd = create_new(save_to, SET_ASIDE_MODE)
        try:
            with self.reader() as f, os.fdopen(fd, "wb") as out:
                f.seek(offset)
                shutil.copyfileobj(f, out, READ_CHUNK)
                out.flush()
                os.fsync(out.fileno())
                size = out.tell()
        except BaseException:
            save_to.unlink(missing_ok=True)  # nothing was cut: leave no partial copy behind
            raise
        os.ftruncate(self.fd, offset)
        os.fsync(self.fd)
        fsync_dir(self.path.parent)
        return size

    # -- side index ---------------------------------------------------------------

    def read_index(self) -> list[tuple[int, int]]:
        """(offset, first_seq) pairs as stored (a trailing partial record dropped); [] when
        the index is missing or unreadable. Check them with :func:`index_shape_problem`."""
        try:
            raw = read_file(self.idx_path, SIDE_FILE_LIMIT)
        except OSError:  # also a link or a FIFO in its place (UnsafeFile): rebuilt, never followed
            return []
        usable = len(raw) - len(raw) % _IDX_RECORD.size
        return [rec for rec in _IDX_RECORD.iter_unpack(raw[:usable])]

    def add_index(self, offset: int, first_seq: int) -> None:
        """Append a record unless the index already ends at or past it (under the log's lock).
        Every writer process folds every member, so each would append the record of a member
        another wrote: the file's own last record says whether it is there yet. A trailing
        partial record (a crash mid-write) is cut off first, so records stay aligned."""
        with os.fdopen(open_file(self.idx_path, os.O_RDWR | os.O_CREAT | os.O_APPEND), "a+b") as f:
            end = f.seek(0, os.SEEK_END)
            usable = end - end % _IDX_RECORD.size
            if usable != end:
                f.truncate(usable)
            if usable:
                f.seek(usable - _IDX_RECORD.size)
                last_offset, _seq = _IDX_RECORD.unpack(f.read(_IDX_RECORD.size))
                if last_offset >= offset:
                    return
            f.write(_IDX_RECORD.pack(offset, first_seq))

    def write_index(self, records: list[tuple[int, int]]) -> None:
        """Replace the index: a temporary file made exclusively beside it, renamed over it (a link
        in its place is replaced, never written through); the index keeps its mode."""
        mode = kept_mode(self.idx_path)
        fd, tmp = create_temp(self.idx_path, mode=0o644 if mode is None else 0o600)
        try:
            try:
                write_all(fd, b"".join(_IDX_RECORD.pack(*r) for r in records))
                if mode is not None:
                    os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.replace(tmp, self.idx_path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def no_flock_reason(exc: OSError) -> str:
    """What to tell a user whose checkpoint is on a file system without ``flock``."""
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return (
        f"the file system cannot lock files (flock: {exc.strerror or name}, {name}), so writes from several "
        "processes cannot be kept apart; mount it with `-o flock` (Lustre: `-o flock`, not `-o localflock`), "
        "or put the checkpoint on a local directory"
    )


def index_due(records: list[tuple[int, int]], offset: int) -> bool:
    """Whether the member at ``offset`` gets a side index record after ``records``: the first
    member does, and then one every :data:`IDX_STRIDE` bytes or more."""
    return not records or offset - records[-1][0] >= IDX_STRIDE


def index_shape_problem(records: list[tuple[int, int]], size: int) -> str | None:
    """What is wrong with the index as a whole, before any record is followed: the first
    record must be (0, 1), offsets and seqs strictly increase, every offset is inside the log."""
    if not records:
        return None
    if records[0] != (0, 1):
        return f"its first record is {records[0]}, not (offset 0, seq 1)"
    for (o1, s1), (o2, s2) in zip(records, records[1:]):
        if o2 <= o1 or s2 <= s1:
            return f"record ({o2}, seq {s2}) does not follow ({o1}, seq {s1})"
    if records[-1][0] >= size:
        return f"record ({records[-1][0]}, seq {records[-1][1]}) points past the end of the log ({size} bytes)"
    return None


class IndexCheck:
    """Checks every index record against the members of a scan from byte 0 (for ``verify``)."""

    def __init__(self, records: list[tuple[int, int]]) -> None:
        self._records = records
        self._i = 0
        self.problem: str | None = None

    def member(self, offset: int, first_seq: int) -> None:
        """Called for each member in order, with the seq of its first event."""
        records = self._records
        while self.problem is None and self._i < len(records) and records[self._i][0] <= offset:
            rec_offset, rec_seq = records[self._i]
            if rec_offset < offset:
                self.problem = f"record ({rec_offset}, seq {rec_seq}) does not point at the start of a member"
            elif rec_seq != first_seq:
                self.problem = (
                    f"record ({rec_offset}, seq {rec_seq}) points at a member that starts with seq {first_seq}"
                )
            self._i += 1

    def finish(self, end: int) -> str | None:
        """The first problem found; records left over point past the log's valid end."""
        if self.problem is None and self._i < len(self._records):
            rec_offset, rec_seq = self._records[self._i]
            self.problem = f"record ({rec_offset}, seq {rec_seq}) points past the log's valid end ({end} bytes)"
        return self.problem


def make_durable(fd: int) -> None:
    """``fdatasync`` a member written by :meth:`LogFile.append` (through its descriptor), then
    close the descriptor. ``fdatasync`` flushes every byte of the file written before it, so a
    member is durable once it returns, whichever process's call flushed it."""
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make a directory entry durable (a file created, renamed or truncated in ``path``)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
