"""Opening files the one safe way: never through a link, never a FIFO or a device, never unbounded.

ARI runs on HPC login nodes and in group-shared project directories, where whoever may write a
checkpoint may also plant a symbolic link or a FIFO in it (issue 27). Every file this library
writes or reads beside the log goes through this module:

- **No write through a link.** A file the library writes (the log, its head file and side
  index, the access log and its head, set-aside copies, every file a rewrite replaces) is
  opened with ``O_NOFOLLOW`` and must be a regular file (:func:`open_file`); a link is refused
  with :class:`UnsafeFile` naming the path, a directory with ``EISDIR``.
- **Temporary files** are made with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under an unpredictable name
  in the directory of the file they replace (:func:`create_temp`), so nobody can prepare one.
- **A replaced file keeps its permission bits** (:func:`kept_mode`); **set-aside copies**
  (``.torn-*``, ``.damaged-*``, ``.rolled-back-*``) are ``0600`` (:data:`SET_ASIDE_MODE`).
- **A side file is read only when it is a regular file, under a size limit** (:func:`read_file`,
  the one rule every reader of ``node_report.json``, ``verified_context.json``, bundles and ARI's
  memory files uses): opened ``O_NONBLOCK | O_NOFOLLOW`` and checked with ``fstat`` before a
  byte is read, so a FIFO never blocks and ``/dev/zero`` never fills memory.
- **Decompression is bounded** (:func:`inflate`): a gzip member of the log inflates to at most
  :func:`max_member_bytes` (64 MiB, ``ARI_LEDGER_MAX_MEMBER_MB``), an imported file or bundle
  to at most :func:`max_inflated_bytes` (512 MiB, ``ARI_LEDGER_MAX_INFLATE_MB``); beyond, one
  error, never a ``MemoryError``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import secrets
import stat
import zlib
from pathlib import Path
from typing import Any

from .checkpoint_format import TEMP_MARK
from .errors import InvalidInput, LedgerError

log = logging.getLogger("ledger")

MiB = 1 << 20
SIDE_FILE_LIMIT = 64 * MiB  # a JSON side file (node report, verified context, manifest, head, intent)
MEMBER_ENV = "ARI_LEDGER_MAX_MEMBER_MB"
INFLATE_ENV = "ARI_LEDGER_MAX_INFLATE_MB"
DEFAULT_MEMBER_MB = 64
DEFAULT_INFLATE_MB = 512
SET_ASIDE_MODE = 0o600
GZIP_MAGIC = b"\x1f\x8b\x08"
_CHUNK = 1 << 20
_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)  # what O_NOFOLLOW answers for a link (Linux, BSD)


class UnsafeFile(LedgerError, OSError):
    """A file the library would read or write is a symbolic link, not a regular file, or larger
    than it may be: refused, nothing read from it or written to it."""

    def __init__(self, path: str | os.PathLike[str], reason: str, code: int = errno.EINVAL) -> None:
        self.path = Path(path)
        self.message = f"{os.fspath(path)} {reason}"
        super().__init__(code, self.message)

    def __str__(self) -> str:
        return self.message


def link_refusal(path: str | os.PathLike[str]) -> UnsafeFile:
    """The refusal of a symbolic link where the library reads or writes a file of its own."""
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return UnsafeFile(
        path,
        f"is a symbolic link{target}; the ledger never reads or writes its files through a link "
        "(replace the link with the file itself)",
        errno.ELOOP,
    )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_file(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` that never follows a link at the last component and returns a descriptor of a
    regular file only: a link is refused (UnsafeFile), a directory raises ``IsADirectoryError``,
    a FIFO, device or socket is refused without blocking (opened ``O_NONBLOCK``, checked with
    ``fstat``; the flag is cleared again on a regular file)."""
    try:
        fd = os.open(path, flags | _NO_FOLLOW | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS and os.path.islink(path):
            raise link_refusal(path) from None
        if exc.errno == errno.ENXIO:  # O_WRONLY on a FIFO nobody reads
            raise UnsafeFile(path, "is a FIFO, not a regular file; not opened") from None
        raise
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(path, f"is {_kind(info.st_mode)}, not a regular file; not opened")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(path: str | os.PathLike[str], limit: int | None = SIDE_FILE_LIMIT) -> bytes:
    """The bytes of a side file, read the one safe way: a regular file (never a link, a FIFO or a
    device: :func:`open_file`) of at most ``limit`` bytes (None: any size). Raises
    FileNotFoundError, UnsafeFile (one line naming the file and why), OSError."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except IsADirectoryError:
        raise UnsafeFile(path, "is a directory, not a regular file; not read", errno.EISDIR) from None
    try:
        size = os.fstat(fd).st_size
        if limit is not None and size > limit:
            raise UnsafeFile(path, f"is {size} bytes; the limit is {limit} bytes; not read", errno.EFBIG)
        parts = []
        got = 0
        while True:
            want = _CHUNK if limit is None else min(_CHUNK, limit + 1 - got)
            part = os.read(fd, want)
            if not part:
                break
            parts.append(part)
            got += len(part)
            if limit is not None and got > limit:
                raise UnsafeFile(path, f"grew beyond {limit} bytes while it was read; not read", errno.EFBIG)
        return b"".join(parts)
    finally:
        os.close(fd)


def read_json(path: str | os.PathLike[str], limit: int | None = SIDE_FILE_LIMIT) -> Any:
    """A side file's JSON, read as :func:`read_file` reads it; a file that is not UTF-8 JSON is
    one :class:`InvalidInput` naming the file, where and why (never a bare decoder message)."""
    raw = read_file(path, limit)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput(os.fspath(path), f"not valid JSON (not UTF-8 at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            os.fspath(path), f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None


def _megabytes(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default * MiB
    try:
        value = float(raw)
    except ValueError:
        log.warning("%s=%r is not a number of MiB; using %d", name, raw, default)
        return default * MiB
    return max(1, int(value * MiB))


def max_member_bytes() -> int:
    """What one gzip member of a log may inflate to (``ARI_LEDGER_MAX_MEMBER_MB``, default 64 MiB);
    the writer refuses a larger member, so a log this library wrote never holds one."""
    return _megabytes(MEMBER_ENV, DEFAULT_MEMBER_MB)


def max_inflated_bytes() -> int:
    """What an imported ARI memory file or a compressed bundle may inflate to, all its members
    together (``ARI_LEDGER_MAX_INFLATE_MB``, default 512 MiB); also the most bytes such a file
    may hold before it is inflated."""
    return _megabytes(INFLATE_ENV, DEFAULT_INFLATE_MB)


class TooLarge(ValueError):
    """Decompression stopped at its limit (see :func:`inflate`)."""

    def __init__(self, limit: int, env: str) -> None:
        self.limit = limit
        super().__init__(f"inflates to more than {limit} bytes (the limit, set by {env}); not read")


def inflate(data: bytes | bytearray, limit: int, *, env: str = INFLATE_ENV) -> bytearray:
    """What a gzip file (one or more members, zero bytes allowed between them, as
    ``gzip.decompress`` reads it) inflates to, never more than ``limit`` bytes in all: beyond,
    TooLarge. Fed a chunk at a time and gathered in place, so no more than ``limit`` bytes and
    a few chunks are ever held. Raises ``zlib.error`` for bad data, EOFError for a file that ends
    inside a member."""
    out = bytearray()
    view = memoryview(data)
    pos = 0
    while True:
        while pos < len(data) and data[pos] == 0:
            pos += 1
        if pos >= len(data):
            return out
        if not data.startswith(b"\x1f\x8b", pos):
            raise zlib.error(f"not a gzip member at byte {pos}")
        decomp = zlib.decompressobj(31)
        buf: bytes | memoryview = b""
        full = False  # the last call filled its room: zlib may hold more output without more input
        while not decomp.eof:
            if not buf and pos < len(data):
                buf = view[pos : pos + _CHUNK]
                pos += len(buf)
            elif not buf and not full:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")
            room = min(4 * _CHUNK, limit + 1 - len(out))
            part = decomp.decompress(buf, room)
            if len(out) + len(part) > limit:
                raise TooLarge(limit, env)
            out += part
            full = len(part) == room
            buf = decomp.unconsumed_tail
        pos -= len(decomp.unused_data)  # what follows the member in the last chunk fed


def kept_mode(path: str | os.PathLike[str]) -> int | None:
    """The permission bits of the regular file at ``path`` (not followed), which a file replacing
    it keeps; None when there is none (or it is not a regular file)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None


def create_temp(beside: str | os.PathLike[str], *, mode: int = 0o600, hidden: bool = False) -> tuple[int, Path]:
    """A new, empty temporary file in the directory of ``beside``, made exclusively
    (``O_CREAT | O_EXCL | O_NOFOLLOW``) under an unpredictable name
    (``<name>.tmp-<random>``, with a leading dot when ``hidden``): a descriptor open for
    writing and its path. Nobody can have prepared it, link or file."""
    target = Path(beside)
    for _ in range(100):
        name = f"{'.' if hidden else ''}{target.name}{TEMP_MARK}{secrets.token_hex(8)}"
        path = target.with_name(name)
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, mode), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name after 100 tries", os.fspath(target))


def create_new(path: str | os.PathLike[str], mode: int = SET_ASIDE_MODE) -> int:
    """A file that must not exist yet (a set-aside copy with its stamped name), made exclusively
    (``O_CREAT | O_EXCL | O_NOFOLLOW``): a descriptor open for writing."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, mode)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (short writes continued)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def restrict(path: str | os.PathLike[str]) -> None:
    """Make a file set aside by a rename (``.rolled-back-*``) readable by its owner only (0600);
    a link or a file that cannot be opened is left as it is, with a warning."""
    try:
        fd = open_file(path, os.O_RDONLY)
    except OSError as exc:
        log.warning("could not make %s private (%s)", path, exc)
        return
    try:
        os.fchmod(fd, SET_ASIDE_MODE)
    except OSError as exc:
        log.warning("could not make %s private (%s)", path, exc)
    finally:
        os.close(fd)
