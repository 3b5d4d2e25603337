"""The log file: multi-member gzip, scanned member by member, appended under a lock.

Each append (or batch) is one complete gzip member, written with one ``write`` and made
durable with ``fdatasync`` before the call returns. Readers never trust the ``gzip``
module (it hands back an unverified last line from a member whose trailer is damaged);
they decompress each member with ``zlib.decompressobj(wbits=31)``, which only reports a
member as complete once its CRC and length check out.

A sparse side index (``.idx``: pairs of byte offset and first seq) lets an open or a
read start near the end instead of at byte 0. It is derived data: missing or wrong, it is
rebuilt from the log.
"""
from __future__ import annotations

import fcntl
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

LOG_NAME = "memory_ledger.jsonl.gz"
GZIP_MAGIC = b"\x1f\x8b\x08"
READ_CHUNK = 1 << 20
COMPRESS_LEVEL = 6
IDX_STRIDE = 256 * 1024  # record a member in the side index at most every this many bytes
_IDX_RECORD = struct.Struct("<QQ")


@dataclass(frozen=True)
class Member:
    """One complete, CRC-checked gzip member and its decompressed bytes."""

    offset: int
    end: int
    data: bytes


@dataclass(frozen=True)
class BadMember(Exception):
    """The scan stopped at ``offset``: the member there is cut short or not valid gzip."""

    offset: int
    reason: str
    incomplete: bool


def compress_member(data: bytes) -> bytes:
    """One complete gzip member holding ``data``."""
    c = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def scan_members(f, start: int = 0) -> Iterator[Member]:
    """Yield the complete members from ``start`` to EOF; raise BadMember where they stop."""
    f.seek(start)
    pos = start
    buf = b""
    decomp = None
    member_start = pos
    parts: list[bytes] = []
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
        try:
            parts.append(decomp.decompress(buf))
        except zlib.error as exc:
            raise BadMember(member_start, f"invalid gzip data ({exc})", False) from None
        if decomp.eof:
            rest = decomp.unused_data
            pos += len(buf) - len(rest)
            buf = rest
            decomp = None
            yield Member(member_start, pos, b"".join(parts))
        else:
            pos += len(buf)
            buf = b""


def valid_member_after(f, offset: int) -> int | None:
    """Offset of a complete gzip member somewhere after ``offset``, if any.

    Used to tell a torn tail (nothing valid follows) from damage inside the log.
    """
    f.seek(offset + 1)
    blob = f.read()
    i = blob.find(GZIP_MAGIC)
    while i != -1:
        decomp = zlib.decompressobj(31)
        try:
            decomp.decompress(blob[i:])
            if decomp.eof:
                return offset + 1 + i
        except zlib.error:
            pass
        i = blob.find(GZIP_MAGIC, i + 1)
    return None


class LogFile:
    """The open log file of one checkpoint: locked appends, truncation, side index."""

    def __init__(self, path: Path, *, create: bool = False, writable: bool = True) -> None:
        self.path = path
        self.idx_path = path.with_name(path.name + ".idx")
        flags = (os.O_RDWR | os.O_APPEND if writable else os.O_RDONLY) | (os.O_CREAT if create else 0)
        existed = path.exists()
        self.fd = os.open(path, flags, 0o644)
        if not existed:
            _fsync_dir(path.parent)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def lock(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def unlock(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def reader(self):
        """A fresh read handle, so concurrent scans never share a file position."""
        return open(self.path, "rb")

    def append(self, member: bytes, at: int) -> None:
        """Write one member at the end (which must be ``at``) and make it durable.

        On any failure (disk full, I/O error) the file is cut back to ``at`` so no
        half-written member is left behind, and the error propagates.
        """
        try:
            view = memoryview(member)
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
            os.fdatasync(self.fd)
        except BaseException:
            os.ftruncate(self.fd, at)
            raise

    def cut(self, offset: int, save_to: Path) -> int:
        """Move the bytes from ``offset`` to EOF into ``save_to``; return how many."""
        with self.reader() as f:
            f.seek(offset)
            torn = f.read()
        with open(save_to, "wb") as out:
            out.write(torn)
            out.flush()
            os.fsync(out.fileno())
        os.ftruncate(self.fd, offset)
        os.fsync(self.fd)
        _fsync_dir(self.path.parent)
        return len(torn)

    # -- side index ---------------------------------------------------------------

    def read_index(self) -> list[tuple[int, int]]:
        """(offset, first_seq) pairs, ascending; [] when the index is missing or unreadable."""
        try:
            raw = self.idx_path.read_bytes()
        except OSError:
            return []
        usable = len(raw) - len(raw) % _IDX_RECORD.size
        return [rec for rec in _IDX_RECORD.iter_unpack(raw[:usable])]

    def add_index(self, offset: int, first_seq: int) -> None:
        with open(self.idx_path, "ab") as f:
            f.write(_IDX_RECORD.pack(offset, first_seq))

    def write_index(self, records: list[tuple[int, int]]) -> None:
        tmp = self.idx_path.with_name(self.idx_path.name + ".tmp")
        tmp.write_bytes(b"".join(_IDX_RECORD.pack(*r) for r in records))
        os.replace(tmp, self.idx_path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
