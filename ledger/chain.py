"""The hash chain: canonical bytes, event hashes, and checking one event against the last.

The canonical encoding of an event is its JSON object without ``hash``: envelope fields
in their fixed order, object keys inside ``body`` sorted, no whitespace, UTF-8. A stored
line is that encoding with ``,"hash":"<sha256 hex>"`` spliced in before the closing
brace, so anyone can check a line with plain bytes: drop the last 75 bytes of the line
(``,"hash":"`` + 64 hex + ``"}``), put back ``}``, and sha256 it.
"""

from __future__ import annotations

import hashlib
from itertools import repeat

import msgspec

from .events import Event, UnsignedEvent

_encoder = msgspec.json.Encoder(order="deterministic")
_decoder: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event)
_decode = _decoder.decode
_sha256 = hashlib.sha256
_HASH_KEY = b',"hash":"'

HASH_SUFFIX_LEN = len(b',"hash":""}') + 64  # 75 bytes at the end of every line
_LINE_END = b'"}'
_EMPTY_SHA256 = hashlib.sha256()  # copied for each line: cheaper than a new hash object


def sign(unsigned: UnsignedEvent) -> tuple[Event, bytes]:
    """Hash an event; return it with its log line (newline included)."""
    canonical = _encoder.encode(unsigned)
    digest = hashlib.sha256(canonical).hexdigest()
    line = canonical[:-1] + b',"hash":"' + digest.encode() + b'"}\n'
    u = unsigned
    return Event(u.v, u.seq, u.id, u.ts, u.ckpt, u.node, u.type, u.body, u.prev, digest), line


class ChainError(ValueError):
    """One line that does not fit the chain; the log reader adds seq and offset."""


def decode_line(line: bytes) -> Event:
    """Decode one stored line (without its newline) and check its own hash."""
    try:
        event = _decode(line)
    except msgspec.DecodeError as exc:
        raise ChainError(f"not a valid event line ({exc})") from None
    if line[-HASH_SUFFIX_LEN:-66] != _HASH_KEY or line[-2:] != b'"}':
        raise ChainError("the hash is not the last field of the line")
    digest = _sha256(memoryview(line)[:-HASH_SUFFIX_LEN])
    digest.update(b"}")
    if digest.hexdigest() != event.hash:
        raise ChainError("hash does not match the event's bytes (edited or damaged)")
    return event


def decode_lines(data: bytes, seq: int | None, prev: str | None, ckpt: str | None) -> list[Event] | None:
    """Every line of ``data`` (newline-terminated lines) decoded, with each line's own hash and
    each link checked, in bulk; None when any check fails.

    The checks are exactly those of :func:`decode_line` and :func:`check_link` applied line
    after line (``seq``/``prev`` None: accept the first event's; ``ckpt`` None: the first
    event's, then every event's must match), done a whole member at a time so that the only
    per-line Python work is the hash. On None, run the per-line functions to name the line.
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
    for line in lines:
        digest = _EMPTY_SHA256.copy()
        digest.update(line[:-HASH_SUFFIX_LEN])
        digest.update(b"}")
        add(digest.hexdigest())
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
