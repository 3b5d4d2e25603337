"""Where a checkpoint's memory files live: one subdirectory, out of ARI's way.

ARI's loop copies every top-level *file* of the checkpoint that its ``PathManager.META_FILES``
does not name into each node's work dir (and the node report then lists them as the node's
files), but it never copies a subdirectory. So everything this project writes lives in
``{checkpoint}/memory_ledger/`` — the log, its head file, side index, snapshot, set-aside and
rollback records — which ``cp -r`` still carries. The files ARI itself names stay where ARI
reads them (``memory_access.jsonl``, ``memory_backup.jsonl.gz``, ``verified_context.json``).

Checkpoints written before (the same files at the top level) keep working: reading commands
find the log in either place, and the first writable open moves the old files in, under a
lock, one atomic rename each, so several processes may open at once and a crash at any point
leaves a checkpoint that opens (each file is in exactly one of the two places). A dry run
(``moves_suspended``) and a read-only open read them where they are and move nothing.

A checkpoint is given by one unmistakable path (:func:`check_checkpoint_dir`, which every
resolution of the store directory runs): the ``memory_ledger/`` folder itself, or any folder
inside a checkpoint, is refused, naming the checkpoint to pass instead. Taken for a checkpoint
of the old layout, such a folder would have its log moved one level deeper, out of sight.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from .checkpoint_format import (
    ACCESS_LOG_NAME,
    ACCESS_ROTATED,
    ACCESS_SUMMARY_NAME,
    BACKUP_NAME,
    LOG_NAME,
    V05_REACT_NAME,
    V05_STORE_NAME,
)

# the names are the checkpoint format's (ledger.checkpoint_format), kept here for their readers
from .checkpoint_format import OLD_SNAPSHOT_NAME as OLD_SNAPSHOT_NAME
from .checkpoint_format import REDACT_INTENT_SUFFIX as REDACT_INTENT_SUFFIX
from .checkpoint_format import REDACT_TMP_SUFFIX as REDACT_TMP_SUFFIX
from .checkpoint_format import REPAIR_INTENT_SUFFIX as REPAIR_INTENT_SUFFIX
from .checkpoint_format import SNAPSHOT_NAME as SNAPSHOT_NAME
from .checkpoint_format import STORE_DIR as STORE_DIR
from .checkpoint_format import VERIFIED_CONTEXT_NAME as VERIFIED_CONTEXT_NAME
from .errors import InvalidInput
from .log import fsync_dir

log = logging.getLogger("ledger")

# What earlier versions wrote at the checkpoint's top level: the log and every file named
# after it (.head, .idx, .rollbacks, .torn-*, .rolled-back-*), the snapshot and its leftovers.
_LEGACY = re.compile(rf"^(?:{re.escape(LOG_NAME)}|{re.escape(OLD_SNAPSHOT_NAME)})(?:\..+)?$")

# Files that are memory, never a node's evidence: this project's, and ARI's own memory files
# (the backup, the access log and its rotations, the v0.5 store and trace, the paper context).
_ROTATED_HEAD, _ROTATED_TAIL = ACCESS_ROTATED.split("{stamp}")
_MEMORY_FILE = re.compile(
    "^(?:"
    + "|".join(
        re.escape(name)
        for name in (LOG_NAME, SNAPSHOT_NAME, BACKUP_NAME, V05_STORE_NAME, V05_REACT_NAME, VERIFIED_CONTEXT_NAME)
    )
    + r")(?:\..+)?$"
    + rf"|^{re.escape(ACCESS_LOG_NAME)}$|^{re.escape(_ROTATED_HEAD)}[^/]+{re.escape(_ROTATED_TAIL)}$"
    + rf"|^{re.escape(ACCESS_SUMMARY_NAME)}$"
)


# Set while a dry run opens a checkpoint: the layout move waits for an open that may change it.
_MOVES_SUSPENDED: ContextVar[bool] = ContextVar("ledger_layout_moves_suspended", default=False)


def store_dir(checkpoint_dir: str | Path) -> Path:
    """``{checkpoint}/memory_ledger``: where this project's files of a checkpoint live.

    Every open resolves it, so every open refuses a path that is not a checkpoint
    (:func:`check_checkpoint_dir`: raises InvalidInput), and a ``memory_ledger`` that is a
    symbolic link: the ledger never writes its files through a link someone planted (the
    checkpoint itself may be one)."""
    check_checkpoint_dir(checkpoint_dir)
    store = Path(checkpoint_dir) / STORE_DIR
    if os.path.islink(store):
        try:
            target = f" (to {os.readlink(store)})"
        except OSError:
            target = ""
        raise InvalidInput(
            "checkpoint",
            f"{store} is a symbolic link{target}; the ledger never reads or writes its files through a "
            "link: replace it with the directory itself",
        )
    return store


def shown(path: str | Path) -> str:
    """A path as a message or a listing shows it: its bytes that are not UTF-8 as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def not_utf8(path: str | Path, records: str) -> str | None:
    """Why a path that ``records`` (a checkpoint, a skill's files) keep as UTF-8 text cannot be
    used, before anything is written there; None when it can. Its bytes that are not UTF-8 are
    shown as ``\\xNN``."""
    raw = os.fsencode(os.path.abspath(path))
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"{shown(path)} is not a UTF-8 path ({records} as UTF-8 text); pass another"
    return None


def check_checkpoint_dir(checkpoint_dir: str | Path) -> None:
    """Refuse a path that cannot be a checkpoint, naming what to pass instead (InvalidInput,
    field ``checkpoint``); a path that does not exist yet is fine (an open creates it).

    The rule, checked on the path as given and, when it is a symbolic link, on what it names:

    - a file (anything but a directory) is not a checkpoint;
    - a folder named ``memory_ledger`` is the ledger's own folder (``CKPT/memory_ledger``: pass
      ``CKPT``), never a checkpoint, also one that does not exist yet;
    - a folder inside a checkpoint (an ancestor ``A`` holds ``A/memory_ledger/memory_ledger.jsonl.gz``)
      is not a checkpoint of its own: pass ``A``, or a folder outside it.

    A checkpoint of the old layout (``memory_ledger.jsonl.gz`` at its top, in a folder of any
    other name) is a checkpoint: it opens, and the first writable open moves its files in.
    """
    given = Path(checkpoint_dir)
    problem = _not_a_checkpoint(given, str(given))
    if problem is None:
        real = Path(os.path.realpath(given))
        if real != Path(os.path.abspath(given)):
            problem = _not_a_checkpoint(real, f"{given} (a link to {real})")
    if problem is not None:
        raise InvalidInput("checkpoint", problem)


def _not_a_checkpoint(path: Path, shown: str) -> str | None:
    """Why ``path`` (named ``shown`` in the message) cannot be a checkpoint, or None."""
    if path.exists() and not path.is_dir():
        kind = "a file" if path.is_file() else "not a directory"
        return (
            f"{shown} is {kind}, not a checkpoint: a checkpoint is a directory "
            f"(ARI's checkpoints/<run_id>/, the folder that holds {STORE_DIR}/)"
        )
    norm = Path(os.path.normpath(path))
    absolute = Path(os.path.abspath(path))
    # Ancestors as the caller wrote them (a relative path stays relative in the message).
    written = {Path(os.path.abspath(p)): p for p in norm.parents if str(p) not in (".", "")}
    if absolute.name == STORE_DIR:
        parent = written.get(absolute.parent, absolute.parent)
        if _holds_log(absolute.parent) or _holds_ledger_files(absolute):
            return f"{shown} is the ledger's own folder inside checkpoint {parent}; pass {parent}"
        return (
            f"{shown} is named {STORE_DIR}, the name of the ledger's own folder inside a checkpoint; "
            f"pass the checkpoint that holds it, or give the checkpoint another name"
        )
    for ancestor in absolute.parents:
        if _holds_log(ancestor):
            outer = written.get(ancestor, ancestor)
            return (
                f"{shown} lies inside checkpoint {outer} ({outer / STORE_DIR / LOG_NAME} is its log), "
                f"so it is not a checkpoint of its own; pass {outer}, or a directory outside it"
            )
    return None


def unfinished(checkpoint_dir: str | Path) -> list[str]:
    """The operations a crash left unfinished in a checkpoint (``repair``, ``redaction``): their
    intent files beside the log. Two file checks, no read of the log."""
    path = log_path(checkpoint_dir)
    found = []
    for suffix, name in ((REPAIR_INTENT_SUFFIX, "repair"), (REDACT_INTENT_SUFFIX, "redaction")):
        intent = path.with_name(path.name + suffix)
        if intent.exists() or intent.is_symlink():
            found.append(name)
    return found


def unfinished_message(checkpoint_dir: str | Path, found: list[str]) -> str:
    """What a process that may not finish them says of unfinished operations: which, and the one
    command that finishes them."""
    what = " and ".join(f"a {name}" for name in found)
    return (
        f"{what} of {checkpoint_dir} is not finished (a crash interrupted it, or another process is still at it); "
        f"nothing is read from the checkpoint until it is: `ari-ledger repair {checkpoint_dir}` finishes it (as "
        "does any process that opens it for writing)"
    )


def memory_file_problem(path: str | Path) -> str | None:
    """Why a command may not write to ``path``, or None: it is a file of a checkpoint's memory
    (the log and its side files, the snapshot, anything in ``memory_ledger/``, the access log,
    the verified context), whatever the path looks like (relative, ``..``, through a link).
    An output path is never the checkpoint's own truth: ``report -o CKPT/memory_ledger/…`` would
    replace the log with a web page."""
    given = Path(path)
    real = Path(os.path.realpath(given))
    for folder in (real, *real.parents):
        if folder.name == STORE_DIR and (_holds_log(folder.parent) or _holds_ledger_files(folder)):
            return f"{given} is inside {folder}, the memory of checkpoint {folder.parent}: name a file outside it"
    ours = _MEMORY_FILE.match(real.name) and not real.name.startswith(BACKUP_NAME)  # export-ari writes that
    if ours and (_holds_log(real.parent) or _holds_ledger_files(real.parent)):
        return f"{given} is {real.name} of checkpoint {real.parent}, a file of its memory: name a file outside it"
    return None


def _holds_log(directory: Path) -> bool:
    """True when ``directory`` is a checkpoint of this layout: it holds ``memory_ledger/memory_ledger.jsonl.gz``."""
    try:
        return (directory / STORE_DIR / LOG_NAME).exists()
    except OSError:  # unreadable: not known to be one
        return False


def _holds_ledger_files(directory: Path) -> bool:
    """True when ``directory`` holds a file this project writes (the log, or a file named after it)."""
    return bool(_legacy_files(directory)) or (directory / SNAPSHOT_NAME).exists() or (directory / STORE_DIR).is_dir()


def misplaced_log(checkpoint_dir: str | Path) -> Path | None:
    """A log one level too deep (``CKPT/memory_ledger/memory_ledger/memory_ledger.jsonl.gz``):
    where earlier versions moved it when ``CKPT/memory_ledger`` was opened for writing as a
    checkpoint of the old layout. None when there is none."""
    deeper = Path(checkpoint_dir) / STORE_DIR / STORE_DIR / LOG_NAME
    return deeper if deeper.exists() else None


@contextmanager
def moves_suspended() -> Iterator[None]:
    """For a dry run: opens inside the block read an old-layout checkpoint where it is and move
    nothing (a writable open still takes the lock and reads under it)."""
    token = _MOVES_SUSPENDED.set(True)
    try:
        yield
    finally:
        _MOVES_SUSPENDED.reset(token)


def log_path(checkpoint_dir: str | Path) -> Path:
    """The checkpoint's log as it is on disk: in the store directory, or at the top level for a
    checkpoint not yet moved; the store directory's path when there is none yet."""
    new = store_dir(checkpoint_dir) / LOG_NAME
    if new.exists():
        return new
    old = Path(checkpoint_dir) / LOG_NAME
    return old if old.exists() else new


def has_ledger(checkpoint_dir: str | Path) -> bool:
    """True when the checkpoint holds a log, in either layout."""
    return log_path(checkpoint_dir).exists()


def is_memory_file(path: str) -> bool:
    """True for a path naming a memory file (this project's or ARI's), which is never evidence:
    by its name, or by lying in a ``memory_ledger/`` directory."""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    return bool(parts) and (_MEMORY_FILE.match(parts[-1]) is not None or STORE_DIR in parts[:-1])


def move_legacy_files(checkpoint_dir: str | Path) -> list[str]:
    """Move the files an earlier version left at the top level into the store directory.

    Called by every writable open; costs one directory listing when there is nothing to move.
    Refuses a path that is not a checkpoint (:func:`check_checkpoint_dir`) before anything
    moves; moves nothing inside :func:`moves_suspended` (a dry run).
    Under a lock on the store directory, so concurrent openers move each file once; the log
    goes first and each file is one ``rename``, so whatever a crash interrupts, the next open
    finishes. A file whose name is already taken in the store directory is kept beside it as
    ``<name>.pre-move-<stamp>``, never written over; the snapshot drops the ``.zst`` of its old
    name (it was never compressed). Returns one line per file moved.
    """
    top = Path(checkpoint_dir)
    store = store_dir(top)  # refuses a path that is not a checkpoint, before anything moves
    if _MOVES_SUSPENDED.get() or not _legacy_files(top):
        return []
    store.mkdir(exist_ok=True)
    moved = []
    with _locked(store):
        for name in sorted(_legacy_files(top), key=lambda n: (n != LOG_NAME, n)):
            target = store / name.replace(OLD_SNAPSHOT_NAME, SNAPSHOT_NAME, 1)
            if target.exists():
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
                target = store / f"{name}.pre-move-{stamp}"
            try:
                os.rename(top / name, target)
            except FileNotFoundError:
                continue
            moved.append(f"{name} -> {STORE_DIR}/{target.name}")
        if moved:
            fsync_dir(store)
            fsync_dir(top)
    if moved:
        log.warning("%s: moved the memory's files into %s/ (out of ARI's node work dirs): %s", top, STORE_DIR, moved)
    return moved


def _legacy_files(top: Path) -> list[str]:
    try:
        with os.scandir(top) as entries:
            return [e.name for e in entries if _LEGACY.match(e.name) and e.is_file(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on ``directory`` (a no-op where the file system has no ``flock``:
    each move is still one rename that never overwrites a file this version wrote)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK):
                raise
        yield
    finally:
        os.close(fd)
