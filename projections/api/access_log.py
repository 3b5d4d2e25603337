"""ARI's access log, ``memory_access.jsonl``: one JSON line per memory read and write.

ARI's viz (``/api/checkpoint/<id>/memory_access``) and ``ari memory compact-access`` read this
file, so every line starts with ARI's own fields, spelled as ARI writes them; this library's
additions (``tool``, ``pid`` and whatever the caller passes) follow as extra keys. It is an
audit trail, not a source of truth: nothing here may fail a memory call, so failures (disk
full, permissions, a read-only file system) are kept in ``problems`` and logged once.

Many processes share one checkpoint (ARI runs nodes in parallel), so each line is appended with
a single ``write()`` on an ``O_APPEND`` descriptor while holding an exclusive ``flock`` on the
file itself. The holder of the lock on the inode currently named ``memory_access.jsonl`` is the
only process that may rotate it; a writer that finds its inode renamed away retries on the new
file. Rotation goes to ``memory_access.<unix time>.jsonl`` (ARI's name), or to
``memory_access.<unix time>_<n>.jsonl`` when that name is taken, so nothing is overwritten and
``compact-access``'s glob ``memory_access.*.jsonl`` still finds every rotated file. Without
``flock`` (some network file systems) lines are still appended, unlocked and never rotated.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from ledger import config, layout
from ledger.anchor import AnchorUnreadable, HeadFile
from ledger.events import utc_now
from projections import settings
from projections.models.access_chain import GENESIS, last_line, link, rechain, seal

log = logging.getLogger(__name__)

ACCESS_LOG_NAME = "memory_access.jsonl"
ROTATED_GLOB = "memory_access.*.jsonl"  # what ``ari memory compact-access`` collects
KEEP_PROBLEMS = 10
_SETTLE_ATTEMPTS = 1000  # reopen-after-rotation rounds before a line is given up
_FIXED = ("ts", "node_id", "op", "tool", "pid")
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC  # read: the last line, to chain onto
_TAIL_WINDOW = 4096
CHAIN_KEYS = ("n", "prev", "hash")  # sealed on by the chain, never a caller's
HEAD_ID = "memory_access"  # the head file's record names the access log, not a ledger
# str.splitlines() (ARI's readers) also breaks on these; JSON allows them raw in a string,
# so they are escaped to keep one event on one line as ARI reads it.
_LINE_BREAKS = ((b"\xc2\x85", b"\\u0085"), (b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))
_encoder = msgspec.json.Encoder(enc_hook=str)


class AccessLog:
    """memory_access.jsonl in ARI's line format; never raises into the caller."""

    def __init__(self, checkpoint_dir: Path, *, muted: bool = False) -> None:
        self.path = Path(checkpoint_dir) / ACCESS_LOG_NAME
        self.muted = muted  # a read-only backend (a person's `ari-ledger search`) writes nothing
        self.head = HeadFile(layout.store_dir(checkpoint_dir) / ACCESS_LOG_NAME)  # the chain's newest line
        self._problems: collections.deque[str] = collections.deque(maxlen=KEEP_PROBLEMS)
        self._warned: set[tuple[str, int | None]] = set()
        self._end: tuple[int, int, int] | None = None  # (dev, ino, size) just past our last line…
        self._last: tuple[int, str] = (0, GENESIS)  # …which is this (n, hash)

    # ARI's two line shapes --------------------------------------------------------------

    def write(
        self,
        collection: str,
        entry_id: str,
        text: str,
        metadata: dict,
        *,
        tool: str,
        node: str | None = None,
        **extra: Any,
    ) -> None:
        """ARI's write line (``collection`` is ``node_scope`` or ``react_step``)."""
        if self.muted or not settings.access_log_enabled():
            return
        self._append(
            {
                **self._head("write", node),
                "collection": collection,
                "entry_id": entry_id,
                "text_preview": (text or "")[: settings.access_log_preview_chars()],
                "metadata": metadata or {},
            },
            tool,
            extra,
        )

    def read(
        self,
        collection: str,
        query: str,
        ancestor_ids: list[str] | None,
        limit: int,
        results: list[dict],
        *,
        tool: str,
        node: str | None = None,
        **extra: Any,
    ) -> None:
        """ARI's read line; ``ancestor_ids`` is None for ReAct reads, ``results`` carry
        ``entry_id``/``src_node_id``/``score`` (inheritance reads: ``query="inherit:…"``). Added:
        ``ids`` (the entry ids returned, in order) and what the caller passes, such as ``at``
        (the log position read at) and ``args`` (what else a replay needs)."""
        if self.muted or not settings.access_log_enabled():
            return
        self._append(
            {
                **self._head("read", node),
                "collection": collection,
                "query": query,
                "ancestor_ids": None if ancestor_ids is None else list(ancestor_ids),
                "limit": limit,
                "results": results,
            },
            tool,
            {"ids": [r.get("entry_id") for r in results if isinstance(r, dict)], **extra},
        )

    def node_search(
        self,
        query: str,
        scope: list[str],
        limit: int,
        results: list[Any],
        *,
        tool: str,
        as_of: int | None,
        **extra: Any,
    ) -> None:
        """The read line of a scored search of node memory (``results``: entry views with
        ``entry_id``, ``node_id`` and ``score``)."""
        refs = [{"entry_id": r["entry_id"], "src_node_id": r["node_id"], "score": r["score"]} for r in results]
        self.read("node_scope", query, scope, limit, refs, tool=tool, as_of=as_of, **extra)

    def record(self, op: str, tool: str, *, node: str | None = None, **fields: Any) -> None:
        """A line for this library's other operations (``refused``, ``clear``, ``purge``,
        ``seed``, ``import``, ``audit``, ``context``, …): ARI's ``ts``/``node_id``/``op`` then
        ``fields``. ``write``/``read`` lines must carry ARI's fields, so they go through
        :meth:`write` and :meth:`read` and are refused here."""
        if self.muted or not settings.access_log_enabled():
            return
        if op in ("write", "read"):
            self._problem("record", ValueError(f"op {op!r} has ARI's shape; use AccessLog.{op}()"))
            return
        self._append(self._head(op, node), tool, fields)

    # ARI compatibility and health ---------------------------------------------------------

    def flush_and_close(self) -> None:
        """ARI's tests drain its queue with this. Lines here are written synchronously, so it
        only fsyncs the current file and closes the head file; the log stays usable afterwards."""
        self.head.close()
        if self.muted or not settings.access_log_enabled():
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as exc:
            self._problem("fsync", exc)
            return
        try:
            os.fsync(fd)
        except OSError as exc:
            self._problem("fsync", exc)
        finally:
            os.close(fd)

    def rewrite(self, scrub: Callable[[Any], tuple[Any, bool]]) -> list[str]:
        """Pass every line of the access log and its rotations through ``scrub`` (a JSON value ->
        (value, changed)), seal the chain again from the first changed line on, and replace each
        file whose bytes changed, atomically, under that file's lock: a writer waiting for it
        finds the new file (as after a rotation) and no line is lost. Returns the names of the
        files rewritten. For ``ari-ledger redact``."""
        rewritten = []
        running: str | None = None  # the hash the next file's first line must name
        for path in sorted(self.path.parent.glob("memory_access*.json*")):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            lines: list[bytes] = []
            try:
                self._lock(fd)
                if os.fstat(fd).st_ino != os.stat(path).st_ino:
                    continue  # rotated meanwhile: its new name comes later in the listing, or not at all
                with open(fd, "rb", closefd=False) as f:
                    raw = f.read()
                if path.suffix == ".jsonl":
                    lines, running = rechain(_scrub_lines(raw, scrub), running)
                    new = b"".join(line + b"\n" for line in lines)
                else:
                    new = _scrub_whole(raw, scrub)
                if new != raw:
                    tmp = path.with_name(path.name + ".redact-tmp")
                    with open(tmp, "wb") as out:
                        out.write(new)
                        out.flush()
                        os.fsync(out.fileno())
                    os.replace(tmp, path)
                    rewritten.append(path.name)
                if path == self.path and lines and (last := link(lines[-1])).n is not None:
                    self.head.write(HEAD_ID, last.n, last.hash, both=True)
            finally:
                os.close(fd)
        return rewritten

    @property
    def problems(self) -> list[str]:
        """The last few failures, newest last, for ``health()``/``status``; never raised."""
        return list(self._problems)

    # internals ----------------------------------------------------------------------------

    @staticmethod
    def _head(op: str, node: str | None) -> dict[str, Any]:
        who = node if node is not None else (config.current_node() or "")
        return {"ts": time.time(), "node_id": who, "op": op}

    def _append(self, line: dict[str, Any], tool: str, extra: dict[str, Any]) -> None:
        try:
            line["tool"] = tool
            line["pid"] = os.getpid()
            clash = [k for k in extra if k in line or k in CHAIN_KEYS]
            if clash:
                self._problem("fields", ValueError(f"extra fields {clash} would overwrite fixed ones; dropped"))
            line.update((k, v) for k, v in extra.items() if k not in line and k not in CHAIN_KEYS)
            self._append_bytes(_encode(line))
        except Exception as exc:  # telemetry must not fail a memory call
            self._problem("append", exc)

    def _append_bytes(self, data: bytes) -> None:
        """Append ``data`` as one ``write()`` under an exclusive lock on the current file,
        rotating it first when it has reached the size limit."""
        max_bytes = settings.access_log_max_bytes()
        for _ in range(_SETTLE_ATTEMPTS):
            try:
                fd = os.open(self.path, _OPEN_FLAGS, 0o644)
            except OSError as exc:
                self._problem("open", exc)
                return
            try:
                locked = self._lock(fd)
                mine = os.fstat(fd)
                try:
                    named = os.stat(self.path)
                except FileNotFoundError:
                    continue  # rotated (or removed) while we waited: reopen
                if (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino):
                    continue  # another process rotated our inode away: reopen
                if locked and mine.st_size >= max_bytes:
                    try:
                        self._rotate()
                        continue
                    except OSError as exc:  # keep the line in the big file rather than lose it
                        self._problem("rotate", exc)
                self._write_once(fd, self._chained(fd, mine, data, locked))
                return
            except OSError as exc:
                self._problem("write", exc)
                return
            finally:
                os.close(fd)  # releases the flock
        self._problem("write", OSError(errno.EAGAIN, f"no stable {ACCESS_LOG_NAME} after {_SETTLE_ATTEMPTS} reopens"))

    def _chained(self, fd: int, mine: os.stat_result, data: bytes, locked: bool) -> bytes:
        """``data`` (one JSON object) sealed onto the file's last line, with its newline; the
        head file then names it. Only under the lock is the last line still last when ours
        lands: unlocked (no ``flock``), lines are chained as well as they can be."""
        here = (mine.st_dev, mine.st_ino, mine.st_size)
        if here == self._end:
            n, prev = self._last  # our own line is still the last: no read back
            glue = b""
        else:
            (n, prev), glue = self._tail(fd, mine.st_size)
        line, digest = seal(data, n + 1, prev)
        out = glue + line + b"\n"
        self._end, self._last = (mine.st_dev, mine.st_ino, mine.st_size + len(out)), (n + 1, digest)
        if locked:
            try:
                self.head.write(HEAD_ID, n + 1, digest)
            except FileNotFoundError:
                pass  # no memory_ledger/ (an access log without a ledger): no head to keep
            except OSError as exc:
                self._problem("head", exc)
        return out

    def _tail(self, fd: int, size: int) -> tuple[tuple[int, str], bytes]:
        """(n, hash) of the last line of the file (of the chain, from the head file, when the
        file is new after a rotation), and a newline to write first when a torn line ends it."""
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
            fd = os.open(rotated[-1], os.O_RDONLY | os.O_CLOEXEC)
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

    def _lock(self, fd: int) -> bool:
        """Take the exclusive lock. A file system without ``flock`` (Lustre mounted without
        ``-o flock`` answers ENOSYS) still gets the line, unlocked and never rotated."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return True
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                raise
            self._problem("lock", exc)
            return False

    def _write_once(self, fd: int, data: bytes) -> None:
        """One ``write()``. A short write (a full disk) is cut back off when the file still
        ends with it, which holding the lock guarantees, so no partial line stays."""
        written = os.write(fd, data)
        if written != len(data):
            end = os.lseek(fd, 0, os.SEEK_CUR)  # O_APPEND: just past our piece
            if os.fstat(fd).st_size == end:
                os.ftruncate(fd, end - written)
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes), line dropped")

    def _rotate(self) -> None:
        """Rename the current file (the caller holds its lock) to a free rotated name."""
        stamp = int(time.time())
        target = self.path.with_name(f"memory_access.{stamp}.jsonl")
        n = 0
        while target.exists():
            n += 1
            target = self.path.with_name(f"memory_access.{stamp}_{n:03d}.jsonl")
        os.rename(self.path, target)
        log.info("access log rotated to %s", target.name)

    def _problem(self, what: str, exc: BaseException) -> None:
        self._problems.append(f"{utc_now()} {what}: {type(exc).__name__}: {exc}")
        key = (what, getattr(exc, "errno", None))
        if key not in self._warned:
            self._warned.add(key)
            log.warning("access log %s, %s: %s (kept in problems; memory calls are unaffected)", self.path, what, exc)


def _encode(line: dict[str, Any]) -> bytes:
    """One JSON object (no newline), UTF-8 as is (``ensure_ascii=False``), big ints exact;
    values JSON cannot hold are turned into strings rather than losing the line."""
    try:
        data = _encoder.encode(line)
    except (TypeError, ValueError, RecursionError, msgspec.EncodeError):
        data = _encoder.encode(_plain(line, 0))
    for raw, escaped in _LINE_BREAKS:
        data = data.replace(raw, escaped)
    return data


def _plain(value: Any, depth: int) -> Any:
    """``value`` with string keys and JSON types only (cycles and deep nesting cut)."""
    if depth > 32:
        return "…"
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v, depth + 1) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _scrub_lines(raw: bytes, scrub: Callable[[Any], tuple[Any, bool]]) -> list[bytes]:
    """The lines of ``raw`` (no newlines) through ``scrub``; a changed line is encoded anew."""
    out = []
    for line in raw.splitlines():
        try:
            value, hit = scrub(msgspec.json.decode(line))
            new = _encode(value) if hit else line
        except msgspec.DecodeError:  # not a JSON line (a torn write): scrubbed as text
            text, hit = scrub(line.decode("utf-8", "replace"))
            new = text.encode() if hit else line
        out.append(new)
    return out


def _scrub_whole(raw: bytes, scrub: Callable[[Any], tuple[Any, bool]]) -> bytes:
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return raw
    value, hit = scrub(value)
    return msgspec.json.encode(value) if hit else raw
