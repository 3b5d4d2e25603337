"""The hash chain: canonical bytes, event hashes, and checking one event against the last.

The canonical encoding of an event is its JSON object without ``hash``: envelope fields
in their fixed order, object keys inside ``body`` sorted, no whitespace, UTF-8. A stored
line is that encoding with ``,"hash":"<sha256 hex>"`` spliced in before the closing
brace.

What the hash covers depends on the event's schema version. Up to version 2 it is the
canonical encoding itself: drop the last 75 bytes of the line (``,"hash":"`` + 64 hex +
``"}``), put back ``}``, and sha256 it. From version 3 it is the **seal**: the canonical
encoding with the body replaced by ``{"sha256":"<sha256 hex of the body's bytes>"}``. An
event commits to its body only through that digest, so a body can be removed (a redaction,
``ledger.maintenance.redact``) by storing the seal itself as the line: the event's hash still checks,
the chain still links, and the removed body is provably the one written. A version-2 event
has no seal; its stub is checked against the redaction event that removed it.
"""

from __future__ import annotations

import hashlib
from itertools import repeat

import msgspec

from .errors import decoded_reason
from .events import Event, UnsignedEvent, is_stub_body

_encoder = msgspec.json.Encoder(order="deterministic")
_decoder: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event)
_decode = _decoder.decode
_sha256 = hashlib.sha256
_HASH_KEY = b',"hash":"'

HASH_SUFFIX_LEN = len(b',"hash":""}') + 64  # 75 bytes at the end of every line
_LINE_END = b'"}'
_EMPTY_SHA256 = hashlib.sha256()  # copied for each line: cheaper than a new hash object


SEALED_SINCE = 3  # the first schema version whose hash covers the seal, not the body
_BODY_KEY = b',"body":'
_PREV_EMPTY = b',"prev":""'
_PREV_EMPTY_LEN = len(_PREV_EMPTY)  # 10; with a 64-hex prev the tail is 74 bytes
_PREV_KEY = b',"prev":"'
_STUB_START = b'{"sha256":"'
_STUB_LEN = len(_STUB_START) + 64 + 2  # {"sha256":"<64 hex>"}


def _span(data: bytes, end: int) -> tuple[int, int]:
    """(start, stop) of the body's bytes in the canonical encoding ``data[:end] + b"}"``.

    The body follows the envelope's string fields (``"``, escaped inside a JSON string, cannot
    open ``,"body":`` there) and ends where ``,"prev":"…"`` (an empty or a 64-hex hash) starts."""
    start = data.find(_BODY_KEY, 0, end) + len(_BODY_KEY)
    stop = end - (_PREV_EMPTY_LEN if data.startswith(_PREV_EMPTY, end - _PREV_EMPTY_LEN) else _PREV_EMPTY_LEN + 64)
    if start < len(_BODY_KEY) or stop <= start or not data.startswith(_PREV_KEY, stop):
        raise ChainError("not an event's canonical encoding (no body, or prev is not where it belongs)")
    return start, stop


def body_span(unhashed: bytes) -> tuple[int, int]:
    """(start, end) of the body's bytes in an event's canonical encoding (hash field left out)."""
    return _span(unhashed, len(unhashed) - 1)


def body_digest(unhashed: bytes) -> str:
    """The sha256 hex of the body's bytes in an event's canonical encoding."""
    start, end = body_span(unhashed)
    return _sha256(memoryview(unhashed)[start:end]).hexdigest()


def seal(unhashed: bytes) -> bytes:
    """The canonical encoding with its body replaced by the body's digest: what a version-3
    event's hash covers, and the line a redaction leaves in its place."""
    start, end = body_span(unhashed)
    return b"".join((unhashed[:start], _STUB_START, body_digest(unhashed).encode(), b'"}', unhashed[end:]))


def stub_line(line: bytes) -> bytes:
    """The line a redaction leaves for a stored ``line`` (newline included): its seal, with the
    event's hash unchanged, so the chain still links through it."""
    return seal(unhashed_bytes(line))[:-1] + line[-HASH_SUFFIX_LEN - 1 :]


def unhashed_bytes(line: bytes) -> bytes:
    """A stored line (newline included) without its hash field: the canonical encoding."""
    return line[: -HASH_SUFFIX_LEN - 1] + b"}"


def canonical(event: Event) -> bytes:
    """An event's canonical encoding (its stored line without hash and newline)."""
    u = event
    return _encoder.encode(UnsignedEvent(u.v, u.seq, u.id, u.ts, u.ckpt, u.node, u.type, u.body, u.prev))


def event_hash(v: int, data: bytes, end: int) -> str:
    """The hash of a version-``v`` event whose canonical encoding is ``data[:end] + b"}"`` (a
    stored line with ``end`` at its hash field, or the encoding itself less its last byte),
    hashed in place: up to version 2 those bytes, from version 3 their seal. A stub (the body
    already a seal) is its own seal. On every line a scan reads: :func:`_span` is inlined."""
    if v >= SEALED_SINCE:
        start = data.find(_BODY_KEY, 0, end) + 8
        stop = end - 10 if data.startswith(_PREV_EMPTY, end - 10) else end - 74
        if start < 8 or stop <= start or not data.startswith(_PREV_KEY, stop):
            raise ChainError("not an event's canonical encoding (no body, or prev is not where it belongs)")
        if stop - start != _STUB_LEN or not data.startswith(_STUB_START, start):
            body = _EMPTY_SHA256.copy()
            body.update(data[start:stop])
            digest = _EMPTY_SHA256.copy()  # the seal in one buffer: one update, not four
            digest.update(b"".join((data[:start], _STUB_START, body.hexdigest().encode(), b'"}', data[stop:end], b"}")))
            return digest.hexdigest()
    digest = _EMPTY_SHA256.copy()
    digest.update(data[:end])
    digest.update(b"}")
    return digest.hexdigest()


def is_v2_stub(event: Event) -> bool:
    """A stub of an event written before version 3: its hash covers the removed body, so it
    cannot check itself; the redaction event that removed it vouches for it (ledger.verify)."""
    return event.v < SEALED_SINCE and is_stub_body(event.body)


def sign(unsigned: UnsignedEvent) -> tuple[Event, bytes]:
    """Hash an event; return it with its log line (newline included)."""
    canonical = _encoder.encode(unsigned)
    digest = event_hash(unsigned.v, canonical, len(canonical) - 1)
    line = canonical[:-1] + b',"hash":"' + digest.encode() + b'"}\n'
    u = unsigned
    return Event(u.v, u.seq, u.id, u.ts, u.ckpt, u.node, u.type, u.body, u.prev, digest), line


class ChainError(ValueError):
    """One line that does not fit the chain; the log reader adds seq and offset."""


def _decode_reason(line: bytes, exc: msgspec.DecodeError) -> str:
    """Why a line is no event, in the log's words: a field and what it holds, or what the
    line looks like instead (a line of ARI's memory backup has a kind and no seq)."""
    if b'"kind"' in line and b'"seq"' not in line:
        return "it is a line of ARI's memory backup, not a ledger event: was a backup written over the log?"
    reason, _, where = str(exc).partition(" - at `$")
    where = where.rstrip("`").lstrip(".")
    return f"field {where}: {decoded_reason(reason)}" if where else decoded_reason(reason)


def decode_line(line: bytes) -> Event:
    """Decode one stored line (without its newline) and check its own hash."""
    try:
        event = _decode(line)
    except msgspec.DecodeError as exc:
        raise ChainError(f"not a valid event line ({_decode_reason(line, exc)})") from None
    if line[-HASH_SUFFIX_LEN:-66] != _HASH_KEY or line[-2:] != b'"}':
        raise ChainError("the hash is not the last field of the line")
    if is_v2_stub(event):
        return event  # its redaction event vouches for it (ledger.verify)
    if event_hash(event.v, line, len(line) - HASH_SUFFIX_LEN) != event.hash:
        raise ChainError("hash does not match the event's bytes (edited or damaged)")
    return event


def decode_lines(data: bytes, seq: int | None, prev: str | None, ckpt: str | None) -> list[Event] | None:
    """Every line of ``data`` (newline-terminated lines) decoded, with each line's own hash and
    each link checked, in bulk; None when any check fails.

    The checks are exactly those of :func:`decode_line` and :func:`check_link` applied line
    after line (``seq``/``prev`` None: accept the first event's; ``ckpt`` None: the first
    event's, then every event's must match), done a whole member at a time so that the only
    per-line Python work is the hash. On None (and for a member holding a version-2 stub, which
    only the per-line check accepts), run the per-line functions to name the line.
    """
    lines = data.split(b"\n")
    if lines.pop():
        return None  # the last line has no newline
    if not lines:
        return []
    try:
        events = list(map(_decode, lines))
    except msgspec.DecodeError:
        return None
    digests: list[str] = []
    add = digests.append
    try:
        for event, line in zip(events, lines):
            add(event_hash(event.v, line, len(line) - HASH_SUFFIX_LEN))
    except ChainError:
        return None
    n = len(lines)
    first = events[0]
    seq = first.seq if seq is None else seq
    prev = first.prev if prev is None else prev
    ckpt = first.ckpt if ckpt is None else ckpt
    if (
        [e.hash for e in events] != digests
        or [e.prev for e in events] != [prev, *digests[:-1]]
        or [e.seq for e in events] != list(range(seq, seq + n))
        or {e.ckpt for e in events} != {ckpt}
        or not all(map(bytes.endswith, lines, repeat(_LINE_END, n)))
        or not all(map(bytes.startswith, lines, repeat(_HASH_KEY, n), repeat(-HASH_SUFFIX_LEN, n)))
    ):
        return None
    return events


def check_link(event: Event, expected_seq: int, prev_hash: str, ckpt: str | None) -> None:
    """Raise ChainError unless ``event`` is the next link after ``prev_hash``."""
    if event.seq != expected_seq:
        raise ChainError(f"expected seq {expected_seq}, found seq {event.seq} (missing, repeated or reordered event)")
    if event.prev != prev_hash:
        raise ChainError("prev does not match the previous event's hash (missing, reordered or edited event)")
    if ckpt is not None and event.ckpt != ckpt:
        raise ChainError(f"checkpoint id {event.ckpt!r} differs from the log's {ckpt!r}")
