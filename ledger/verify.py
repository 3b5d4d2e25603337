"""Verify: check a whole log from byte 0, its side index and its anchors, and report.

``ari-ledger verify``, export and repair ask it what the log holds. It reads without the lock
and recovers nothing: a torn tail or damage is reported, not moved aside, and a member a
writer is still appending ends what was verified (the next verify reads it).

It runs in one process unless its caller asks for more: a library call may be made in a
process with threads (ARI's MCP server), which a fork must not copy. Only the commands a
person runs (``ari-ledger verify``, ``prove``) ask for ``parallel="auto"``.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import gc
import hashlib
import mmap
import os
import pickle
import select
import signal
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, Generic, Literal, Protocol, TypeVar, cast

from .anchor import Anchor, AnchorUnreadable, anchor_problem
from .chain import canonical
from .errors import LogCorrupted
from .events import Event, EventsRedacted, is_stub_body
from .log import BadMember, IndexCheck, Member, index_shape_problem
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
            where = f"first bad seq {self.first_bad_seq} at byte offset {self.offset}"
            reason = self.reason.removeprefix(f"seq {self.first_bad_seq} at byte offset {self.offset}: ")
            return f"{what}: {where}: {reason}"
        if self.rollback:
            return f"rolled back: {self.rollback[0]}"
        return f"ok: {self.events:,} events, chain intact, last seq {self.last_seq}"  # a seq as typed back


PARALLEL_FROM = 4 << 20  # bytes of log from which "auto" shares it with a second process (fork: milliseconds)
PIECES = 64  # a split log's pieces, taken from either end by the two processes (a piece of 1M events: ~0.2 s)
MAX_PIECES = 250  # (each process's claim is one byte)
POLL_S = 0.25  # how often progress is reported while waiting for the second process

Parallel = bool | Literal["auto"]


def verify(
    ledger: OpenLog, anchors: Iterable[Anchor] = (), progress: Progress | None = None, *, parallel: Parallel = False
) -> VerifyReport:
    """Check the whole log from byte 0 (gzip members, lines, hashes, links, ckpt), the side
    index against the members, and that the head file's anchor and ``anchors`` are events
    of this chain. Read-only: no lock, no recovery. ``progress(events checked, events the
    open found)`` after each member.

    ``parallel`` (False, the default: this process only, never a fork; "auto": when the log
    is large, more than one CPU is free to this process and it runs no other thread; True:
    whenever the side index offers a member to split at and it runs no other thread): the log
    is cut at side index records into up to :data:`PIECES` pieces, which a forked process
    checks from the last one back while this one checks them from the first, until the two
    meet (so both end together, whatever else either has to do), and each piece's first event
    must link to the last event of the piece before. Anything unusual in any piece (damage, a
    torn tail, a record that is not a member's start) is reported by checking the whole log
    again in this process, so every report is the one-process one."""
    return LogCheck(ledger, anchors, progress, parallel=parallel).run()[0]


class Ride(Protocol):
    """Work that rides along a verify's read of the log (``ari-ledger verify`` compares the
    snapshot so, instead of reading the log a second time): it sees the events of each member
    the process it runs in checked, in order, and what it found (``outcome``, picklable) is
    sent back from a second process."""

    def see(self, batch: list[Event]) -> None: ...

    def outcome(self) -> object: ...


Riding = Callable[[], Ride]  # makes a ride, in the process that reads the events it sees


class LogCheck:
    """One :func:`verify`, begun: the head file read and, when the log is split, a forked process
    already checking its pieces from the end (started here, so that it runs while this process
    does other work before :meth:`run`, which then takes pieces from the start until the two
    meet). ``riding`` makes the ride of each piece (or of the whole log, read in one process)."""

    def __init__(
        self,
        ledger: OpenLog,
        anchors: Iterable[Anchor] = (),
        progress: Progress | None = None,
        *,
        parallel: Parallel = False,
        riding: Riding | None = None,
    ) -> None:
        self.ledger, self.progress, self.riding = ledger, progress, riding
        self.anchors = list(anchors)
        self.problems: list[str] = []
        try:
            head = ledger.head_file.read()
        except AnchorUnreadable as exc:
            head = None
            self.problems.append(f"{exc}: a rollback of the newest events cannot be detected by it")
        if head is not None:
            self.anchors.insert(0, head)
        if head is not None and ledger.head_file.damaged_slot:
            self.problems.append(
                f"{ledger.head_file.source}: one of its two records is damaged; the other (seq {head.seq}) is used"
            )
        self.want_seq = {a.seq for a in self.anchors if a.seq is not None}
        self.heads = [a.hash for a in self.anchors if a.seq is None]
        index = ledger.file.read_index()
        self.size = ledger.file.size()
        self.shape = index_shape_problem(index, self.size)
        self.records = [] if self.shape else index
        # where each piece of a split log starts (offset, first seq; [] when it is not split)
        self.pieces = _pieces(self.records, self.size) if _may_split(parallel, self.size) else []
        self._second = self._start() if self.pieces else None
        if progress is not None:  # the work began: a bar's wait counts from here, not from the first piece
            progress(0, ledger.state.head.seq)

    def _start(self) -> _Second | None:
        plan, meet, ledger = (
            _Plan(self.pieces, self.records, self.want_seq, self.heads, self.riding),
            _Meet(len(self.pieces)),
            self.ledger,
        )
        try:
            work = Beside(lambda report: _from_the_end(ledger, plan, meet, report))
        except OSError:
            self.pieces = []  # no process to spare (fork refused): one process checks it all
            return None
        return _Second(meet, work)

    def run(self, riding: Riding | None = None) -> tuple[VerifyReport, list[object]]:
        """The report, and the outcome of each ride (``riding`` makes this process's), in log
        order: one per piece, or one for the whole log read in one process (none when the log
        is damaged)."""
        try:
            tally = _verify_pieces(self, self._second, riding) if self._second is not None else None
        finally:
            self.cancel()  # before the whole log is read again here, if it must be
            self._second = None
        if tally is None:
            found = _verify_serial(self, riding() if riding is not None else None)
            if isinstance(found, VerifyReport):
                return found, []
            tally = found
        return self._report(tally), tally.outcomes

    def cancel(self) -> None:
        """Stop the second process if it still runs (idempotent)."""
        if self._second is not None:
            self._second.beside.cancel()

    def _report(self, tally: _Tally[IndexCheck, Redactions]) -> VerifyReport:
        events, found, size = tally.events, tally.found, self.size
        unaccounted = tally.redactions.problem()
        if unaccounted:
            seq, reason = unaccounted
            return VerifyReport(False, events, events, size, seq, None, reason)
        problems = list(self.problems)
        index_problem = self.shape or tally.check.finish(tally.end)
        if index_problem:
            problems.append(
                f"side index {self.ledger.file.idx_path.name}: {index_problem} (derived data: reads that reach a "
                "wrong record fall back to the log; delete the file and the next writable open rebuilds it)"
            )
        rollback = [
            p
            for a in self.anchors
            if a.seq is not None and (p := anchor_problem(a, tally.ckpt, events, tally.at_seq.get))
        ]
        rollback += [
            f"{h[:12]}… (--head) is not the hash of any event of this log (last seq {events}): "
            "the log was cut back, rewritten, or is another log"
            for h in self.heads
            if h not in found
        ]
        return VerifyReport(
            not rollback, events, events, size, rollback=tuple(rollback), problems=tuple(problems), found=found
        )


@dataclass(frozen=True)
class _Second:
    """The second process, and where the two processes' claims on the pieces meet."""

    meet: _Meet
    beside: Beside[dict[int, _Piece] | None]


class _Meet:
    """Two processes taking a log's pieces from either end: this one from the first, the second
    from the last, until they meet. Each writes its claim (one byte each, in memory shared
    across the fork: a byte is never read half written) before it reads the other's, and gives
    way only to a claim past its own: this process at piece ``i`` once the other claimed one
    before ``i`` (so it checked ``i`` already), the other at ``j`` once this one claimed ``j``
    or later. A late read of the other's byte sees an older, farther claim, so at worst both
    check one piece (either result is the same); no piece is left to neither."""

    def __init__(self, pieces: int) -> None:
        if pieces > MAX_PIECES:
            raise ValueError(f"at most {MAX_PIECES} pieces, not {pieces}")
        self._claims = mmap.mmap(-1, 2)  # [this process's claim + 1, the other's claim + 1]
        self._claims[1] = pieces + 1

    def claim(self, last: bool, piece: int) -> None:
        """Write a claim: this process's (``last`` False) or the second process's (True)."""
        self._claims[last] = piece + 1

    def may_check(self, last: bool, piece: int) -> bool:
        """After :meth:`claim`: whether the claimed piece is still this side's to check."""
        other = self._claims[not last] - 1
        return other < piece if last else other >= piece

    def first_claims(self, i: int) -> bool:
        """This process claims piece ``i`` (``i`` = the count: it has none left): may it check it?"""
        self.claim(False, i)
        return self.may_check(False, i)

    def last_claims(self, j: int) -> bool:
        """The second process claims piece ``j`` (-1: it checked the first): may it check it?"""
        self.claim(True, j)
        return self.may_check(True, j)


class _Members(Protocol):
    def member(self, offset: int, first_seq: int) -> None: ...


class _Stubs(Protocol):
    def see(self, batch: list[Event]) -> None: ...


M = TypeVar("M", bound=_Members)
S = TypeVar("S", bound=_Stubs)


class _Tally(Generic[M, S]):
    """What a scan of members found, member by member: events, the checkpoint id, the last
    member's end and event hash, the anchors' seqs and ``--head`` hashes met, and what the
    side index (``check``) and the redactions (``redactions``) need to see."""

    def __init__(self, check: M, redactions: S, want_seq: set[int], heads: list[str], ride: Ride | None) -> None:
        self.check, self.redactions, self.ride = check, redactions, ride
        self.want_seq, self.heads = want_seq, heads
        self.events, self.end = 0, 0
        self.ckpt: str | None = None
        self.first: tuple[int, str, str] | None = None  # (seq, prev, ckpt) of the first event
        self.last_hash = ""
        self.at_seq: dict[int, str] = {}
        self.found: dict[str, int] = {}
        self.outcomes: list[object] = []  # the rides' outcomes, in log order, once they are done

    def add(self, member: Member, batch: list[Event]) -> None:
        self.redactions.see(batch)
        if self.ride is not None:
            self.ride.see(batch)
        if batch:
            first = batch[0].seq  # seqs run on without a gap inside a checked member
            if self.first is None:
                self.first = (first, batch[0].prev, batch[0].ckpt)
            self.check.member(member.offset, first)
            self.ckpt = self.ckpt or batch[0].ckpt
            self.at_seq.update((s, batch[s - first].hash) for s in self.want_seq if first <= s < first + len(batch))
            self.last_hash = batch[-1].hash
        for h in self.heads:
            self.found.update((h, event.seq) for event in batch if event.hash.startswith(h))
        self.events += len(batch)
        self.end = member.end


def _verify_serial(check: LogCheck, ride: Ride | None) -> _Tally[IndexCheck, Redactions] | VerifyReport:
    """Every member from byte 0 in this process: what they hold, or the report of the first
    damage or torn tail."""
    ledger, progress, size = check.ledger, check.progress, check.size
    tally = _Tally(IndexCheck(check.records), Redactions(), check.want_seq, check.heads, ride)
    with ledger.file.reader() as f:
        try:
            for member, batch in walk(ledger, f, 0, seq=1, prev=""):
                tally.add(member, batch)
                if progress is not None:
                    progress(tally.events, max(tally.events, ledger.state.head.seq))
        except LogCorrupted as exc:
            return VerifyReport(False, tally.events, tally.events, size, exc.seq, exc.offset, str(exc))
        except BadMember as bad:
            events = tally.events
            why = why_not_torn(ledger, f, bad, events, locked=False)
            if why != IN_FLIGHT:  # (else: the log verified so far ends where a writer is appending)
                reason = bad.reason if why is None else f"{bad.reason}; {why}"
                return VerifyReport(False, events, events, size, events + 1, bad.offset, reason, torn_tail=why is None)
    tally.outcomes = [ride.outcome()] if ride is not None else []
    return tally


def _may_split(parallel: Parallel, size: int) -> bool:
    """Whether a second process may check pieces of the log: asked for (and :func:`can_fork`), or
    "auto", a large log and :func:`second_cpu`."""
    if parallel == "auto":
        return size >= PARALLEL_FROM and second_cpu()
    return parallel is True and can_fork()


def can_fork() -> bool:
    """Whether this process may run work in a forked child (:class:`Beside`): it has ``fork``
    and runs no other thread (a forked child would inherit the locks they hold)."""
    return hasattr(os, "fork") and threading.active_count() == 1


def second_cpu() -> bool:
    """:func:`can_fork`, and more than one CPU is there for this process to use."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cpus > 1 and can_fork()


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while pieces of a log are checked (only where no
    other thread runs: a split log). What a check makes (events, their bodies, a ride's columns)
    holds no cycle and is freed as it goes; each collection would walk every object alive in
    the process again, ~10-15 % of a large log's check."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _pieces(records: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """Where the pieces of a split log start, (offset, first seq): byte 0 and the side index
    records nearest each :data:`PIECES`-th of the log, each once ([] when the index offers no
    record past the first member). The index is only a hint: each piece must end at the next."""
    later = [r for r in records if r[0] > 0]
    offsets = [offset for offset, _seq in later]
    nearest: set[int] = set()
    for k in range(1, PIECES if later else 0):
        target = k * size / PIECES
        i = bisect.bisect_left(offsets, target)
        nearest.add(min((c for c in (i - 1, i) if 0 <= c < len(offsets)), key=lambda c: abs(offsets[c] - target)))
    return [(0, 1), *(later[i] for i in sorted(nearest))] if later else []


@dataclass(frozen=True)
class _Plan:
    """What either process needs to check pieces of a log: where they start, the side index's
    records, the anchors' seqs and ``--head`` hashes looked for, and what makes a piece's ride."""

    pieces: list[tuple[int, int]]
    records: list[tuple[int, int]]
    want_seq: set[int]
    heads: list[str]
    riding: Riding | None


def _verify_pieces(check: LogCheck, second: _Second, riding: Riding | None) -> _Tally[IndexCheck, Redactions] | None:
    """The pieces from the first on checked here while the forked process checks them from the
    last, until the two meet; joined when every piece ends exactly where the next starts and
    each piece's first event links to the last event of the one before. None on anything else
    (the caller checks it all again in one process, which names what is wrong)."""
    ledger, progress, meet, beside = check.ledger, check.progress, second.meet, second.beside
    plan = _Plan(check.pieces, check.records, check.want_seq, check.heads, riding)
    pieces = plan.pieces
    mine: dict[int, _Piece] = {}
    checked = 0

    def told(done: int, _total: int) -> None:
        if progress is not None:  # (a piece both processes checked counts twice until they are joined)
            total = ledger.state.head.seq
            progress(min(checked + done + beside.done(), total), total)

    with ledger.file.reader() as f, _collector_paused():
        i = 0
        while i < len(pieces) and meet.first_claims(i):
            piece = _check_piece(ledger, f, plan, i, told)
            if piece is None:
                return None
            mine[i] = piece
            checked += piece.events
            i += 1
        meet.first_claims(i)  # (past the last when this process checked it: the other stops)
    theirs = beside.result(None if progress is None else lambda: told(0, 0))
    if theirs is None:
        return None
    return _joined(check, [mine.get(k) or theirs.get(k) for k in range(len(pieces))], riding is not None)


def _joined(check: LogCheck, pieces: list[_Piece | None], riding: bool) -> _Tally[IndexCheck, Redactions] | None:
    """One tally of the whole log from its pieces in order, or None when one is missing or does
    not link to the one before."""
    tally = _Tally(IndexCheck(check.records), Redactions(), check.want_seq, check.heads, None)
    for piece in pieces:
        if piece is None or piece.first is None:
            return None
        seq, prev, ckpt = piece.first
        if tally.events and (seq != tally.events + 1 or prev != tally.last_hash or ckpt != tally.ckpt):
            return None  # not the next link
        for offset, first_seq in piece.members:
            tally.check.member(offset, first_seq)
        tally.redactions.see(piece.stubs)
        tally.at_seq.update(piece.at_seq)
        tally.found.update(piece.found)
        tally.events += piece.events
        tally.end, tally.last_hash, tally.ckpt = piece.end, piece.last_hash, ckpt
    tally.outcomes = [piece.ride for piece in pieces if piece is not None] if riding else []
    if check.progress is not None:
        check.progress(tally.events, max(tally.events, check.ledger.state.head.seq))
    return tally


@dataclass(frozen=True)
class _Piece:
    """What one piece of a log held, as the process that checked it sends it back."""

    events: int
    first: tuple[int, str, str] | None  # (seq, prev, ckpt) of its first event
    end: int
    last_hash: str
    members: list[tuple[int, int]]  # (offset, first seq) of the members a side index record falls to
    stubs: list[Event]  # its stubs and redaction events, in order
    at_seq: dict[int, str]
    found: dict[str, int]
    ride: object  # its ride's outcome (None without one)


class _IndexedMembers:
    """The members the side index check must see, in order: each one at or after which the
    next record falls (the others leave that check as it was)."""

    def __init__(self, records: list[tuple[int, int]]) -> None:
        self.offsets = [offset for offset, _seq in records]
        self.seen: list[tuple[int, int]] = []
        self._i = 0

    def member(self, offset: int, first_seq: int) -> None:
        if self._i < len(self.offsets) and self.offsets[self._i] <= offset:
            self.seen.append((offset, first_seq))
            while self._i < len(self.offsets) and self.offsets[self._i] <= offset:
                self._i += 1


class _StubEvents:
    """The events :class:`Redactions` looks at (stubs and redactions), kept in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def see(self, batch: list[Event]) -> None:
        self.events += _stubs_and_redactions(batch)


def _check_piece(ledger: OpenLog, f: BinaryIO, plan: _Plan, k: int, progress: Progress) -> _Piece | None:
    """The members of piece ``k``, each checked as the one-process scan does (the first piece
    from seq 1, any other from whatever its first event says); None unless they end exactly
    where the next piece starts (the last: at a clean end of file)."""
    start = plan.pieces[k][0]
    end = plan.pieces[k + 1][0] if k + 1 < len(plan.pieces) else None
    inside = [r for r in plan.records if start <= r[0] and (end is None or r[0] < end)]
    ride = plan.riding() if plan.riding is not None else None
    tally = _Tally(_IndexedMembers(inside), _StubEvents(), plan.want_seq, plan.heads, ride)
    try:  # the first piece must start the chain; any other starts wherever its first event says
        for member, batch in walk(ledger, f, start, seq=1 if k == 0 else None, prev="" if k == 0 else None):
            if end is not None and member.end > end:
                return None  # the index's record is not the start of a member
            tally.add(member, batch)
            progress(tally.events, 0)
            if member.end == end:
                break
        else:
            if end is not None:
                return None  # the log ended before the next piece
    except (LogCorrupted, BadMember):
        return None
    outcome = ride.outcome() if ride is not None else None
    members, stubs = tally.check.seen, tally.redactions.events
    return _Piece(
        tally.events, tally.first, tally.end, tally.last_hash, members, stubs, tally.at_seq, tally.found, outcome
    )


def _from_the_end(ledger: OpenLog, plan: _Plan, meet: _Meet, progress: Progress) -> dict[int, _Piece] | None:
    """In the forked process: the pieces from the last one back, until the first process's claims
    meet this one's; None on anything but pieces that end where they must."""
    found: dict[int, _Piece] = {}
    checked = 0

    def told(done: int, _total: int) -> None:
        progress(checked + done, 0)

    with ledger.file.reader() as f, _collector_paused():
        j = len(plan.pieces) - 1
        while j >= 0 and meet.last_claims(j):
            piece = _check_piece(ledger, f, plan, j, told)
            if piece is None:
                return None
            found[j] = piece
            checked += piece.events
            j -= 1
        meet.last_claims(j)
    return found


T = TypeVar("T")


class Beside(Generic[T]):
    """``work(progress)`` run in a forked process while this one goes on: :meth:`result` is
    what it returned (pickled back through a pipe), or None when it raised or died;
    :meth:`done` is the last count it passed to ``progress``. Only where :func:`can_fork`."""

    def __init__(self, work: Callable[[Progress], T]) -> None:
        self._count = mmap.mmap(-1, _COUNT.size)  # shared with the child: MAP_SHARED, anonymous
        read, write = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            self._count.close()
            raise
        if pid == 0:  # the child: never returns into the caller's frames
            try:
                _die_with_parent()
                if os.getppid() != parent:
                    os._exit(0)  # the parent died before the line above
                os.close(read)
                try:
                    payload = pickle.dumps(work(self._report), pickle.HIGHEST_PROTOCOL)
                except BaseException:  # any failure (Ctrl-C too) is a None for the parent
                    payload = b""
                view = memoryview(payload)
                while view:
                    view = view[os.write(write, view) :]
            finally:
                os._exit(0)
        os.close(write)
        self._pid: int | None = pid
        self._read = read
        self._last = 0

    def _report(self, done: int, _total: int) -> None:
        _COUNT.pack_into(self._count, 0, done)

    def done(self) -> int:
        """The count the work last reported (also once it ended)."""
        if not self._count.closed:
            self._last = int(_COUNT.unpack_from(self._count)[0])
        return self._last

    def result(self, waiting: Callable[[], None] | None = None) -> T | None:
        """Wait for the work's result (None: it raised or died), calling ``waiting`` every
        :data:`POLL_S` seconds meanwhile."""
        parts = []
        while True:
            ready, _, _ = select.select([self._read], [], [], POLL_S)
            if not ready:
                if waiting is not None:
                    waiting()
                continue
            part = os.read(self._read, 1 << 20)
            if not part:
                break
            parts.append(part)
        self._reap()
        try:
            return cast(T, pickle.loads(b"".join(parts)))
        except (pickle.UnpicklingError, EOFError, ValueError):
            return None  # it raised, or died before it sent all of its result

    def cancel(self) -> None:
        """Stop the work if it still runs, and release what it held (idempotent)."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        if self._pid is not None:
            os.waitpid(self._pid, 0)
            self._pid = None
        if self._read >= 0:
            os.close(self._read)
            self._read = -1
        if not self._count.closed:
            self.done()  # kept for a last look
            self._count.close()


_COUNT = struct.Struct("<q")
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: this child gets SIGKILL when its parent dies (a verify killed mid-way leaves no
    process behind); elsewhere it ends on its own once its work is done."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _stubs_and_redactions(batch: list[Event]) -> list[Event]:
    """The stubs (:func:`ledger.events.is_stub_body`, inlined: this runs for every event) and
    the redaction events of ``batch``."""
    redacted = EventsRedacted.type_name
    return [e for e in batch if (len(e.body) == 1 and "sha256" in e.body) or e.type == redacted]


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
        for event in _stubs_and_redactions(batch):
            if is_stub_body(event.body):
                self.stubs[event.seq] = event
            elif self.wrong is None:
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
