"""Crash states of a workload (issue 26 item 3): record the file-system calls one process makes,
build every state a crash could leave from them, and check each state as a real directory.

**Recording.** While a workload runs, :class:`Recorder` wraps the os-level calls the library's
write paths use — ``os.open`` (its ``O_CREAT``/``O_TRUNC``/``O_APPEND``), ``os.write``,
``os.pwrite``, ``os.ftruncate``, ``os.fsync``, ``os.fdatasync``, ``os.rename``, ``os.replace``,
``os.unlink``/``os.remove``, ``os.mkdir``, ``os.dup``, ``os.close`` — and ``open()``/``io.open``
(what ``Path.write_bytes``, ``write_text`` and ``with open(..., "wb")`` use) for every mode that
writes: such a file gets a :class:`io.FileIO` subclass as its raw file, so what the buffer
hands down (``write``, ``truncate``) is recorded with its bytes, in the order it reaches the
kernel. Only paths under the workload's directory are recorded; the writer threads' calls
(the access log's) are recorded too, in the order they happen. The workload marks what it was
told is done (``ack``: an append returned, a flush of the access log returned, a file was
saved): every state is checked against the acknowledgements made before its cut.

**The crash model.** A cut after any op (every op is a possible cut point; acknowledgements are
not ops). At a cut:

- *durable*: a file's data ops (writes, truncations) issued before its last ``fsync`` or
  ``fdatasync``; a name op (create, unlink, mkdir) only when the directory holding the name was
  fsynced after it (strict POSIX: an ``fsync`` of a file does not make its name durable); a
  rename when both directories were (with one of them synced, a state has the file under both
  names, or under neither);
- the rest *may* have reached the disk. States: the durable part alone (power loss, nothing
  more written back); the durable part plus a prefix of one file's (or the namespace's) pending
  ops, the last one of them also cut in half when it is a write; everything but one object's
  pending ops; and **SIGKILL**: every op up to the cut applied (the page cache survives), also
  with the last write cut in half (a kill inside a ``write``).

Identical states (the same files, after the same acknowledgements) are checked once, as a
SIGKILL state when a SIGKILL can leave them. A
workload's states are capped (``max_states``): beyond the cap a deterministic sample is checked
and the SIGKILL states are always kept.

Every state is materialised as a real directory and passed to the workload's checker, which
returns the violations it finds (strings). :func:`explore` returns the counts.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import os
import random
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_real = {
    name: getattr(os, name)
    for name in (
        "open",
        "close",
        "dup",
        "write",
        "pwrite",
        "ftruncate",
        "fsync",
        "fdatasync",
        "rename",
        "replace",
        "unlink",
        "remove",
        "mkdir",
    )
}
_real_open = builtins.open
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR


@dataclass
class Op:
    """One recorded call: ``create``/``write``/``trunc``/``fsync`` of an inode, ``rename``/
    ``unlink``/``mkdir``/``dirsync`` of names, or ``ack`` (what the workload was told is done)."""

    kind: str
    inode: int = -1
    name: str = ""  # relative path (the source of a rename; the directory of a dirsync)
    dst: str = ""
    offset: int = 0
    data: bytes = b""
    ack: tuple[Any, ...] = ()

    @property
    def dir(self) -> str:
        """The directory whose entries a name op changes (the new name's)."""
        return os.path.dirname(self.dst if self.kind == "rename" else self.name)


class Recorder:
    """Records the file-system calls under ``root`` while active (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.abspath(root)
        self.ops: list[Op] = []
        self._lock = threading.RLock()
        self._inodes = 0
        self.pre_files: dict[str, int] = {}  # name -> inode, before the workload
        self.pre_data: dict[int, bytes] = {}
        self.pre_dirs: set[str] = set()
        for where, dirs, files in os.walk(self.root):
            rel = os.path.relpath(where, self.root)
            for d in dirs:
                self.pre_dirs.add(os.path.normpath(os.path.join(rel, d)))
            for f in files:
                name = os.path.normpath(os.path.join(rel, f))
                self.pre_files[name] = self._new_inode()
                with _real_open(os.path.join(where, f), "rb") as fh:
                    self.pre_data[self.pre_files[name]] = fh.read()
        self._names = dict(self.pre_files)  # live: which inode a name holds
        self._dirs = set(self.pre_dirs) | {"."}
        self._fds: dict[int, tuple[str, Any]] = {}  # fd -> ("file", inode) | ("dir", name)

    def _new_inode(self) -> int:
        self._inodes += 1
        return self._inodes

    def rel(self, path: Any) -> str | None:
        if isinstance(path, int):
            return None
        p = os.path.abspath(os.fsdecode(os.fspath(path)))
        if p == self.root:
            return "."
        if not p.startswith(self.root + os.sep):
            return None
        return os.path.relpath(p, self.root)

    def ack(self, *what: Any) -> None:
        with self._lock:
            self.ops.append(Op("ack", ack=what))

    # what the wrappers call --------------------------------------------------------------

    def opened(self, path: Any, flags: int, fd: int, existed: bool) -> None:
        with self._lock:
            text = os.fsdecode(os.fspath(path)) if not isinstance(path, int) else ""
            if text.startswith("/proc/self/fd/"):
                src = self._fds.get(int(text.rsplit("/", 1)[1]))
                if src is not None:
                    self._fds[fd] = src
                else:
                    self._fds.pop(fd, None)
                return
            rel = self.rel(path)
            if rel is None:
                self._fds.pop(fd, None)
                return
            if rel in self._dirs:
                self._fds[fd] = ("dir", rel)
                return
            inode = self._names.get(rel)
            if inode is None or (not existed and flags & os.O_CREAT):
                inode = self._new_inode()
                self._names[rel] = inode
                self.ops.append(Op("create", inode, rel))
            if flags & os.O_TRUNC and flags & _WRITE_FLAGS:
                self.ops.append(Op("trunc", inode, offset=0))
            self._fds[fd] = ("file", inode)

    def wrote(self, fd: int, data: bytes, offset: int | None) -> None:
        with self._lock:
            what = self._fds.get(fd)
            if what is None or what[0] != "file" or not data:
                return
            if offset is None:  # os.write / FileIO.write: the descriptor's position is now past it
                offset = os.lseek(fd, 0, os.SEEK_CUR) - len(data)
            self.ops.append(Op("write", what[1], offset=offset, data=bytes(data)))

    def truncated(self, fd: int, length: int) -> None:
        with self._lock:
            what = self._fds.get(fd)
            if what is not None and what[0] == "file":
                self.ops.append(Op("trunc", what[1], offset=length))

    def synced(self, fd: int) -> None:
        with self._lock:
            what = self._fds.get(fd)
            if what is None:
                return
            if what[0] == "file":
                self.ops.append(Op("fsync", what[1]))
            else:
                self.ops.append(Op("dirsync", name=what[1]))

    def renamed(self, src: Any, dst: Any) -> None:
        with self._lock:
            s, d = self.rel(src), self.rel(dst)
            if s is None or d is None:
                return
            if s in self._dirs:  # a directory moved: its names move with it
                self._dirs = {d + n[len(s) :] if n == s or n.startswith(s + os.sep) else n for n in self._dirs}
                self._names = {(d + n[len(s) :] if n.startswith(s + os.sep) else n): i for n, i in self._names.items()}
                self.ops.append(Op("rename", -1, s, d))
                return
            inode = self._names.pop(s, None)
            if inode is None:
                return
            self._names[d] = inode
            self.ops.append(Op("rename", inode, s, d))

    def unlinked(self, path: Any) -> None:
        with self._lock:
            rel = self.rel(path)
            if rel is not None and self._names.pop(rel, None) is not None:
                self.ops.append(Op("unlink", name=rel))

    def made_dir(self, path: Any) -> None:
        with self._lock:
            rel = self.rel(path)
            if rel is not None:
                self._dirs.add(rel)
                self.ops.append(Op("mkdir", name=rel))

    def duped(self, fd: int, new: int) -> None:
        with self._lock:
            if fd in self._fds:
                self._fds[new] = self._fds[fd]

    def closed(self, fd: int) -> None:
        with self._lock:
            self._fds.pop(fd, None)


_ACTIVE: Recorder | None = None


class _RecFileIO(io.FileIO):
    """A raw file whose writes and truncations are recorded (see :func:`_open`)."""

    def __init__(self, file: Any, mode: str = "r", closefd: bool = True) -> None:
        existed = isinstance(file, int) or os.path.lexists(file)
        super().__init__(file, mode, closefd)
        rec = _ACTIVE
        if rec is not None and not isinstance(file, int):
            flags = os.O_CREAT if any(c in mode for c in "wax") else 0
            flags |= (os.O_TRUNC if "w" in mode else 0) | (
                os.O_RDWR if "+" in mode or "w" in mode or "a" in mode else 0
            )
            rec.opened(file, flags, self.fileno(), existed)

    def write(self, b: Any) -> int | None:  # type: ignore[override]
        n = super().write(b)
        rec = _ACTIVE
        if rec is not None and n:
            rec.wrote(self.fileno(), bytes(memoryview(b).cast("B")[:n]), None)
        return n

    def truncate(self, size: int | None = None) -> int:
        new = super().truncate(size)
        rec = _ACTIVE
        if rec is not None:
            rec.truncated(self.fileno(), new)
        return new

    def close(self) -> None:
        fd = -1 if self.closed else self.fileno()
        super().close()
        rec = _ACTIVE
        if rec is not None and fd >= 0 and self.closefd:
            rec.closed(fd)


def _open(
    file: Any,
    mode: str = "r",
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: Any = None,
) -> Any:
    """``open()`` as io.open builds it, with a recorded raw file for every mode that writes."""
    rec = _ACTIVE
    writes = any(c in mode for c in "wax+")
    if rec is None or not writes or opener is not None or (not isinstance(file, int) and rec.rel(file) is None):
        return _real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)
    raw = _RecFileIO(file, mode.replace("b", "").replace("t", ""), closefd)
    if buffering == 0:
        return raw
    size = io.DEFAULT_BUFFER_SIZE if buffering in (-1, 1) else buffering
    buffered = io.BufferedRandom(raw, size) if "+" in mode else io.BufferedWriter(raw, size)
    if "b" in mode:
        return buffered
    text = io.TextIOWrapper(buffered, encoding, errors, newline, line_buffering=buffering == 1)
    text.mode = mode  # type: ignore[misc]
    return text


@contextmanager
def recording(root: Path) -> Iterator[Recorder]:
    """Record the file-system calls under ``root`` for the block (one at a time)."""
    global _ACTIVE
    rec = Recorder(root)

    def w_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        existed = os.path.lexists(path) if not isinstance(path, int) else True
        fd = _real["open"](path, flags, mode, dir_fd=dir_fd)
        rec.opened(path, flags, fd, existed)
        return fd

    def w_close(fd: int) -> None:
        rec.closed(fd)
        _real["close"](fd)

    def w_dup(fd: int) -> int:
        new = _real["dup"](fd)
        rec.duped(fd, new)
        return new

    def w_write(fd: int, data: Any) -> int:
        n = _real["write"](fd, data)
        rec.wrote(fd, bytes(memoryview(data).cast("B")[:n]), None)
        return n

    def w_pwrite(fd: int, data: Any, offset: int) -> int:
        n = _real["pwrite"](fd, data, offset)
        rec.wrote(fd, bytes(memoryview(data).cast("B")[:n]), offset)
        return n

    def w_ftruncate(fd: int, length: int) -> None:
        _real["ftruncate"](fd, length)
        rec.truncated(fd, length)

    def w_fsync(fd: Any) -> None:
        fd = fd if isinstance(fd, int) else fd.fileno()
        _real["fsync"](fd)
        rec.synced(fd)

    def w_fdatasync(fd: int) -> None:
        _real["fdatasync"](fd)
        rec.synced(fd)

    def w_rename(src: Any, dst: Any, **kw: Any) -> None:
        _real["rename"](src, dst, **kw)
        rec.renamed(src, dst)

    def w_replace(src: Any, dst: Any, **kw: Any) -> None:
        _real["replace"](src, dst, **kw)
        rec.renamed(src, dst)

    def w_unlink(path: Any, **kw: Any) -> None:
        _real["unlink"](path, **kw)
        rec.unlinked(path)

    def w_mkdir(path: Any, mode: int = 0o777, **kw: Any) -> None:
        _real["mkdir"](path, mode, **kw)
        rec.made_dir(path)

    wrappers = {
        "open": w_open,
        "close": w_close,
        "dup": w_dup,
        "write": w_write,
        "pwrite": w_pwrite,
        "ftruncate": w_ftruncate,
        "fsync": w_fsync,
        "fdatasync": w_fdatasync,
        "rename": w_rename,
        "replace": w_replace,
        "unlink": w_unlink,
        "remove": w_unlink,
        "mkdir": w_mkdir,
    }
    _ACTIVE = rec
    for name, fn in wrappers.items():
        setattr(os, name, fn)
    builtins.open = io.open = _open  # type: ignore[assignment]
    try:
        yield rec
    finally:
        for name, fn in _real.items():
            setattr(os, name, fn)
        builtins.open = io.open = _real_open  # type: ignore[assignment]
        _ACTIVE = None


# ------------------------------------------------------------------------ the crash states


@dataclass
class State:
    """One crash state: which ops are applied (a write may be cut to ``partial`` bytes)."""

    cut: int  # ops[:cut] were issued
    applied: frozenset[int]
    partial: tuple[int, int] | None  # (op index, bytes of it that landed)
    sigkill: bool
    label: str
    told: int = -1  # the acknowledgements before ops[:told] count (-1: before the cut)
    halves: tuple[tuple[int, str], ...] = ()  # renames only one of whose directories was synced: "link"/"unlink"


def _durable(ops: list[Op], cut: int) -> tuple[set[int], dict[Any, list[int]], tuple[tuple[int, str], ...]]:
    """The ops among ``ops[:cut]`` a crash cannot take back, the rest by object (an inode's
    data ops, or the namespace's ops), in order, and the renames only half durable: a rename is
    durable when the directories of both names were synced after it; with only the new name's
    synced the file has both names ("link"), with only the old name's neither ("unlink")."""
    last_sync: dict[int, int] = {}
    last_dirsync: dict[str, int] = {}
    for i in range(cut):
        op = ops[i]
        if op.kind == "fsync":
            last_sync[op.inode] = i
        elif op.kind == "dirsync":
            last_dirsync[op.name] = i
    durable: set[int] = set()
    pending: dict[Any, list[int]] = {}
    halves: list[tuple[int, str]] = []
    for i in range(cut):
        op = ops[i]
        if op.kind in ("write", "trunc"):
            if last_sync.get(op.inode, -1) > i:
                durable.add(i)
            else:
                pending.setdefault(op.inode, []).append(i)
        elif op.kind == "rename":
            new = last_dirsync.get(op.dir or ".", -1) > i
            old = last_dirsync.get(os.path.dirname(op.name) or ".", -1) > i
            if new and old:
                durable.add(i)
            else:
                pending.setdefault("names", []).append(i)
                if new or old:
                    halves.append((i, "link" if new else "unlink"))
        elif op.kind in ("create", "unlink", "mkdir"):
            if last_dirsync.get(op.dir or ".", -1) > i:
                durable.add(i)
            else:
                pending.setdefault("names", []).append(i)
    return durable, pending, tuple(halves)


def _prefixes(n: int) -> list[int]:
    return list(range(1, n + 1)) if n <= 4 else sorted({1, 2, n // 2, n - 1, n})


def states(ops: list[Op]) -> Iterator[State]:
    """Every state of the model (see the module docstring), cut by cut."""
    cuts = [k for k in range(len(ops) + 1) if k == len(ops) or ops[k].kind != "ack"]
    for cut in cuts:
        everything = frozenset(i for i in range(cut) if ops[i].kind not in ("ack", "fsync", "dirsync"))
        yield State(cut, everything, None, True, "sigkill")
        last = max(everything, default=-1)
        if last >= 0 and ops[last].kind == "write" and len(ops[last].data) > 1:
            # killed inside the last write: nothing after it was acknowledged
            yield State(cut, everything, (last, len(ops[last].data) // 2), True, "sigkill, inside a write", last)
        durable, pending, halves = _durable(ops, cut)
        base = frozenset(durable)
        yield State(cut, base, None, False, "power loss: the durable part")
        if halves:
            yield State(cut, base, None, False, "power loss: the durable part, renames half durable", halves=halves)
        for obj, rest in pending.items():
            for j in _prefixes(len(rest)):
                yield State(cut, base | frozenset(rest[:j]), None, False, f"power loss: {j} pending op(s) of {obj}")
                op = ops[rest[j - 1]]
                if op.kind == "write" and len(op.data) > 1:
                    yield State(
                        cut,
                        base | frozenset(rest[:j]),
                        (rest[j - 1], len(op.data) // 2),
                        False,
                        f"power loss: {j} pending op(s) of {obj}, the last cut short",
                    )
            if len(pending) > 1:
                yield State(cut, everything - frozenset(rest), None, False, f"power loss: all but {obj}")


def materialise(rec: Recorder, state: State) -> tuple[dict[str, bytes], set[str]]:
    """The files (name -> bytes) and directories of a state."""
    names = dict(rec.pre_files)
    dirs = set(rec.pre_dirs)
    data: dict[int, bytearray] = {i: bytearray(b) for i, b in rec.pre_data.items()}
    halves = dict(state.halves)
    for i in range(state.cut):
        op = rec.ops[i]
        if i not in state.applied:
            if halves.get(i) == "link" and op.inode >= 0:
                names[op.dst] = op.inode
            elif halves.get(i) == "unlink":
                names.pop(op.name, None)
            continue
        if op.kind == "create":
            names[op.name] = op.inode
            data.setdefault(op.inode, bytearray())
        elif op.kind == "rename":
            if op.inode < 0:
                dirs = {
                    op.dst + n[len(op.name) :] if n == op.name or n.startswith(op.name + os.sep) else n for n in dirs
                }
                names = {
                    (op.dst + n[len(op.name) :] if n.startswith(op.name + os.sep) else n): v for n, v in names.items()
                }
            else:
                names.pop(op.name, None)
                names[op.dst] = op.inode
        elif op.kind == "unlink":
            names.pop(op.name, None)
        elif op.kind == "mkdir":
            dirs.add(op.name)
        elif op.kind in ("write", "trunc"):
            buf = data.setdefault(op.inode, bytearray())
            if op.kind == "trunc":
                del buf[op.offset :]
                if len(buf) < op.offset:
                    buf.extend(bytes(op.offset - len(buf)))
            else:
                chunk = op.data if state.partial is None or state.partial[0] != i else op.data[: state.partial[1]]
                if len(buf) < op.offset:
                    buf.extend(bytes(op.offset - len(buf)))
                buf[op.offset : op.offset + len(chunk)] = chunk
    # a name survives only where its directory does (a mkdir a crash took back takes its files)
    files = {}
    for name, inode in names.items():
        parent = os.path.dirname(name)
        if parent and not _reachable(parent, dirs):
            continue
        files[name] = bytes(data.get(inode, b""))
    return files, {d for d in dirs if _reachable(d, dirs)}


def _reachable(d: str, dirs: set[str]) -> bool:
    while d and d != ".":
        if d not in dirs:
            return False
        d = os.path.dirname(d)
    return True


def write_tree(target: Path, files: dict[str, bytes], dirs: set[str]) -> None:
    target.mkdir(parents=True)
    for d in sorted(dirs):
        (target / d).mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        (target / name).write_bytes(raw)


def digest(files: dict[str, bytes], dirs: set[str]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    for d in sorted(dirs):
        h.update(b"d" + d.encode() + b"\0")
    return h.hexdigest()


@dataclass
class Outcome:
    """A workload's crash states and what the checks found."""

    name: str
    ops: int
    states: int  # distinct states checked
    sigkill_states: int
    violations: list[tuple[str, list[str]]] = field(default_factory=list)  # (label, problems)
    sigkill_violations: int = 0
    sampled_from: int = 0  # distinct states before the cap

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for _label, problems in self.violations:
            for p in problems:
                key = p.split(":")[0]
                kinds[key] = kinds.get(key, 0) + 1
        return (
            f"{self.name}: {self.ops} ops, {self.states} states ({self.sigkill_states} SIGKILL"
            + (f"; sampled from {self.sampled_from}" if self.sampled_from > self.states else "")
            + f"), {len(self.violations)} violate ({self.sigkill_violations} SIGKILL)"
            + (f" {kinds}" if kinds else "")
        )


Checker = Callable[[Path, list[tuple[Any, ...]]], list[str]]


def explore(
    name: str,
    rec: Recorder,
    check: Checker,
    scratch: Path,
    *,
    max_states: int = 600,
    seed: int = 26,
    sanity: Path | None = None,
) -> Outcome:
    """Check every distinct crash state of a recorded workload (see the module docstring).
    ``check(directory, acks)`` gets a materialised state and the acknowledgements made before
    its cut, and returns the violations. ``sanity``: the workload's directory as it was left,
    which applying every op must reproduce (so the recording missed nothing)."""
    ops = rec.ops
    if sanity is not None:
        files, _dirs = materialise(rec, next(s for s in states(ops) if s.cut == len(ops) and s.sigkill))
        real = {
            os.path.relpath(os.path.join(w, f), sanity): _real_open(os.path.join(w, f), "rb").read()
            for w, _d, fs in os.walk(sanity)
            for f in fs
        }
        if files != real:
            differ = sorted(n for n in set(files) | set(real) if files.get(n) != real.get(n))
            raise AssertionError(f"{name}: the recording does not reproduce the directory: {differ}")
    acks_before = [0]
    for op in ops:
        acks_before.append(acks_before[-1] + (op.kind == "ack"))
    best: dict[tuple[str, int], tuple[State, dict[str, bytes], set[str]]] = {}
    for state in states(ops):
        files, dirs = materialise(rec, state)
        told = state.cut if state.told < 0 else state.told
        state.told = told
        key = (digest(files, dirs), acks_before[told])  # the same files, told the same: one check
        seen = best.get(key)
        if seen is None or (state.sigkill and not seen[0].sigkill):
            best[key] = (state, files, dirs)
    chosen = list(best.values())
    total = len(chosen)
    if total > max_states:
        kills = [c for c in chosen if c[0].sigkill]
        others = [c for c in chosen if not c[0].sigkill]
        room = max(0, max_states - len(kills))
        chosen = kills + random.Random(seed).sample(others, min(room, len(others)))
        chosen.sort(key=lambda c: c[0].cut)
    out = Outcome(name, sum(op.kind != "ack" for op in ops), len(chosen), sum(c[0].sigkill for c in chosen))
    out.sampled_from = total
    for n, (state, files, dirs) in enumerate(chosen):
        where = scratch / f"{name}-{n}"
        write_tree(where, files, dirs)
        acks = [op.ack for op in ops[: state.told] if op.kind == "ack"]
        try:
            problems = check(where, acks)
        except Exception as exc:  # a check that cannot run is a violation too
            problems = [f"check raised: {type(exc).__name__}: {exc}"]
        if problems:
            out.violations.append((f"cut {state.cut}/{len(ops)} ({state.label})", problems))
            out.sigkill_violations += state.sigkill
        shutil.rmtree(where, ignore_errors=True)
    return out


# ------------------------------------------------------------------------ workloads and checks
#
# Each workload prepares a checkpoint (not recorded: that is the state before the crash), runs
# under the recorder, and returns the checker its states must pass. What every state must give:
#
# - the log: ``Ledger.open`` (writable) succeeds, or refuses with the documented alarm only when
#   an acknowledged event is really gone; every acknowledged event is there; ``verify()`` is ok;
# - the access log: ``check_chain`` finds no problem but a torn last line (a batch never
#   acknowledged), every line a returned flush acknowledged is there, and after the next
#   writer's line the chain holds whole;
# - ``verified_context.json``: absent or a whole version, never older than the last one saved;
# - repair: nothing salvageable lives only in ``.damaged-*`` without a record that a repair must
#   finish, and running ``repair`` again leaves a log that opens, verifies, keeps the valid
#   prefix and holds each salvageable event once.

VERIFIED = "verified_context.json"


def _events_in_file(path: Path) -> list[Any]:
    from ledger.maintenance.repair import salvage

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    return salvage(raw, None)[0]


def _log_files(ckpt: Path) -> list[Path]:
    from ledger.layout import STORE_DIR
    from ledger.log import LOG_NAME

    return [ckpt / STORE_DIR / LOG_NAME, ckpt / LOG_NAME]


def ledger_problems(ckpt: Path, acked: list[str]) -> list[str]:
    """The log of a crash state: opens, holds every acknowledged event, verifies."""
    from ledger import Ledger, LedgerError

    try:
        ledger = Ledger.open(ckpt)
    except LedgerError as exc:
        present = {e.id for p in _log_files(ckpt) for e in _events_in_file(p)}
        missing = [i for i in acked if i not in present]
        if missing:
            return [f"lost: {len(missing)} acknowledged events ({type(exc).__name__}: {exc})"]
        return [f"false alarm: {type(exc).__name__}: {exc}"]
    with ledger:
        ids = {e.id for e in ledger.events()}
        report = ledger.verify()
    problems = []
    missing = [i for i in acked if i not in ids]
    if missing:
        problems.append(f"lost: {len(missing)} of {len(acked)} acknowledged events")
    if not report.ok:
        problems.append(f"verify: {report.reason}")
    return problems


def access_problems(ckpt: Path, acked_lines: int) -> list[str]:
    """The access log of a crash state, then after the next writer's line."""
    from projections.access.log import ACCESS_LOG_NAME, AccessLog
    from projections.access.reader import check_chain

    check, _lines = check_chain(ckpt)
    current = ckpt / ACCESS_LOG_NAME
    raw = current.read_bytes() if current.exists() else b""
    torn = f"{ACCESS_LOG_NAME}:{len(raw.splitlines())}:" if raw and not raw.endswith(b"\n") else None
    problems = [f"access log: {p}" for p in check.problems if torn is None or not p.startswith(torn)]
    if check.chained < acked_lines:
        problems.append(f"lost: {acked_lines - check.chained} of {acked_lines} acknowledged access lines")
    log = AccessLog(ckpt)
    log.record("probe", "crash-check")
    log.flush_and_close()
    again, _lines = check_chain(ckpt)
    problems += [f"access log after the next line: {p}" for p in again.problems]
    return problems


def file_problems(ckpt: Path, name: str, versions: list[bytes], acked: int) -> list[str]:
    """A file replaced atomically: absent (nothing saved yet) or a whole version, never older
    than the newest one acknowledged."""
    path = ckpt / name
    if not path.exists():
        return [f"lost: {name} is missing after a save returned"] if acked else []
    raw = path.read_bytes()
    if raw not in versions:
        return [f"torn: {name} is neither the old nor the new version ({len(raw)} bytes)"]
    if versions.index(raw) < acked - 1:
        return [f"lost: {name} is an older version than the one acknowledged"]
    return []


def _acked(acks: list[tuple[Any, ...]], kind: str) -> list[Any]:
    return [a[1] for a in acks if a[0] == kind]


@dataclass
class Workload:
    name: str
    prepare: Callable[[Path], Any]  # the state before the crash; returns what run/check need
    run: Callable[[Path, Recorder, Any], Any]
    check: Callable[[Path, list[tuple[Any, ...]], Any], list[str]]
    max_states: int | None = None  # a lower cap for a workload whose check is slow


def _texts(n: int, size: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return [f"entry {i}: " + rnd.randbytes(size).hex() for i in range(n)]


def _nothing(ckpt: Path) -> None:
    return None


def _appends(count: int, size: int) -> Callable[[Path, Recorder, Any], Any]:
    def run(ckpt: Path, rec: Recorder, _prep: Any) -> None:
        from ledger import Ledger

        with Ledger.open(ckpt) as ledger:
            for text in _texts(count, size, count):
                rec.ack("events", ledger.append("root", "memory_added", {"text": text}, current_node="root").id)

    return run


def _batches(ckpt: Path, rec: Recorder, _prep: Any) -> None:
    from ledger import Ledger

    texts = _texts(20, 40, 2)
    with Ledger.open(ckpt) as ledger:
        for half in (texts[:10], texts[10:]):
            with ledger.batch() as batch:
                ids = [batch.append("root", "memory_added", {"text": t}, current_node="root").id for t in half]
            for i in ids:
                rec.ack("events", i)


def _ledger_check(ckpt: Path, acks: list[tuple[Any, ...]], prep: Any) -> list[str]:
    return ledger_problems(ckpt, list(prep or []) + _acked(acks, "events"))


def _legacy(ckpt: Path) -> list[str]:
    """A checkpoint written before the store directory: its files at the top level."""
    from ledger import Ledger
    from ledger.layout import STORE_DIR

    with Ledger.open(ckpt) as ledger:
        ids = [ledger.append("root", "memory_added", {"text": t}, current_node="root").id for t in _texts(3, 40, 7)]
    store = ckpt / STORE_DIR
    for f in store.iterdir():
        f.rename(ckpt / f.name)
    store.rmdir()
    return ids


def _backend(ckpt: Path, rec: Recorder, _prep: Any) -> None:
    from projections.api import MemoryBackend

    backend = MemoryBackend(ckpt)
    lines = 0
    try:
        for round_ in range(2):
            for text in _texts(3, 30, 10 + round_):
                result = backend.add_memory("root", text, {}, current_node="root")
                rec.ack("events", result["id"])
                lines += 1
            backend.search_memory("entry", ["root"], 2)
            lines += 1
            backend.export_verified_context(["root"], ckpt)
            lines += 1
            backend.session.access.flush()
            rec.ack("access", lines)
            rec.ack("file", (ckpt / VERIFIED).read_bytes())
    finally:
        backend.close()
        backend.session.access.flush_and_close()


def _backend_check(ckpt: Path, acks: list[tuple[Any, ...]], versions: Any) -> list[str]:
    problems = file_problems(ckpt, VERIFIED, versions, len(_acked(acks, "file")))
    problems += ledger_problems(ckpt, _acked(acks, "events"))
    acked = _acked(acks, "access")
    problems += access_problems(ckpt, acked[-1] if acked else 0)
    return problems


def _access_prepare(ckpt: Path) -> None:
    from ledger.layout import store_dir

    store_dir(ckpt).mkdir()


def _access(ckpt: Path, rec: Recorder, _prep: Any) -> None:
    from projections.access.log import AccessLog

    old = os.environ.get("ARI_MEMORY_ACCESS_LOG_MAX_MB")
    os.environ["ARI_MEMORY_ACCESS_LOG_MAX_MB"] = "0.0015"  # a rotation every few lines
    try:
        log = AccessLog(ckpt)
        for i in range(8):
            log.record("probe", "crash-workload", batch=i, pad="x" * 200)
            log.record("probe", "crash-workload", batch=i, second=True)
            log.flush()
            rec.ack("access", 2 * (i + 1))
        log.flush_and_close()
    finally:
        if old is None:
            os.environ.pop("ARI_MEMORY_ACCESS_LOG_MAX_MB", None)
        else:
            os.environ["ARI_MEMORY_ACCESS_LOG_MAX_MB"] = old


def _access_check(ckpt: Path, acks: list[tuple[Any, ...]], _prep: Any) -> list[str]:
    acked = _acked(acks, "access")
    return access_problems(ckpt, acked[-1] if acked else 0)


@dataclass
class RepairCase:
    original: bytes  # the damaged log
    offset: int  # where the damage starts
    kept: list[str]  # ids of the valid prefix
    salvageable: set[str]  # hashes a complete repair re-appends


def _repair_prepare(ckpt: Path, *, cut_short: bool = False) -> RepairCase:
    """A log of 6 group commits with its third member damaged (a flipped byte: a complete member
    follows), or (``cut_short``) its last member cut short under a head that names it."""
    from ledger import Ledger
    from ledger.layout import store_dir
    from ledger.log import LOG_NAME, scan_members

    with Ledger.open(ckpt) as ledger:
        for m in range(6):
            with ledger.batch() as batch:
                for t in _texts(3, 30, 100 + m):
                    batch.append("root", "memory_added", {"text": t}, current_node="root")
        ids = [e.id for e in ledger.events()]
    kept = ids[:15] if cut_short else ids[:6]  # the members before the damage
    path = store_dir(ckpt) / LOG_NAME
    with open(path, "rb") as f:
        offsets = [m.offset for m in scan_members(f)]
    raw = bytearray(path.read_bytes())
    if cut_short:
        del raw[len(raw) - 20 :]
        offsets[2] = offsets[-1]
    else:
        raw[(offsets[2] + offsets[3]) // 2] ^= 0x55  # inside the third member's data
    path.write_bytes(bytes(raw))
    salvageable = _salvaged_by_a_repair(ckpt)
    return RepairCase(bytes(raw), offsets[2], kept, salvageable)


def _salvaged_by_a_repair(ckpt: Path) -> set[str]:
    """The hashes a complete repair of ``ckpt`` re-appends (a repair of a copy, thrown away)."""
    from ledger import Ledger
    from ledger.maintenance.repair import repair

    trial = ckpt.parent / "repair-trial"
    shutil.copytree(ckpt, trial)
    repair(trial)
    with Ledger.open(trial) as ledger:
        salvageable = {e.body["origin"]["salvaged"]["hash"] for e in ledger.events() if "origin" in e.body}
    shutil.rmtree(trial)
    return salvageable


def _repair(ckpt: Path, rec: Recorder, _case: Any) -> None:
    from ledger.maintenance.repair import repair

    rec.ack("repaired", repair(ckpt).lines())


def _intents(ckpt: Path) -> list[Path]:
    from ledger.layout import store_dir
    from ledger.log import LOG_NAME

    return sorted(store_dir(ckpt).glob(f"{LOG_NAME}.repair"))


def _repair_check(ckpt: Path, acks: list[tuple[Any, ...]], case: RepairCase) -> list[str]:
    from ledger import Ledger, LedgerError
    from ledger.errors import RollbackDetected
    from ledger.layout import store_dir
    from ledger.log import LOG_NAME
    from ledger.maintenance.repair import repair

    problems = []
    path = store_dir(ckpt) / LOG_NAME
    raw = path.read_bytes() if path.exists() else b""
    in_log = set()
    for e in _events_in_file(path):
        in_log.add(e.hash)
        in_log.add(((e.body.get("origin") or {}).get("salvaged") or {}).get("hash"))
    stranded = case.salvageable - in_log
    if stranded and not _intents(ckpt):
        problems.append(
            f"stranded: {len(stranded)} salvageable events only in .damaged-*, and nothing says a repair must finish"
        )
    try:
        Ledger.open(ckpt).close()  # what ARI's next process does
    except RollbackDetected as exc:
        problems.append(f"false alarm: {exc}")
    except LedgerError as exc:
        if raw[case.offset :] != case.original[case.offset :]:
            problems.append(f"refused after the damage was cut: {exc}")
    try:
        said = repair(ckpt).lines()  # the person runs it again
    except Exception as exc:
        return [*problems, f"repair again failed: {type(exc).__name__}: {exc}"]
    problems += _repaired_holds(ckpt, case, f"repair again (it said {said[0]!r})")
    if _intents(ckpt):
        problems.append("left: the repair's intent file is still there after repair again")
    return problems


REDACT_SECRET = "ghp_CRASH0123456789abcdef"


def _redact_prepare(ckpt: Path) -> None:
    """A demo-like small checkpoint where the secret reached every file: entries (one quoting it),
    the access log (a search for it), ``verified_context.json`` and ARI's backup."""
    from projections.api import MemoryBackend
    from projections.tools.ari_export import write_ari_backup

    backend = MemoryBackend(ckpt)
    try:
        for i in range(4):
            text = f"entry {i} on halo exchange" + (f" export GITHUB_TOKEN={REDACT_SECRET}" if i == 2 else "")
            backend.add_memory("root", text, {"i": i}, current_node="root")
        backend.search_memory(f"where is {REDACT_SECRET}", ["root"], 3)
        backend.export_verified_context(["root"], ckpt)
        write_ari_backup(backend)
    finally:
        backend.close()
        backend.session.access.flush_and_close()


def _redact_run(ckpt: Path, rec: Recorder, _prep: Any) -> None:
    from ledger.maintenance.redact import Selector
    from projections.tools.redaction import redact_checkpoint

    done = redact_checkpoint(ckpt, Selector(text=REDACT_SECRET), reason="leaked token", by="crash", check=False)
    rec.ack("redacted", done.lines())


def _redact_check(ckpt: Path, acks: list[tuple[Any, ...]], _prep: Any) -> list[str]:
    """No re-run: the log opens (what ARI's next process does). Then the person runs the same
    ``redact`` again: no file of the checkpoint holds the secret, and the log verifies."""
    from ledger import Ledger, LedgerError
    from ledger.maintenance.redact import Selector
    from projections.tools.redaction import redact_checkpoint

    problems = ledger_problems(ckpt, [])
    if _acked(acks, "redacted") and REDACT_SECRET.encode() in _every_file(ckpt):
        problems.append("leaked: the secret is in a file after the redaction returned")
    try:
        redact_checkpoint(ckpt, Selector(text=REDACT_SECRET), reason="again", by="crash", check=False)
    except Exception as exc:
        return [*problems, f"redact again failed: {type(exc).__name__}: {exc}"]
    leaked = [str(f.relative_to(ckpt)) for f in sorted(ckpt.rglob("*")) if REDACT_SECRET.encode() in _every_file(f)]
    if leaked:
        problems.append(f"leaked: the secret is still in {leaked} after redact again")
    try:
        with Ledger.open(ckpt) as ledger:
            report = ledger.verify()
    except LedgerError as exc:
        return [*problems, f"refused after redact again: {exc}"]
    if not report.ok:
        problems.append(f"verify after redact again: {report.reason}")
    return problems


def _every_file(root: Path) -> bytes:
    """The bytes of ``root`` (a file, or every file under it), gzip inflated as far as it goes."""
    import gzip
    import zlib

    out = []
    for path in [root] if root.is_file() else sorted(root.rglob("*")):
        if not path.is_file():
            continue
        raw = path.read_bytes()
        out.append(raw)
        if raw[:2] == b"\x1f\x8b":
            try:
                out.append(gzip.decompress(raw))
            except (OSError, EOFError, zlib.error):
                out.append(zlib.decompressobj(31).decompress(raw))
    return b"\n".join(out)


# -- repair and redaction, opened as ARI opens them (issue 39) ------------------------------------


def _ari_repair_prepare(ckpt: Path) -> RepairCase:
    """What ARI leaves: a log written through the backend, its snapshot and verified context
    (both anchored at the log's end), then the log's third member damaged."""
    from projections.api import MemoryBackend

    backend = MemoryBackend(ckpt)
    try:
        for text in _texts(12, 30, 200):
            backend.add_memory("root", text, {}, current_node="root")
        backend.search_memory("entry", ["root"], 3)  # folds
        backend.export_verified_context(["root"], ckpt)
        backend.session.projector.save()
    finally:
        backend.close()
    return _damage_third_member(ckpt)


def _damage_third_member(ckpt: Path) -> RepairCase:
    from ledger import Ledger
    from ledger.layout import store_dir
    from ledger.log import LOG_NAME, scan_members

    with Ledger.open_readonly(ckpt) as ledger:
        events = list(ledger.events())
    path = store_dir(ckpt) / LOG_NAME
    with open(path, "rb") as f:
        offsets = [m.offset for m in scan_members(f)]
    raw = bytearray(path.read_bytes())
    raw[(offsets[2] + offsets[3]) // 2] ^= 0x55  # inside the third member's data
    path.write_bytes(bytes(raw))
    with Ledger.open_readonly(ckpt) as probe:
        found = probe.verify()
    kept_seq = (found.first_bad_seq or 1) - 1
    salvageable = _salvaged_by_a_repair(ckpt)
    return RepairCase(bytes(raw), offsets[2], [e.id for e in events[:kept_seq]], salvageable)


def _ari_repair(ckpt: Path, rec: Recorder, _case: Any) -> None:
    from projections.tools.checkpoint import repair

    report, aside, _redaction = repair(ckpt)  # what `ari-ledger repair` runs
    rec.ack("repaired", report.lines() + aside)


def opened_as_ari_does(ckpt: Path) -> list[str]:
    """A crash state opened read-only (a person's `search`), by `verify`, then for writing (ARI's
    next process): an unfinished operation is named, never a rollback; the writable open finishes
    it and answers. Returns the problems; the checkpoint is left as the writable open left it."""
    from ledger import LedgerError
    from ledger.errors import RollbackDetected, UnfinishedOperation
    from projections.api import MemoryBackend
    from projections.tools.checkpoint import verify

    problems = []
    unfinished = _unfinished(ckpt)
    for how in ("read-only open", "verify"):
        try:
            if how == "verify":
                found = verify(ckpt)
                if found.rollback:
                    problems.append(f"{how}: reports a rollback: {found.rollback[0]}")
            else:
                MemoryBackend(ckpt, readonly=True).close()
        except UnfinishedOperation as exc:
            if not unfinished:
                problems.append(f"{how}: names an unfinished operation where there is none: {exc}")
            elif "ari-ledger repair" not in str(exc):
                problems.append(f"{how}: does not name the command that finishes it: {exc}")
        except RollbackDetected as exc:
            problems.append(f"{how}: false alarm: {exc}")
        except LedgerError as exc:
            if unfinished:
                problems.append(f"{how}: an unfinished {unfinished} reported as {type(exc).__name__}: {exc}")
    try:
        backend = MemoryBackend(ckpt)
    except RollbackDetected as exc:
        return [*problems, f"ARI's open: false alarm: {exc}"]
    except LedgerError as exc:
        if unfinished:
            return [*problems, f"ARI's open did not finish the unfinished {unfinished}: {type(exc).__name__}: {exc}"]
        return problems  # the damage before any repair began: refused, rightly
    try:
        backend.search_memory("entry", ["root"], 3)
    except LedgerError as exc:
        problems.append(f"ARI's open, then a search: {type(exc).__name__}: {exc}")
    finally:
        backend.close()
    if _unfinished(ckpt):
        problems.append(f"ARI's open left {_unfinished(ckpt)} unfinished")
    return problems


def _unfinished(ckpt: Path) -> list[str]:
    from ledger import layout

    return layout.unfinished(ckpt)


def _ari_repair_check(ckpt: Path, acks: list[tuple[Any, ...]], case: RepairCase) -> list[str]:
    from ledger.layout import store_dir
    from ledger.log import LOG_NAME

    problems = opened_as_ari_does(ckpt)
    damaged = (store_dir(ckpt) / LOG_NAME).read_bytes()[case.offset :] == case.original[case.offset :]
    if damaged and not _unfinished(ckpt):
        return problems  # no repair began: nothing to hold it to
    return problems + _repaired_holds(ckpt, case, "ARI's open")


def _repaired_holds(ckpt: Path, case: RepairCase, after: str) -> list[str]:
    """After a repair finished (``after`` says by whom): the log opens and verifies, keeps the
    valid prefix, and holds every salvageable event exactly once."""
    from ledger import Ledger, LedgerError

    try:
        with Ledger.open(ckpt) as ledger:
            events = list(ledger.events())
            report = ledger.verify()
    except LedgerError as exc:
        return [f"refused after {after}: {exc}"]
    problems = [] if report.ok else [f"verify after {after}: {report.reason}"]
    if [e.id for e in events[: len(case.kept)]] != case.kept:
        problems.append("lost: the valid prefix is not kept")
    copies: dict[str, int] = {}
    for e in events:
        h = ((e.body.get("origin") or {}).get("salvaged") or {}).get("hash")
        if h:
            copies[h] = copies.get(h, 0) + 1
    if case.salvageable - copies.keys():
        problems.append(
            f"stranded: {len(case.salvageable - copies.keys())} salvageable events not re-appended by {after}"
        )
    if any(c > 1 for c in copies.values()):
        problems.append("duplicated: a salvaged event re-appended twice")
    return problems


def _ari_redact_check(ckpt: Path, acks: list[tuple[Any, ...]], _prep: Any) -> list[str]:
    """Opened as ARI opens it before anyone runs `redact` again: once the log is redacted, no
    read serves the secret and ARI's open leaves no file holding it."""
    from ledger import Ledger
    from projections.api import MemoryBackend

    with Ledger.open_readonly(ckpt) as ledger:
        redacted = any(e.type == "events_redacted" for e in ledger.events())
    problems = opened_as_ari_does(ckpt)
    if redacted:
        leaked = [str(f.relative_to(ckpt)) for f in sorted(ckpt.rglob("*")) if REDACT_SECRET.encode() in _every_file(f)]
        if leaked:
            problems.append(f"leaked: the log is redacted, and after ARI's open the secret is still in {leaked}")
        backend = MemoryBackend(ckpt, readonly=True)
        try:
            hits = backend.search_memory(REDACT_SECRET, ["root"], 10)["results"]
        finally:
            backend.close()
        if any(REDACT_SECRET in h["text"] for h in hits):
            problems.append("served: a search returns the redacted secret")
    return problems


WORKLOADS = [
    Workload("30 appends", _nothing, _appends(30, 60), _ledger_check),
    Workload("two batches", _nothing, _batches, _ledger_check),
    Workload("appends across the index stride", _nothing, _appends(5, 60_000), _ledger_check),
    Workload("appends, verified context, close", _nothing, _backend, _backend_check),
    Workload("access log lines and head", _access_prepare, _access, _access_check),
    Workload("repair", _repair_prepare, _repair, _repair_check),
    Workload("repair, a cut-short last member", lambda c: _repair_prepare(c, cut_short=True), _repair, _repair_check),
    Workload("layout move", _legacy, _appends(3, 40), _ledger_check),
    Workload("redact", _redact_prepare, _redact_run, _redact_check, max_states=300),
    Workload("repair, opened as ARI opens it", _ari_repair_prepare, _ari_repair, _ari_repair_check, max_states=250),
    Workload("redact, opened as ARI opens it", _redact_prepare, _redact_run, _ari_redact_check, max_states=250),
]


def run_workload(work: Workload, scratch: Path, *, max_states: int = 600) -> Outcome:
    """Record one workload in ``scratch`` and check its crash states."""
    base = scratch / work.name.replace(" ", "-").replace(",", "")
    ckpt = base / "ckpt"
    ckpt.mkdir(parents=True)
    prep = work.prepare(ckpt)
    with recording(ckpt) as rec:
        out = work.run(ckpt, rec, prep)
    if work.name == "appends, verified context, close":
        prep = [a[1] for a in (op.ack for op in rec.ops if op.kind == "ack") if a[0] == "file"]
    del out
    # the states are checked on a tmpfs when there is one: their fsyncs cost nothing there
    shm = Path("/dev/shm")
    states_dir = (
        Path(tempfile.mkdtemp(prefix="crash-states-", dir=shm))
        if shm.is_dir() and os.access(shm, os.W_OK)
        else base / "states"
    )
    try:
        return explore(
            work.name,
            rec,
            lambda d, acks: work.check(d, acks, prep),
            states_dir,
            max_states=max_states,
            sanity=ckpt,
        )
    finally:
        shutil.rmtree(states_dir, ignore_errors=True)


def main() -> None:  # python -m support.crashes (from tests/): the table, one line per workload
    import logging
    import sys

    logging.disable(logging.WARNING)
    names = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        for work in WORKLOADS:
            if names and not any(n in work.name for n in names):
                continue
            out = run_workload(work, Path(tmp), max_states=work.max_states or 600)
            print(out.summary(), flush=True)
            for label, problems in out.violations[:3]:
                print("   ", label, "->", problems[0][:300], flush=True)


if __name__ == "__main__":
    main()
