"""Anchors: the seq and hash of an event, kept outside the log, to catch a log cut back.

A hash chain proves that nothing inside the log was edited, but not that nothing was cut
off its end: a log cut back at a member boundary, or replaced by an older copy, is a valid
shorter chain. An anchor is an event someone outside the log has seen. The ledger keeps one
itself, the **head file** ``memory_ledger.jsonl.gz.head``: the newest event every append
acknowledged. Others come from a projection snapshot, ``verified_context.json``, an export
manifest or ``verify --head HASH``. A log that ends before an anchor, or holds another event
at its seq, lost acknowledged events: that is an alarm for a person, never a silent rebuild.

The head file holds two fixed-size slots written alternately in place, each one ``pwrite``
of a JSON line with a check value. It is written after the log's ``fdatasync`` (an append's
own, outside the log's lock) and not synced itself: after a power loss it may lag the log, never lead it. A torn slot fails its
check and the other slot (one append older) is used. The head file is never read or written
through a link (:mod:`ledger.safe_io`): a link in its place is refused.
"""

from __future__ import annotations

import errno
import json
import os
import re
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from .checkpoint_format import HEAD_SUFFIX as HEAD_SUFFIX
from .checkpoint_format import VERIFIED_CONTEXT_NAME
from .log import fsync_dir
from .output import replace_file
from .safe_io import SIDE_FILE_LIMIT, UnsafeFile, open_file, read_file

SLOT = 256  # bytes per slot; two slots


@dataclass(frozen=True)
class Anchor:
    """An event seen from outside the log: its hash, its seq (None: any seq), its checkpoint."""

    source: str
    hash: str
    seq: int | None = None
    ckpt: str | None = None

    def describe(self) -> str:
        where = "some seq" if self.seq is None else f"seq {self.seq}"
        return f"{self.source} ({where}, hash {self.hash[:12]}…)"


class AnchorUnreadable(ValueError):
    """An anchor file exists but holds no valid record."""


class _Slot(msgspec.Struct, forbid_unknown_fields=True):
    ckpt: str
    seq: int
    hash: str
    check: int


def _check(ckpt: str, seq: int, hash: str) -> int:
    return zlib.crc32(f"{ckpt}|{seq}|{hash}".encode())


_PLAIN = re.compile(r"[\w.:-]*\Z", re.ASCII)


def _encode(ckpt: str, seq: int, hash: str) -> bytes:
    if _PLAIN.match(ckpt) and _PLAIN.match(hash):  # every id and hash: no JSON escape needed, msgspec's bytes
        line = b'{"ckpt":"%s","seq":%d,"hash":"%s","check":%d}' % (
            ckpt.encode(),
            seq,
            hash.encode(),
            _check(ckpt, seq, hash),
        )
    else:
        line = msgspec.json.encode(_Slot(ckpt, seq, hash, _check(ckpt, seq, hash)))
    if len(line) >= SLOT:
        raise ValueError(f"head record of {len(line)} bytes does not fit a {SLOT}-byte slot")
    return line.ljust(SLOT - 1) + b"\n"


def _decode(raw: bytes) -> _Slot | None:
    try:
        slot: _Slot = msgspec.json.decode(raw.strip(), type=_Slot)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return slot if slot.check == _check(slot.ckpt, slot.seq, slot.hash) else None


_SEQ_KEY = b'","seq":'


def _held_seq(raw: bytes, ckpt: str) -> int:
    """The seq a slot holds for checkpoint ``ckpt`` (0 for another checkpoint's, a blank or a torn
    slot), read from the bytes as ``_encode`` lays them out: on every append, so no JSON decode."""
    head = b'{"ckpt":"' + ckpt.encode()
    if not raw.startswith(head + _SEQ_KEY):
        return 0
    start = len(head) + len(_SEQ_KEY)
    end = raw.find(b",", start)
    digits = raw[start:end]
    return int(digits) if end > start and digits.isdigit() else 0


class HeadFile:
    """``memory_ledger.jsonl.gz.head``: the newest acknowledged event of the log beside it."""

    def __init__(self, log_path: Path) -> None:
        self.path = log_path.with_name(log_path.name + HEAD_SUFFIX)
        self.source = self.path.name
        self.damaged_slot = False  # the last read found one slot damaged and used the other
        self._fd = -1
        self._lock = threading.Lock()

    def read(self) -> Anchor | None:
        """The newest valid slot; None when the file does not exist.

        Raises AnchorUnreadable when the file exists but neither slot checks out, UnsafeFile when
        a link, a FIFO or a device is in its place.
        """
        try:
            raw = read_file(self.path, 64 * SLOT)
        except FileNotFoundError:
            return None
        except UnsafeFile as exc:
            if exc.errno != errno.EFBIG:
                raise
            raise AnchorUnreadable(f"{self.source} holds no valid record (more than {64 * SLOT} bytes)") from None
        slots = [s for s in (_decode(raw[:SLOT]), _decode(raw[SLOT : 2 * SLOT])) if s is not None]
        self.damaged_slot = len(slots) == 1
        if not slots:
            raise AnchorUnreadable(f"{self.source} holds no valid record ({len(raw)} bytes)")
        best = max(slots, key=lambda s: s.seq)
        return Anchor(self.source, best.hash, best.seq, best.ckpt)

    def write(
        self, ckpt: str, seq: int, hash: str, *, both: bool = False, durable: bool = False, ordered: bool = False
    ) -> None:
        """Record the newest acknowledged event in the slot of its seq's parity; ``both`` slots
        when the anchor is set rather than advanced. Not synced unless ``durable`` (an anchor
        that lags after a power loss costs detection, never a false alarm). Appends anchor
        their events after their own ``fdatasync``, so they may arrive out of order: an advance
        is skipped when its slot already holds a newer seq of the same log (between processes
        one can still land late within microseconds; the file then lags, never leads). A writer
        that advances it under its own lock (``ordered``) skips that check."""
        with self._lock:
            if self._fd < 0:
                existed = os.path.lexists(self.path)
                self._fd = open_file(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                both = both or not existed  # a new file gets both slots, so neither is ever blank
                if durable and not existed:
                    fsync_dir(self.path.parent)
            offset = 0 if both else (seq % 2) * SLOT
            if not both and not ordered and _held_seq(os.pread(self._fd, SLOT, offset), ckpt) >= seq:
                return
            record = _encode(ckpt, seq, hash)
            os.pwrite(self._fd, record + record if both else record, offset)
            if durable:
                os.fsync(self._fd)

    def create(self, ckpt: str, seq: int, hash: str) -> None:
        """Write a new head file whole or not at all (both slots in a temporary file made
        exclusively beside it, synced, renamed into place, the directory synced): a crash never
        leaves an empty head file, which would read as "holds no valid record"."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)  # a descriptor of the file being replaced
                self._fd = -1
            record = _encode(ckpt, seq, hash)
            replace_file(self.path, record + record)

    def forked(self) -> None:
        """In a forked child: the lock may be held by a parent thread that does not exist here."""
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def anchor_problem(anchor: Anchor, ckpt: str | None, last_seq: int, hash_at: Callable[[int], str | None]) -> str | None:
    """Why the log (checkpoint ``ckpt``, ending at ``last_seq``) does not hold ``anchor``.

    ``hash_at(seq)`` gives the hash of the log's event at a seq <= ``last_seq``. Only for
    anchors with a seq; ``verify --head`` (any seq) is checked during the scan.
    """
    if anchor.seq is None or anchor.seq < 1:
        return None
    if anchor.ckpt is not None and ckpt is not None and anchor.ckpt != ckpt:
        return (
            f"{anchor.source} anchors checkpoint {anchor.ckpt}, but this log is checkpoint {ckpt}: the log was replaced"
        )
    if anchor.seq > last_seq:
        return (
            f"the log ends at seq {last_seq}, but {anchor.source} records seq {anchor.seq} "
            f"(hash {anchor.hash[:12]}…): acknowledged events were removed"
        )
    found = hash_at(anchor.seq)
    if found != anchor.hash:
        return (
            f"{anchor.source} records seq {anchor.seq} with hash {anchor.hash[:12]}…, but the log's seq "
            f"{anchor.seq} has hash {(found or '?')[:12]}…: the log was rewritten"
        )
    return None


# ---------------------------------------------------------------------------- a side file's anchor


def verified_context_anchor(checkpoint_dir: Path) -> tuple[Anchor | None, str | None]:
    """The anchor the checkpoint's ``verified_context.json`` records (see :func:`context_anchor`)."""
    return context_anchor(checkpoint_dir / VERIFIED_CONTEXT_NAME)


def context_anchor(path: Path) -> tuple[Anchor | None, str | None]:
    """The anchor a verified context file records (``{"anchor": {"seq", "hash"}}``, written by
    ``projections.api.verified.VerifiedContext.save``), or why it cannot be read; (None, None) when the file or its
    anchor is absent. Read only when it is a regular file of at most 64 MiB
    (:func:`ledger.safe_io.read_file`): a link, a FIFO or a device in its place is a problem named in
    one line, never followed and never waited on."""
    try:
        data = json.loads(read_file(path, SIDE_FILE_LIMIT).decode("utf-8"))
    except FileNotFoundError:
        return None, None
    except UnsafeFile as exc:
        return None, f"{path.name} is unreadable: {exc}"
    except (OSError, ValueError) as exc:
        return None, f"{path.name} is unreadable ({exc})"
    anchor = data.get("anchor") if isinstance(data, dict) else None
    if anchor is None:
        return None, None
    seq, hash_ = (anchor.get("seq"), anchor.get("hash")) if isinstance(anchor, dict) else (None, None)
    if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(hash_, str):
        return None, f'{path.name}: anchor must be {{"seq": int, "hash": str}}, got {anchor!r}'
    return Anchor(path.name, hash_, seq), None
