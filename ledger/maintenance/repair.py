"""Repair a damaged log: explicit, never automatic (a tool beside the storage, as ZODB's
``fsrecover`` is beside ``FileStorage``).

Opening refuses a log with damage before its tail, rightly, but that leaves ARI unable to run.
``repair`` keeps the longest valid prefix, moves every byte after it aside to
``memory_ledger.jsonl.gz.damaged-<stamp>`` (byte for byte, never deleted), re-anchors the head
file at the prefix's end, and re-appends what it can salvage from the bytes set aside — each line
that still decodes to an event whose own hash checks — as new events marked salvaged (the original
seq, hash and file in ``origin.salvaged``). The result verifies: the prefix is untouched, the
salvaged events are new links of the same chain. Lines whose hash fails are not re-appended
(their content cannot be trusted); they stay in the set-aside file.

A repair is journaled and can be run again: its intent is recorded first
(``memory_ledger.jsonl.gz.repair``), and a crash at any point leaves a checkpoint the next
``repair`` finishes (see :func:`repair`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from .. import layout
from ..anchor import AnchorUnreadable, HeadFile
from ..chain import ChainError, decode_line
from ..checkpoint_format import DAMAGED_MARK, REPAIR_INTENT_SUFFIX, ROLLED_BACK_MARK
from ..errors import InvalidInput, LedgerError, LedgerNotFound
from ..events import Event, upcast
from ..ledger import Ledger
from ..log import LogFile, fsync_dir
from ..output import replace_file
from ..safe_io import GZIP_MAGIC, SET_ASIDE_MODE, SIDE_FILE_LIMIT, max_member_bytes, read_file, restrict

log = logging.getLogger("ledger")

_CHUNK = 1 << 16
INTENT_SUFFIX = REPAIR_INTENT_SUFFIX  # memory_ledger.jsonl.gz.repair: a repair under way (see :func:`repair`)


@dataclass(frozen=True)
class RepairReport:
    """What ``repair`` kept, set aside and salvaged."""

    kept: int  # events of the valid prefix
    kept_bytes: int
    reason: str | None = None  # what verify found (None: nothing to repair)
    set_aside: Path | None = None
    set_aside_bytes: int = 0
    salvaged: list[tuple[int, int]] = field(default_factory=list)  # (original seq, new seq)
    unreadable: int = 0  # lines in the set-aside bytes that are not a checked event of this log
    resumed: bool = False  # this run finished a repair a crash had interrupted

    def lines(self) -> list[str]:
        if self.reason is None:
            return [f"nothing to repair: {self.kept:,} events, chain intact"]
        assert self.set_aside is not None
        out = [
            *(["resumed: a repair a crash interrupted, finished from its record"] if self.resumed else []),
            f"found: {self.reason}",
            f"kept: seq 1..{self.kept} ({self.kept_bytes} bytes), untouched",
            f"set aside: {self.set_aside_bytes} bytes, byte for byte, in {self.set_aside.name}",
            f"salvaged: {len(self.salvaged):,} events re-appended, marked salvaged"
            + (
                f" (seq {self.salvaged[0][0]}..{self.salvaged[-1][0]} → {self.salvaged[0][1]}..)"
                if self.salvaged
                else ""
            ),
        ]
        if self.unreadable:
            out.append(f"not salvaged: {self.unreadable} lines whose hash fails or that are not events of this log")
        return out


def repair(checkpoint_dir: str | Path, *, before_done: Callable[[], object] | None = None) -> RepairReport:
    """Repair the checkpoint's log in place; see the module docstring. Raises LedgerNotFound, and
    LedgerError when an interrupted repair cannot be finished (it says what remains).

    A journaled operation: the intent (``memory_ledger.jsonl.gz.repair``: where the damage
    starts, the bytes from there to the end by size and sha256, the prefix kept) is made durable
    before anything changes, and every later step can be run again, so a crash at any point
    leaves a checkpoint the next ``repair`` finishes (it reads the intent first, before
    looking for damage): the set-aside copy (made again from the log if a crash took it), the
    head file lowered to the kept prefix (before the cut, so it never names a seq the log no
    longer holds), the cut, the salvaged events re-appended (those already re-appended are
    skipped), and only then the intent removed. Salvageable events are never only in
    ``.damaged-*``: until they are in the log, the intent says a repair must finish.
    ``before_done``: run after the salvaged events are re-appended and before the intent is
    removed (the read side moves aside the derived files the cut invalidated), so a crash
    before it ends leaves the intent, and the next run does it again."""
    directory = Path(checkpoint_dir)
    layout.move_legacy_files(directory)
    path = layout.log_path(directory)
    if not path.exists():
        raise LedgerNotFound(f"no ledger at {path} (is {directory} a checkpoint directory?)")
    intent_path = path.with_name(path.name + INTENT_SUFFIX)
    logfile = LogFile(path)
    try:
        logfile.lock()  # no writer appends meanwhile (none can: an open refuses the damage)
        intent = _read_intent(intent_path)
        resumed = intent is not None
        if intent is None:
            with Ledger.open_readonly(directory) as probe:
                found = probe.verify()
                if found.reason is None or found.offset is None:
                    return RepairReport(found.events, found.file_size)
                kept = found.first_bad_seq - 1 if found.first_bad_seq else 0
                last = probe.event_at(kept) if kept else None
                ckpt = (last.ckpt if last else None) or probe.ckpt
            with logfile.reader() as f:
                f.seek(found.offset)
                tail = f.read()
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            intent = _Intent(
                f"{path.name}{DAMAGED_MARK}{stamp}",
                found.offset,
                len(tail),
                hashlib.sha256(tail).hexdigest(),
                kept,
                last.hash if last else "",
                ckpt,
                found.reason,
            )
            replace_file(intent_path, msgspec.json.encode(intent))  # 1. the intent, durable, first
        _cut(path, logfile, intent)  # 2-4: set aside, head lowered, cut
    finally:
        logfile.close()  # releases the lock
    aside = path.with_name(intent.aside)
    events, unreadable = salvage(read_file(aside, None), intent.ckpt)
    salvaged = _reappend(directory, events, aside.name)  # 5. idempotent: skips what is there
    if before_done is not None:  # the caller's own step (the read side's derived files), also run again after a crash
        before_done()
    intent_path.unlink()  # 6. done
    fsync_dir(path.parent)
    return RepairReport(
        intent.kept, intent.offset, intent.reason, aside, intent.size, salvaged, unreadable, resumed=resumed
    )


class _Intent(msgspec.Struct, forbid_unknown_fields=True):
    """What a repair is about to do, recorded (durably) before it changes anything."""

    aside: str  # the name of the set-aside copy, beside the log
    offset: int  # where the damage starts: the log is cut here
    size: int  # bytes from ``offset`` to the end of the log when the repair began…
    sha256: str  # …and their digest
    kept: int  # seq of the kept prefix's last event (0: none)
    kept_hash: str
    ckpt: str | None
    reason: str


def _read_intent(path: Path) -> _Intent | None:
    try:
        raw = read_file(path, SIDE_FILE_LIMIT)
    except FileNotFoundError:
        return None
    try:
        return msgspec.json.decode(raw, type=_Intent)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise LedgerError(
            f"{path.name} (an interrupted repair's record) cannot be read ({exc}); the log is as that repair "
            f"left it: look at it with `ari-ledger verify`, then remove {path.name} and run `ari-ledger repair` again"
        ) from None


def _cut(path: Path, logfile: LogFile, intent: _Intent) -> None:
    """Steps 2-4 of a repair, each skipped when a previous run did it (under the log's lock)."""
    end = intent.offset + intent.size
    tail = b""
    if logfile.size() == end:
        with logfile.reader() as f:
            f.seek(intent.offset)
            tail = f.read()
    still_there = len(tail) == intent.size and hashlib.sha256(tail).hexdigest() == intent.sha256
    aside = path.with_name(intent.aside)
    try:
        copied = hashlib.sha256(read_file(aside, None)).hexdigest() == intent.sha256
    except FileNotFoundError:
        copied = False
    if not copied:  # 2. the set-aside copy, byte for byte, whole or not at all
        if not still_there:
            raise LedgerError(
                f"an interrupted repair cannot be finished: its set-aside copy {aside.name} is missing or differs, and "
                f"the log no longer holds those {intent.size} bytes at offset {intent.offset}; nothing was changed. "
                f"Look for them in {path.name}.torn-* files, then remove {path.name}{INTENT_SUFFIX}"
            )
        replace_file(aside, tail, mode=SET_ASIDE_MODE)  # readable by its owner only
    _reanchor(path, intent)  # 3. the head at the kept prefix, before the cut: it never leads the log
    if still_there:  # 4. the cut (a writable open may have moved a torn-looking tail aside already)
        os.ftruncate(logfile.fd, intent.offset)
        os.fsync(logfile.fd)
        logfile.write_index([r for r in logfile.read_index() if r[0] < intent.offset])


def salvage(blob: bytes, ckpt: str | None) -> tuple[list[Event], int]:
    """The events in ``blob`` (bytes of gzip members, possibly damaged) whose own hash checks,
    once each, in their original seq order; and how many lines were not such events."""
    found: dict[str, Event] = {}
    unreadable = 0
    for data in _member_data(blob):
        for line in data.split(b"\n")[:-1]:  # the last piece has no newline: cut short
            try:
                event = upcast(decode_line(line))
            except (ChainError, LedgerError, ValueError):  # damaged, or a version this library cannot read
                unreadable += 1
                continue
            if ckpt is not None and event.ckpt != ckpt:
                unreadable += 1
            else:
                found.setdefault(event.hash, event)
    return sorted(found.values(), key=lambda e: e.seq), unreadable


def _member_data(blob: bytes) -> list[bytes]:
    """What each gzip member in ``blob`` decompresses to, as far as it can be read: a member cut
    short or damaged gives the bytes before the damage, one that inflates beyond the limit of a
    member (:func:`ledger.safe_io.max_member_bytes`) its first bytes up to that limit."""
    limit = max_member_bytes()
    out = []
    i = blob.find(GZIP_MAGIC)
    while i != -1:
        decomp = zlib.decompressobj(31)
        parts: list[bytes] = []
        pos, size, rest = i, 0, b""
        try:
            while size <= limit and not decomp.eof and (rest or pos < len(blob)):
                if not rest:
                    rest = blob[pos : pos + _CHUNK]
                    pos += _CHUNK
                part = decomp.decompress(rest, limit + 1 - size)
                rest = decomp.unconsumed_tail
                size += len(part)
                parts.append(part)
        except zlib.error:
            pass
        if parts:
            out.append(b"".join(parts))
        end = min(pos, len(blob)) - len(decomp.unused_data) if decomp.eof else i + 1
        i = blob.find(GZIP_MAGIC, max(end, i + 1))
    return out


def _reanchor(path: Path, intent: _Intent) -> None:
    """The head file at the kept prefix's end, durably (set aside when nothing is kept); nothing
    written when it already is."""
    head = HeadFile(path)
    if not intent.kept or intent.ckpt is None:
        if head.path.exists():
            stamp = intent.aside.rsplit("-", 1)[-1]
            target = head.path.with_name(f"{head.path.name}{ROLLED_BACK_MARK}{stamp}")
            head.path.rename(target)
            restrict(target)
            fsync_dir(path.parent)
        return
    try:
        anchor = head.read()
    except AnchorUnreadable:
        anchor = None
    if anchor is not None and (anchor.seq, anchor.hash, anchor.ckpt) == (intent.kept, intent.kept_hash, intent.ckpt):
        return
    try:
        head.write(intent.ckpt, intent.kept, intent.kept_hash, both=True, durable=True)
    finally:
        head.close()


def _reappend(directory: Path, events: list[Event], source: str) -> list[tuple[int, int]]:
    """Append the salvaged events (skipping any a previous repair already re-appended)."""
    if not events:
        return []
    with Ledger.open(directory) as ledger:
        done = {
            (e.body.get("origin") or {}).get("salvaged", {}).get("hash") for e in ledger.events() if "origin" in e.body
        }
        todo = [e for e in events if e.hash not in done]
        out = []
        for group in _groups(todo, max_member_bytes() // 4):  # each batch one member, well below its limit
            with ledger.batch() as batch:
                for event in group:
                    try:
                        new = batch.append(event.node, event.type, _marked(event, source), current_node=event.node)
                    except InvalidInput as exc:  # checked and queued one by one: the rest still land
                        log.warning("not salvaged: seq %d (%s): %s", event.seq, event.type, exc)
                        continue
                    out.append((event.seq, new.seq))
        return out


def _groups(events: list[Event], budget: int) -> list[list[Event]]:
    """``events`` in order, cut into groups of at most ``budget`` bytes of bodies (at least one
    event each), so no batch of a large salvage makes a member beyond the limit."""
    groups: list[list[Event]] = [[]]
    used = 0
    for event in events:
        size = len(msgspec.json.encode(event.body)) + 1024  # the envelope, the origin mark
        if groups[-1] and used + size > budget:
            groups.append([])
            used = 0
        groups[-1].append(event)
        used += size
    return [g for g in groups if g]


def _marked(event: Event, source: str) -> dict[str, Any]:
    body = dict(event.body)
    body["origin"] = {**(body.get("origin") or {}), "salvaged": {"seq": event.seq, "hash": event.hash, "from": source}}
    return body
