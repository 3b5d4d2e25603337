"""Redaction: the bodies of chosen events removed from the log, the chain still verifying.

An append-only, hash-chained log is where a leaked secret (an API key in a ReAct observation,
a token in an environment dump) cannot simply be deleted. A redaction replaces each chosen
event's line by its stub (``ledger.chain.stub_line``: the body replaced by its digest, the
envelope and hash unchanged) and appends an ``events_redacted`` event naming them, the digest
of each removed body and of each stub, with who did it and why. The chain still links; a
version-3 stub still checks against its own hash, and ``verify`` requires every stub to be named
by a later redaction (``ledger.verify.Redactions``).

The log is rewritten under its lock, in one checked pass, into a temporary file beside it (members
holding no chosen event copied byte for byte, the others rebuilt, then the redaction event), synced,
and renamed over the log: a SIGKILL at any point leaves either the old log (and a temporary file
the next writable open removes) or the new one. Processes holding the log open notice the rename
at their next lock or refresh (``Ledger._follow_replacement``) and continue on the new file; a
writer waiting for the old file's lock appends to the new one. The side index is rewritten and
the head file anchored at the redaction event. Files set aside beside the log (torn tails, rolled
back or repaired bytes) that hold a removed body are deleted.

The derived files (the projection snapshot, the access log, ``verified_context.json``, Letta
passages) are the read side's: ``projections.api.redaction`` does them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from .chain import body_digest, canonical, decode_line, stub_line, unhashed_bytes
from .errors import InvalidInput
from .events import CHECKPOINT_NODE, Event, EventsRedacted, Redacted, check_text, is_stub_body, upcast, validate_body
from .layout import REDACT_TMP_SUFFIX
from .ledger import Ledger
from .log import IDX_STRIDE, compress_member, fsync_dir
from .recovery import walk

log = logging.getLogger("ledger")

REDACTABLE = ("memory_added", "react_step", "core_seeded")  # the event types that carry caller text
_KEEP = (".head", ".idx", ".idx.tmp", ".rollbacks")  # files beside the log that hold no body


@dataclass(frozen=True)
class Selector:
    """Which events to redact: by id, by node, by a literal or regular expression over their
    text (every string of the body: text, metadata, ReAct content, core memory)."""

    ids: tuple[str, ...] = ()
    node: str | None = None
    text: str | None = None
    regex: bool = False

    def __post_init__(self) -> None:
        if not (self.ids or self.node or self.text):
            raise InvalidInput("selector", "say what to redact: event ids, a node, or a text to match")
        if self.text is not None:
            try:
                _ = self.pattern  # a bad expression fails here, before anything is read
            except re.error as exc:
                raise InvalidInput("text", f"not a valid regular expression ({exc})") from None

    @cached_property
    def pattern(self) -> re.Pattern[str] | None:
        if self.text is None:
            return None
        return re.compile(self.text if self.regex else re.escape(self.text))

    def describe(self) -> str:
        """How the events were chosen, never the matched text (it may be the secret)."""
        parts = [f"{len(self.ids)} event id(s)"] if self.ids else []
        parts += [f"node {self.node}"] if self.node else []
        parts += [("a regular expression" if self.regex else "a literal text") + " match"] if self.text else []
        return ", ".join(parts)

    def matches(self, event: Event) -> bool:
        if event.type not in REDACTABLE or is_stub_body(event.body):
            return False
        if self.ids and event.id not in self.ids:
            return False
        if self.node and event.node != self.node:
            return False
        pattern = self.pattern
        return pattern is None or any(pattern.search(s) for s in strings_of(event.body))

    def found_in(self, data: bytes) -> bool:
        """Whether the text matches anywhere in raw bytes (read as UTF-8, damage replaced)."""
        pattern = self.pattern
        return pattern is not None and pattern.search(data.decode("utf-8", "replace")) is not None


def strings_of(value: Any) -> Iterable[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_of(v)


@dataclass
class RedactionReport:
    """What a redaction chose, and (unless a dry run) what it wrote and removed."""

    chosen: list[Event]
    selector: str
    event: Event | None = None  # the events_redacted event (None: dry run or nothing chosen)
    bytes_before: int = 0
    bytes_after: int = 0
    removed_files: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = "would redact" if self.event is None else "redacted"
        out = [f"{head} {len(self.chosen)} event(s) chosen by {self.selector}"]
        out += [f"  seq {e.seq}  {e.type}  node {e.node}  id {e.id}" for e in self.chosen]
        if self.event is not None:
            out.append(
                f"recorded as seq {self.event.seq} (events_redacted); log {self.bytes_before} -> {self.bytes_after} bytes"
            )
            out += [f"deleted {name} (it held a removed body)" for name in self.removed_files]
        return out


def redact(
    checkpoint_dir: str | Path, selector: Selector, *, reason: str, by: str, dry_run: bool = False
) -> RedactionReport:
    """Redact the events ``selector`` chooses (see the module); ``dry_run`` only lists them.

    Raises InvalidInput for an empty reason or who (nothing written)."""
    for name, value in (("reason", reason), ("by", by)):
        check_text(value, name)
        if not value.strip():
            raise InvalidInput(name, "must say something: a redaction records who removed what, and why")
    with Ledger.open(checkpoint_dir, create=False) as ledger, ledger._locked():
        report = RedactionReport([], selector.describe(), bytes_before=ledger._head.end)
        if dry_run:
            report.chosen = [e for e in ledger.events() if selector.matches(e)]
            return report
        report.event, report.bytes_after = _rewrite(ledger, selector, reason, by, report.chosen)
        if report.event is not None:
            needles = [s.encode() for e in report.chosen for s in strings_of(e.body) if len(s) >= 4]
            report.removed_files = _scrub_aside(ledger.path, needles, selector)
    return report


def _rewrite(ledger: Ledger, selector: Selector, reason: str, by: str, chosen: list[Event]) -> tuple[Event | None, int]:
    """Under the lock, in one pass over the log: write the redacted log beside the old one
    (``chosen`` filled as it goes) and rename it over it; (None, 0) when nothing matched."""
    path = ledger.path
    tmp = path.with_name(path.name + REDACT_TMP_SUFFIX)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # whoever opens the new log once it is renamed waits for the index and head
    try:
        with ledger._file.reader() as f, open(fd, "wb", closefd=False) as out:
            records: list[dict[str, Any]] = []
            index = _write_redacted(ledger, f, out, selector, chosen, records)
            if not chosen:
                tmp.unlink()
                return None, 0
            event = _append_redaction(ledger, out, index, records, reason, by, selector.describe())
            size = out.tell()
        os.fsync(fd)
        os.replace(tmp, path)
        fsync_dir(path.parent)
        try:
            ledger._file.write_index(index)
        except OSError as exc:  # derived: a stale index is found out and rebuilt by the next open
            log.warning("could not rewrite %s after the redaction (%s)", ledger._file.idx_path, exc)
        ledger._head_file.write(event.ckpt, event.seq, event.hash, both=True)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)  # releases the new file's lock
    return event, size


def _write_redacted(
    ledger: Ledger, f: BinaryIO, out: BinaryIO, selector: Selector, chosen: list[Event], records: list[dict[str, Any]]
) -> list[tuple[int, int]]:
    """Every member of the log into ``out``: byte for byte, or rebuilt with the chosen events'
    stubs (``chosen`` and their ``records`` filled as it goes); returns the new side index."""
    index: list[tuple[int, int]] = []
    for member, events in walk(ledger, f, 0, seq=1, prev=""):
        offset = out.tell()
        if events and (not index or offset - index[-1][0] >= IDX_STRIDE):
            index.append((offset, events[0].seq))
        mine = [selector.matches(e) for e in events]
        if not any(mine):
            out.write(_raw(f, member.offset, member.end))  # untouched members stay byte for byte
            continue
        lines = []
        for event, line, redacted in zip(events, member.data.split(b"\n")[:-1], mine, strict=True):
            line += b"\n"
            if redacted:
                stub = stub_line(line)
                chosen.append(event)
                records.append(_record(event, line, stub))
                line = stub
            lines.append(line)
        out.write(compress_member(b"".join(lines), single_event=len(lines) == 1))
    return index


def _append_redaction(
    ledger: Ledger,
    out: BinaryIO,
    index: list[tuple[int, int]],
    redacted: list[dict[str, Any]],
    reason: str,
    by: str,
    selector: str,
) -> Event:
    """The events_redacted event, signed after the log's last event, as the new log's last member."""
    body = validate_body(
        EventsRedacted.type_name, {"reason": reason, "by": by, "selector": selector, "redacted": redacted}
    )
    event, line = ledger._sign(ledger._head.seq + 1, ledger._head.hash, CHECKPOINT_NODE, EventsRedacted.type_name, body)
    offset = out.tell()
    if not index or offset - index[-1][0] >= IDX_STRIDE:
        index.append((offset, event.seq))
    out.write(compress_member(line, single_event=True))
    out.flush()
    return event


def _record(event: Event, line: bytes, stub: bytes) -> dict[str, Any]:
    """What the redaction event says of one removed body (``events.Redacted``), from the stored
    line and its stub."""
    metadata = event.body.get("metadata")
    kind = metadata.get("type") if isinstance(metadata, dict) else None
    record: dict[str, Any] = msgspec.to_builtins(
        Redacted(
            seq=event.seq,
            id=event.id,
            hash=event.hash,
            node=event.node,
            type=event.type,
            digest=body_digest(unhashed_bytes(line)),
            stub=hashlib.sha256(canonical(upcast(decode_line(stub[:-1])))).hexdigest(),  # as verify reads it
            kind=kind if isinstance(kind, str) else "",
        )
    )
    return record


def _raw(f: Any, start: int, end: int) -> bytes:
    here = f.tell()
    f.seek(start)
    data = f.read(end - start)
    f.seek(here)
    return bytes(data)


def _scrub_aside(path: Path, needles: list[bytes], selector: Selector) -> list[str]:
    """Delete the files set aside beside the log that hold any removed text or, for a text
    match, the text itself (raw, or inside the gzip members they hold, complete or cut short:
    a torn tail may hold an event that never reached the log); return their names."""
    removed = []
    for other in sorted(path.parent.glob(path.name + ".*")):
        if any(other.name == path.name + keep for keep in _KEEP) or not other.is_file():
            continue
        raw = other.read_bytes()
        both = raw + b"\n" + _inflate(raw)
        if any(n in both for n in needles) or selector.found_in(both):
            other.unlink()
            removed.append(other.name)
    if removed:
        fsync_dir(path.parent)
    return removed


def _inflate(raw: bytes) -> bytes:
    """Whatever the gzip members in ``raw`` decompress to, a member cut short included."""
    out, pos = [], 0
    while pos < len(raw):
        at = raw.find(b"\x1f\x8b\x08", pos)
        if at < 0:
            break
        d = zlib.decompressobj(31)
        with contextlib.suppress(zlib.error):
            out.append(d.decompress(raw[at:]))
        pos = at + 1 if not d.eof else len(raw) - len(d.unused_data)
    return b"".join(out)
