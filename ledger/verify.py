"""Verify: check a whole log from byte 0, its side index and its anchors, and report.

``ari-ledger verify``, export and repair ask it what the log holds. It reads without the lock
and recovers nothing: a torn tail or damage is reported, not moved aside, and a member a
writer is still appending ends what was verified (the next verify reads it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from .anchor import Anchor, AnchorUnreadable, anchor_problem
from .chain import canonical
from .errors import LogCorrupted
from .events import Event, EventsRedacted, is_stub_body
from .log import BadMember, IndexCheck, index_shape_problem
from .progress import Progress
from .recovery import IN_FLIGHT, OpenLog, walk, why_not_torn


@dataclass(frozen=True)
class VerifyReport:
    """Result of checking every member, line, hash and link of the log, and its anchors.

    ``ok`` is the log's own state: chain intact and every anchor an event of it. ``rollback``
    lists anchors the log does not hold (acknowledged events missing); ``problems`` lists
    what is wrong beside the log (the side index, an unreadable head file); ``found`` maps
    each ``verify --head`` hash to its seq.
    """

    ok: bool
    events: int
    last_seq: int
    file_size: int
    first_bad_seq: int | None = None
    offset: int | None = None
    reason: str | None = None
    torn_tail: bool = False
    rollback: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    found: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        if self.reason is not None:
            what = "torn tail" if self.torn_tail else "damaged"
            return f"{what}: first bad seq {self.first_bad_seq} at byte offset {self.offset}: {self.reason}"
        if self.rollback:
            return f"rolled back: {self.rollback[0]}"
        return f"ok: {self.events} events, chain intact, last seq {self.last_seq}"


def verify(ledger: OpenLog, anchors: Iterable[Anchor] = (), progress: Progress | None = None) -> VerifyReport:
    """Check the whole log from byte 0 (gzip members, lines, hashes, links, ckpt), the side
    index against the members, and that the head file's anchor and ``anchors`` are events
    of this chain. Read-only: no lock, no recovery. ``progress(events checked, events the
    open found)`` after each member."""
    anchors = list(anchors)
    problems: list[str] = []
    try:
        head = ledger.head_file.read()
    except AnchorUnreadable as exc:
        head = None
        problems.append(f"{exc}: a rollback of the newest events cannot be detected by it")
    if head is not None:
        anchors.insert(0, head)
    if head is not None and ledger.head_file.damaged_slot:
        problems.append(
            f"{ledger.head_file.source}: one of its two records is damaged; the other (seq {head.seq}) is used"
        )
    want_seq = {a.seq for a in anchors if a.seq is not None}
    heads = [a.hash for a in anchors if a.seq is None]
    at_seq: dict[int, str] = {}
    found: dict[str, int] = {}
    index = ledger.file.read_index()
    size = ledger.file.size()
    shape = index_shape_problem(index, size)
    check = IndexCheck([] if shape else index)
    events, ckpt, end = 0, None, 0
    redactions = Redactions()
    with ledger.file.reader() as f:
        try:
            for member, batch in walk(ledger, f, 0, seq=1, prev=""):
                redactions.see(batch)
                if batch:
                    first = batch[0].seq  # seqs run on without a gap inside a checked member
                    check.member(member.offset, first)
                    ckpt = ckpt or batch[0].ckpt
                    at_seq.update((s, batch[s - first].hash) for s in want_seq if first <= s < first + len(batch))
                for h in heads:
                    found.update((h, event.seq) for event in batch if event.hash.startswith(h))
                events += len(batch)
                end = member.end
                if progress is not None:
                    progress(events, max(events, ledger.state.head.seq))
        except LogCorrupted as exc:
            return VerifyReport(False, events, events, size, exc.seq, exc.offset, str(exc))
        except BadMember as bad:
            why = why_not_torn(ledger, f, bad, events, locked=False)
            if why != IN_FLIGHT:  # (else: the log verified so far ends where a writer is appending)
                reason = bad.reason if why is None else f"{bad.reason}; {why}"
                return VerifyReport(False, events, events, size, events + 1, bad.offset, reason, torn_tail=why is None)
    unaccounted = redactions.problem()
    if unaccounted:
        seq, reason = unaccounted
        return VerifyReport(False, events, events, size, seq, None, reason)
    index_problem = shape or check.finish(end)
    if index_problem:
        problems.append(
            f"side index {ledger.file.idx_path.name}: {index_problem} (derived data: reads that reach a wrong "
            "record fall back to the log; delete the file and the next writable open rebuilds it)"
        )
    rollback = [p for a in anchors if a.seq is not None and (p := anchor_problem(a, ckpt, events, at_seq.get))]
    rollback += [
        f"{h[:12]}… (--head) is not the hash of any event of this log (last seq {events}): "
        "the log was cut back, rewritten, or is another log"
        for h in heads
        if h not in found
    ]
    return VerifyReport(
        not rollback, events, events, size, rollback=tuple(rollback), problems=tuple(problems), found=found
    )


class Redactions:
    """Every removed body accounted for: each stub (an event whose body is only its digest) is
    named by a later ``events_redacted`` event with its hash, the digest of the removed body and
    the digest of the stub itself (which is what vouches for a version-2 stub, whose hash covers
    the body that is gone), and every event a redaction names is such a stub."""

    def __init__(self) -> None:
        self.stubs: dict[int, Event] = {}
        self.covered: set[int] = set()
        self.wrong: tuple[int, str] | None = None

    def see(self, batch: list[Event]) -> None:
        for event in batch:
            if is_stub_body(event.body):
                self.stubs[event.seq] = event
            elif event.type == EventsRedacted.type_name and self.wrong is None:
                self._check(event)

    def _check(self, redaction: Event) -> None:
        for r in redaction.body.get("redacted", ()):
            stub = self.stubs.get(r["seq"])
            if stub is None:
                why = "is not a stub before it"
            elif (stub.id, stub.hash, stub.body["sha256"]) != (r["id"], r["hash"], r["digest"]):
                why = "does not match the stub there (id, hash or digest)"
            elif hashlib.sha256(canonical(stub)).hexdigest() != r["stub"]:
                why = "names a stub whose bytes changed since the redaction"
            else:
                self.covered.add(r["seq"])
                continue
            self.wrong = (redaction.seq, f"the redaction at seq {redaction.seq} names seq {r['seq']}, which {why}")
            return

    def problem(self) -> tuple[int, str] | None:
        """(seq, why) of the first removed body not accounted for, or None."""
        if self.wrong is not None:
            return self.wrong
        loose = sorted(set(self.stubs) - self.covered)
        if loose:
            return loose[0], f"seq {loose[0]}'s body was removed but no redaction event records it (edited log)"
        return None
