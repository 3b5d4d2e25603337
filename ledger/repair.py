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
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import layout
from .anchor import HeadFile
from .chain import ChainError, decode_line
from .errors import InvalidInput, LedgerError, LedgerNotFound
from .events import Event, upcast
from .ledger import Ledger
from .log import GZIP_MAGIC, LogFile

log = logging.getLogger("ledger")

_CHUNK = 1 << 16


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

    def lines(self) -> list[str]:
        if self.reason is None:
            return [f"nothing to repair: {self.kept} events, chain intact"]
        assert self.set_aside is not None
        out = [
            f"found: {self.reason}",
            f"kept: seq 1..{self.kept} ({self.kept_bytes} bytes), untouched",
            f"set aside: {self.set_aside_bytes} bytes, byte for byte, in {self.set_aside.name}",
            f"salvaged: {len(self.salvaged)} events re-appended, marked salvaged"
            + (
                f" (seq {self.salvaged[0][0]}..{self.salvaged[-1][0]} → {self.salvaged[0][1]}..)"
                if self.salvaged
                else ""
            ),
        ]
        if self.unreadable:
            out.append(f"not salvaged: {self.unreadable} lines whose hash fails or that are not events of this log")
        return out


def repair(checkpoint_dir: str | Path) -> RepairReport:
    """Repair the checkpoint's log in place; see the module docstring. Raises LedgerNotFound."""
    directory = Path(checkpoint_dir)
    layout.move_legacy_files(directory)
    path = layout.log_path(directory)
    if not path.exists():
        raise LedgerNotFound(f"no ledger at {path} (is {directory} a checkpoint directory?)")
    logfile = LogFile(path)
    try:
        logfile.lock()  # no writer appends meanwhile (none can: an open refuses the damage)
        with Ledger.open_readonly(directory) as probe:
            found = probe.verify()
            if found.reason is None or found.offset is None:
                return RepairReport(found.events, found.file_size)
            kept = found.first_bad_seq - 1 if found.first_bad_seq else 0
            last = probe.event_at(kept) if kept else None
            ckpt = (last.ckpt if last else None) or probe.ckpt
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = path.with_name(f"{path.name}.damaged-{stamp}")
        moved = logfile.cut(found.offset, aside)
        logfile.write_index([r for r in logfile.read_index() if r[0] < found.offset])
        _reanchor(path, last, stamp)
    finally:
        logfile.close()  # releases the lock
    events, unreadable = salvage(aside.read_bytes(), ckpt)
    salvaged = _reappend(directory, events, aside.name)
    return RepairReport(kept, found.offset, found.reason, aside, moved, salvaged, unreadable)


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
    short or damaged gives the bytes before the damage."""
    out = []
    i = blob.find(GZIP_MAGIC)
    while i != -1:
        decomp = zlib.decompressobj(31)
        parts, pos = [], i
        try:
            while pos < len(blob) and not decomp.eof:
                parts.append(decomp.decompress(blob[pos : pos + _CHUNK]))
                pos += _CHUNK
        except zlib.error:
            pass
        if parts:
            out.append(b"".join(parts))
        end = len(blob) - len(decomp.unused_data) if decomp.eof else i + 1
        i = blob.find(GZIP_MAGIC, max(end, i + 1))
    return out


def _reanchor(path: Path, last: Event | None, stamp: str) -> None:
    """The head file at the kept prefix's end (set aside when nothing is kept)."""
    head = HeadFile(path)
    if last is None:
        if head.path.exists():
            head.path.rename(head.path.with_name(f"{head.path.name}.rolled-back-{stamp}"))
        return
    try:
        head.write(last.ckpt, last.seq, last.hash, both=True, durable=True)
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
        with ledger.batch() as batch:
            for event in todo:
                try:
                    new = batch.append(event.node, event.type, _marked(event, source), current_node=event.node)
                except InvalidInput as exc:  # checked and queued one by one: the rest still land
                    log.warning("not salvaged: seq %d (%s): %s", event.seq, event.type, exc)
                    continue
                out.append((event.seq, new.seq))
        return out


def _marked(event: Event, source: str) -> dict[str, Any]:
    body = dict(event.body)
    body["origin"] = {**(body.get("origin") or {}), "salvaged": {"seq": event.seq, "hash": event.hash, "from": source}}
    return body
