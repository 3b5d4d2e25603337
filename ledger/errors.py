"""The error hierarchy: every refusal the library makes on purpose is one of these.

Messages are written for the person who has to act on them: they name the field,
the seq or the byte offset, and the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

# An error echoes what it was given; a value longer than this is cut to its first characters
# and its length, and a message longer than ten of them is cut too (a screenful, not 120 KB).
ECHO_LIMIT = 200
_LONG_WORD = re.compile(r"[^\s'\"…]{" + str(ECHO_LIMIT + 1) + ",}")  # quotes around it are not the value
_LINE_BREAK = re.compile(r"\s*[\r\n]\s*")
_ESCAPED_BYTE = re.compile(r"\\udc([89a-f][0-9a-f])")  # a repr'd byte that is not UTF-8 (surrogateescape)


def one_line(message: str) -> str:
    """How every surface (the command line, the MCP server, the library) shows a message: on
    one line; a byte that is not UTF-8 as ``\\xff``, not as a surrogate; a character no line can
    show (NUL, a form feed, U+2028) as ``repr`` writes it; an echoed value longer than
    :data:`ECHO_LIMIT` cut to its first characters and ``… (N characters)``."""
    try:
        message = message.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that stands for no byte
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    message = "".join(map(_shown, _LINE_BREAK.sub(" ", message.strip())))
    message = _ESCAPED_BYTE.sub(r"\\x\1", message)
    message = _LONG_WORD.sub(lambda m: f"{m.group()[:ECHO_LIMIT]}… ({len(m.group())} characters)", message)
    if len(message) > 10 * ECHO_LIMIT:
        message = f"{message[: 2 * ECHO_LIMIT]}… ({len(message)} characters)"
    return message


_LINE_BOUNDARIES = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines() breaks at besides \r \n


def _shown(char: str) -> str:
    """A character as a message line shows it: one that would break the line or shows nothing
    (NUL, DEL, a form feed, U+2028) as ``repr`` writes it."""
    if char in _LINE_BOUNDARIES or not (char.isprintable() or char == " "):
        return repr(char)[1:-1]
    return char


def cut_echoes(message: str, values: Iterable[str]) -> str:
    """``message`` with each of ``values`` longer than :data:`ECHO_LIMIT` that it echoes, spaces
    and all (an argument, a call's string), cut to its first characters and ``… (N characters)``."""
    for value in sorted({v for v in values if len(v) > ECHO_LIMIT}, key=len, reverse=True):
        cut = f"{value[:ECHO_LIMIT]}… ({len(value)} characters)"
        for form in (value, repr(value)[1:-1]):
            message = message.replace(form, cut)
    return message


# What a RollbackDetected tells the person to do: the only two ways past the alarm.
ACT_ON_ROLLBACK = (
    "restore the missing events (a backup, a .torn-* file), or accept the log as it is with "
    "`ari-ledger verify --accept-rollback CKPT`"
)


def act_on_missing_log(expected: Path, misplaced: Path | None = None) -> str:
    """What a RollbackDetected tells the person when the log holds no event (it is missing, or
    an open created it empty a moment ago) while an anchor records later events: the log looks
    missing or moved. Accepting the rollback would accept an empty log and set the anchors
    aside, so that is not offered; ``misplaced`` is a log found where an earlier version moved
    it (``ledger.layout.misplaced_log``)."""
    where = (
        f"; a log lies at {misplaced} (moved one level too deep by an earlier version that took "
        f"{expected.parent} for a checkpoint): move the files of {misplaced.parent} back into "
        f"{expected.parent} (over an empty log there, if any)"
        if misplaced is not None
        else f"; put it back there (from a backup or a copy of the checkpoint, with its {expected.name}.head)"
    )
    return f"the log looks missing or moved: it is expected at {expected}{where}"


def os_reason(exc: BaseException) -> str:
    """Why a file could not be used, in words (``no such file or directory``), without the
    ``[Errno 2]`` and the path Python's message repeats (the caller names the file)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return " ".join(str(exc).split()) or type(exc).__name__


_DECODED_KINDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "null": "null",
    "array": "an array",
    "object": "an object",
}
_MISMATCH = re.compile(r"Expected `([^`]+)`, got `([^`]+)`")


def decoded_reason(reason: str) -> str:
    """A decoder's reason (msgspec's ``Expected `str | null`, got `array```) in the words of
    the JSON a user wrote: ``expected a string or null, got an array``."""
    found = _MISMATCH.fullmatch(reason)
    if found is None:
        return reason[:1].lower() + reason[1:]
    want = " or ".join(_DECODED_KINDS.get(k.strip(), k.strip()) for k in found[1].split("|"))
    return f"expected {want}, got {_DECODED_KINDS.get(found[2], found[2])}"


def kind_of(value: object) -> str:
    """What a value is, in the words of the JSON a user wrote (``null``, ``a number``), not
    Python's type names (``NoneType``, ``int``): how an error says what it got instead."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def refusal(error: str) -> dict[str, bool | str]:
    """ARI's refusal shape, ``{"ok": False, "error": ...}``: what a call that refuses answers
    (a copy-on-write violation, an MCP server's refusals), nothing read or written."""
    return {"ok": False, "error": error}


class LedgerError(Exception):
    """Base class of every error raised on purpose by ari-memory-ledger."""


class InvalidInput(LedgerError, ValueError):
    """Bad input to a write or a query; nothing was written."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(one_line(f"{field}: {reason}"))  # the same line on every surface


class CopyOnWriteViolation(LedgerError):
    """A write for a node other than the current one (or with no current node)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def as_dict(self) -> dict[str, bool | str]:
        """ARI's refusal shape (:func:`refusal`): ``{"ok": False, "error": ...}``."""
        return refusal(self.message)


class UnsupportedVersion(LedgerError):
    """An event written by a newer version of this library than the one reading it."""


class LogCorrupted(LedgerError):
    """Damage inside the log (not a torn tail): a bad gzip member or a broken hash chain."""

    def __init__(self, message: str, *, seq: int | None = None, offset: int | None = None) -> None:
        self.seq = seq
        self.offset = offset
        super().__init__(message)


class LedgerNotFound(LedgerError):
    """The checkpoint has no ledger (and the caller asked not to create one)."""


class ConfigurationError(LedgerError, RuntimeError):
    """The environment does not say enough, or says something unsupported (ARI raises
    ``RuntimeError`` here, so this is one)."""


class LedgerReadOnly(LedgerError):
    """An append to a ledger that was opened read-only (by request, or because the checkpoint
    cannot be written: read-only file system, permission denied)."""


class WriteUnconfirmed(LedgerError, OSError):
    """An event was written to the log but ``fdatasync`` failed (an I/O error of the disk), so it
    may or may not survive a power loss; it was not acknowledged. Other writers may have appended
    after it, so it cannot be taken back: ``verify`` and a fresh read tell whether it is there."""


class RollbackDetected(LogCorrupted):
    """The log is shorter than, or differs from, what an anchor outside it has seen: the head
    file, a projection snapshot, ``verified_context.json`` or ``verify --head``. Refused until a
    person acts (restores the missing events, or runs ``ari-ledger verify --accept-rollback``)."""


class UnfinishedOperation(LedgerError):
    """A repair or a redaction a crash interrupted, found by an open that may not finish it (a
    read-only one): nothing is served from the checkpoint until a writable open, or the one
    command the message names, finishes it (as SQLite treats a hot journal)."""


class LockUnavailable(LedgerReadOnly):
    """The checkpoint's file system cannot lock files (``flock`` answers ENOSYS, EOPNOTSUPP or
    ENOLCK: Lustre mounted without ``-o flock``, some NFS setups), so appends, which must be
    serialized across processes, are refused; reads still work."""
