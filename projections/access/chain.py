"""The access log's chain: each line commits to the one before it, like the ledger's events.

A chained line is ARI's JSON object with three keys of this library at its end::

    {…ARI's fields…, "n": 7, "prev": "<hash of line 6>", "hash": "<sha256 of the line without it>"}

``hash`` is the sha256 of the line's own bytes up to ``"hash"`` (the object closed there),
so a check needs no re-encoding; ``prev`` is the hash of the line before (a chained line's
``hash``, else the sha256 of its bytes: lines from before chaining began, or from a writer
that does not chain, are committed to as they are). ``n`` counts the chain from 1, so a cut
head shows as a first line with ``n`` > 1 and a cut tail against the head file.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

GENESIS = "0" * 64
_HASHED = re.compile(rb',"hash":"([0-9a-f]{64})"\}$')
_LINK = re.compile(rb',"n":(\d+),"prev":"([0-9a-f]{64})"$')


@dataclass(frozen=True)
class Link:
    """What one line of the access log says about the chain."""

    hash: str  # the hash the next line must name as prev
    n: int | None  # its place in the chain (None: not chained)
    prev: str | None
    intact: bool  # a chained line whose hash matches its bytes (unchained lines: True)


def chain_onto(encoded: bytes, n: int, prev: str) -> tuple[bytes, str]:
    """A JSON object's bytes (``{…}``) chained onto the line whose hash is ``prev``, as line ``n``
    of the chain (no newline), and its hash."""
    body = encoded[:-1] + b',"n":%d,"prev":"%s"' % (n, prev.encode())
    digest = hashlib.sha256(body + b"}").hexdigest()
    return body + b',"hash":"' + digest.encode() + b'"}', digest


def link(line: bytes) -> Link:
    """Read one line (without its newline) as a link of the chain."""
    hashed = _HASHED.search(line)
    if hashed is None:
        return Link(hashlib.sha256(line).hexdigest(), None, None, True)
    body = line[: hashed.start()]
    recorded = hashed.group(1).decode()
    chained = _LINK.search(body)
    intact = hashlib.sha256(body + b"}").hexdigest() == recorded
    if chained is None:
        return Link(recorded, None, None, False)
    return Link(recorded, int(chained.group(1)), chained.group(2).decode(), intact)


def last_line(data: bytes) -> bytes | None:
    """The last complete line of ``data`` (the tail of a file), or None when ``data`` holds
    no line break before its last line: the caller reads further back."""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    start = data.rfind(b"\n", 0, end)
    return data[start + 1 : end] if start >= 0 else None


def unchained(line: bytes) -> bytes | None:
    """A chained line without its chain keys (the JSON object ARI's fields make), or None."""
    hashed = _HASHED.search(line)
    chained = _LINK.search(line, 0, hashed.start()) if hashed else None
    return line[: chained.start()] + b"}" if hashed and chained else None


def rechain(lines: list[bytes], running: str | None) -> tuple[list[bytes], str | None]:
    """Lines (no newlines) with every chained one chained again onto the line before it: after
    some lines were rewritten (a redaction), the chain holds again from the first change on.
    ``running`` is the hash of the line before the first (None: keep the first line's prev)."""
    out = []
    for line in lines:
        body = unchained(line)
        old = link(line)
        if body is None or old.n is None:
            out.append(line)
            running = old.hash
            continue
        new, running = chain_onto(body, old.n, running if running is not None else old.prev or GENESIS)
        out.append(new)
    return out, running
