"""Does a snapshot hold what the log it claims to fold says? Checks for loads and ``verify``.

Checksums prove a snapshot is the file that was written, and its own structure checks
(``snapshot``) that its rows could be a fold; these prove the file is the fold of the log.
The catalog and the semantic index are both derived from the events, so:

- ``sample_problem`` (every load): what the snapshot claims at a few seqs (rows, nodes, seeds,
  tombstones), and what a few events of the log make, are compared: every seq of a small log,
  else a few of each, chosen at random (each costs a seek); before the first search,
  the vectors of the entries met must equal the embedding of their text;
- ``catalog_problem`` (``verify``): every row and table equals a fresh fold of the log up to
  the cursor, streamed side by side (memory stays flat); ``vectors_problem`` many vectors
  equal a fresh embedding.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ledger import Ledger, VerifyReport
from ledger.anchor import Anchor
from ledger.events import Event, EventType, PerEventType, handlers, is_stub_body
from ledger.verify import LogCheck
from projections.engines.protocol import Progress
from projections.engines.snapshot import SnapshotView
from projections.models.catalog import REACT, Catalog, Entry, Row, RowColumns, Step, make_item, row_of
from projections.models.frozen import QUANT_STEPS, Records
from projections.models.semantic import Embedder, SemanticIndex

CHECK_ALL_UP_TO = 32  # a log this short is checked whole against the snapshot on every load
SAMPLE_ON_LOAD = 3  # otherwise this many events and stored rows, chosen at random (a seek each: ~50 ms at 1M)
TABLES_ON_LOAD = 2  # and this many nodes, seeds or tombstones
VECTORS_ON_VERIFY = 1000  # vectors re-embedded by `verify`
QUANT_TOLERANCE = 1.0  # a stored vector is its embedding quantised: within half a step, a whole one allowed

Claim = tuple[int, EventType, str | None, str | None]  # (seq, event type, node or None, event id or None)


def sample_problem(ledger: Ledger, catalog: Catalog, view: SnapshotView) -> tuple[str | None, list[Entry | Step]]:
    """Why some of what the snapshot holds is not the fold of the log (or the reverse), or
    None; and the entries and steps met, whose vectors ``vectors_problem`` checks before the
    first search (it needs the model)."""
    cursor = view.cursor
    small = cursor <= CHECK_ALL_UP_TO
    seqs = range(1, cursor + 1) if small else random.sample(range(1, cursor + 1), min(SAMPLE_ON_LOAD, cursor))
    rows = (
        range(view.rows_total) if small else random.sample(range(view.rows_total), min(SAMPLE_ON_LOAD, view.rows_total))
    )
    tables = _table_claims(catalog)
    claims = [
        *(tables if small else random.sample(tables, min(TABLES_ON_LOAD, len(tables)))),
        *(_row_claim(view, r) for r in rows),
    ]
    events: dict[int, Event | None] = {}
    for seq, kind, node, item_id in claims:
        event = events.setdefault(seq, ledger.event_at(seq))
        if (
            event is None
            or event.type != kind
            or (node is not None and event.node != node)
            or (item_id and event.id != item_id)
        ):
            return f"it holds a {kind} at seq {seq} that the log does not", []
    for seq in seqs:
        events.setdefault(seq, ledger.event_at(seq))
    for event in events.values():
        problem = event is not None and event_problem(catalog, event)
        if problem:
            return problem, []
    items = [
        catalog.lookup(e.id) for e in events.values() if e is not None and e.type in ("memory_added", "react_step")
    ]
    return None, [i for i in items if i is not None]


def _table_claims(catalog: Catalog) -> list[Claim]:
    tables = catalog.tables()
    return [
        *((n.seq, "node_started", n.node_id, None) for n in tables.nodes),
        *((s.seq, "core_seeded", None, None) for s in tables.seeds),
        *((seq, "checkpoint_purged", None, None) for seq in tables.purges),
        *((seq, "node_cleared", node, None) for node, seqs in tables.clears.items() for seq in seqs),
        *((r.redacted_at, "events_redacted", None, None) for r in tables.redacted),
    ]


def _row_claim(view: SnapshotView, row: int) -> Claim:
    name, rows, i = view.rows_at(row)
    if name == REACT:
        return int(rows.seqs[i]), "react_step", None, rows.id(i)
    return int(rows.seqs[i]), "memory_added", name, rows.id(i)


def event_problem(catalog: Catalog, event: Event) -> str | None:
    """Why the catalog does not hold what this event makes, or None."""
    return _CHECKS[event.type](catalog, event)


def _row_problem(catalog: Catalog, event: Event) -> str | None:
    if is_stub_body(event.body):
        return None if catalog.lookup(event.id) is None else f"it holds the body a redaction removed (seq {event.seq})"
    item, made = catalog.lookup(event.id), row_of(event)
    if item is None or made is None or item != _made(event, made, item.cleared_at):
        return f"its record of seq {event.seq} is not the log's event seq {event.seq}"
    return None


def _node_problem(catalog: Catalog, event: Event) -> str | None:
    info = catalog.nodes.get(event.node)
    if info is None or info.seq > event.seq or (info.seq == event.seq and info != _fold_one(event)):
        return f"its node {event.node!r} is not the one the log's seq {event.seq} started"
    return None


def _seed_problem(catalog: Catalog, event: Event) -> str | None:
    if is_stub_body(event.body):
        return (
            None if all(s.seq != event.seq for s in catalog.seeds) else f"it holds the redacted seed of seq {event.seq}"
        )
    return None if _fold_one(event) in catalog.seeds else f"it lacks the core seed of seq {event.seq}"


def _redaction_problem(catalog: Catalog, event: Event) -> str | None:
    ids = [r["id"] for r in event.body["redacted"]]
    if any(catalog.redacted.get(i) is None or catalog.redacted[i].redacted_at != event.seq for i in ids):
        return f"it lacks the redaction of seq {event.seq}"
    return None if not catalog.holds_any(ids) else f"it holds bodies the redaction of seq {event.seq} removed"


def _clear_problem(catalog: Catalog, event: Event) -> str | None:
    return None if event.seq in catalog.clears.get(event.node, ()) else f"it lacks the tombstone of seq {event.seq}"


def _purge_problem(catalog: Catalog, event: Event) -> str | None:
    return None if event.seq in catalog.purges else f"it lacks the purge of seq {event.seq}"


_CHECKS: PerEventType[Callable[[Catalog, Event], str | None]] = handlers(
    "snapshot_check.event_problem",
    {
        "memory_added": _row_problem,
        "react_step": _row_problem,
        "node_started": _node_problem,
        "core_seeded": _seed_problem,
        "node_cleared": _clear_problem,
        "checkpoint_purged": _purge_problem,
        "events_redacted": _redaction_problem,
    },
)


PROGRESS_EVERY = 1024  # events compared between two progress calls


def catalog_problem(
    ledger: Ledger,
    catalog: Catalog,
    cursor: int,
    progress: Progress | None = None,
    one_read: OneRead | None = None,
) -> str | None:
    """Why the catalog is not the fold of the log's events 1..cursor, or None. Rows are
    compared in seq order as both are streamed; only the small tables are folded whole.
    ``progress(events compared, cursor)`` every :data:`PROGRESS_EVERY` events and at the end.

    With ``one_read`` (``ari-ledger verify``) the rows are compared through the log's own
    check instead, which then reads the log once for both."""
    if one_read is not None and one_read.cursor == cursor:  # (else another snapshot than it read)
        return one_read.compare(catalog)
    tables = Catalog()
    stored: dict[EventType, Iterator[Row]] = {
        "memory_added": catalog.scan_rows(False),
        "react_step": catalog.scan_rows(True),
    }
    for event in ledger.events(as_of=cursor):
        if progress is not None and event.seq % PROGRESS_EVERY == 0:
            progress(event.seq, max(event.seq, cursor))
        made = row_of(event) if event.type in stored else None
        if made is None:  # not a row's event, or a redacted stub: the small tables
            tables.apply(event)
            continue
        mine = next(stored[event.type], None)
        if mine is None or not _same_row(mine, event, made):
            return f"its {_what(event.type)} at seq {mine[2] if mine else '(none)'} differs from the log's fold (seq {event.seq})"
    for kind, rest in stored.items():
        extra = next(rest, None)
        if extra is not None:
            return f"it holds a {_what(kind)} of seq {extra[2]}, the log's fold up to seq {cursor} does not"
    problem = _tables_problem(tables, catalog, cursor)
    if progress is not None and problem is None:
        progress(cursor, cursor)
    return problem


def _tables_problem(tables: Catalog, catalog: Catalog, cursor: int) -> str | None:
    """Why the catalog's small tables are not those of ``tables`` (the log's fold up to ``cursor``)."""
    if tables.tables() != catalog.tables():
        return f"its nodes, seeds or tombstones differ from the log's fold up to seq {cursor}"
    return None


def vectors_problem(index: SemanticIndex, embedder: Embedder, items: list[Entry | Step]) -> str | None:
    """Why the stored vectors of ``items`` are not the embedding of their text, or None.

    They are compared to the precision they are stored in (12-bit codes, ``frozen.quantise``):
    each component within one quantisation step (its row's largest magnitude / 2047). Rounding
    leaves half a step; a vector stored by an earlier version of the embedder may differ from
    today's in its last bits (before batch-invariant sums: ~3e-8), so a component on a
    rounding boundary may land one code away.
    """
    if not items:
        return None
    fresh = embedder.embed([i.text if isinstance(i, Entry) else i.content for i in items])
    for item, vector in zip(items, fresh):
        name = item.node_id if isinstance(item, Entry) else REACT
        stored = index.vector_of(name, item.entry_id if isinstance(item, Entry) else item.step_id)
        step = float(np.max(np.abs(vector))) / QUANT_STEPS
        if stored is None or np.any(np.abs(stored - vector) > QUANT_TOLERANCE * step + np.float32(1e-7)):
            return f"its vector of seq {item.seq} is not the embedding of that entry's text"
    return None


def random_items(view: SnapshotView, catalog: Catalog, count: int = VECTORS_ON_VERIFY) -> list[Entry | Step]:
    """Up to ``count`` stored entries and steps chosen at random."""
    picked = random.sample(range(view.rows_total), min(count, view.rows_total))
    items = (catalog.lookup(rows.id(i)) for _name, rows, i in map(view.rows_at, picked))
    return [item for item in items if item is not None]


def _fold_one(event: Event) -> Any:
    """The node or core seed one event makes on its own (None when it makes none)."""
    fresh = Catalog()
    fresh.apply(event)
    return next(iter([*fresh.nodes.values(), *fresh.seeds]), None)


def _made(event: Event, made: tuple[str, bytes], cleared: int) -> Entry | Step:
    """The entry or step ``event`` makes (``made``: :func:`row_of`), with the tombstone stamp
    ``cleared`` (a later event's, which the event alone cannot know)."""
    return make_item(made[0], event.id, event.seq, cleared, made[1])


def _same_row(mine: Row, event: Event, made: tuple[str, bytes]) -> bool:
    """Whether a stored row is the one ``event`` makes (``made``: :func:`row_of`), whatever a
    later tombstone stamped on it. Equal bytes are the same record; other bytes are decoded
    and compared, so a record written with another key order still counts as the same."""
    name, item_id, seq, _cleared, record = mine
    if (name, item_id, seq) != (made[0], event.id, event.seq):
        return False
    return bytes(record) == made[1] or make_item(*mine) == _made(event, made, mine[3])


def _what(kind: EventType) -> str:
    return "entry" if kind == "memory_added" else "ReAct step"


class RowDigest:
    """A digest of rows in seq order, a column at a time (collections, ids, seqs, records; each
    item's length too, so no two lists of rows give the same bytes): two folds whose digests
    are equal hold the same rows, as encoded bytes. Fed in chunks of any size."""

    def __init__(self) -> None:
        self._columns = [hashlib.sha256() for _ in range(5)]
        self.rows = 0

    def add(self, columns: RowColumns) -> None:
        names, ids, seqs, records = columns
        n = len(seqs)
        lengths = np.empty((n, 3), np.int64)
        lengths[:, 0] = np.fromiter(map(len, names), np.int64, n)
        lengths[:, 1] = np.fromiter(map(len, ids), np.int64, n)
        lengths[:, 2] = records.lengths
        for h, data in zip(
            self._columns,
            (
                "".join(names).encode("utf-8", "surrogatepass"),  # (a text the log holds, whatever it is)
                "".join(ids).encode("utf-8", "surrogatepass"),
                np.asarray(seqs, np.int64).tobytes(),
                records.data,
                lengths.tobytes(),  # a row's three lengths together: the same bytes in chunks of any size
            ),
        ):
            h.update(data)
        self.rows += len(seqs)

    def digest(self) -> tuple[int, tuple[bytes, ...]]:
        return self.rows, tuple(h.digest() for h in self._columns)


Digests = dict[bool, tuple[int, tuple[bytes, ...]]]  # steps or not → (rows, digests): RowDigest.digest


@dataclass(frozen=True)
class Made:
    """What one process's part of the log makes up to the snapshot's cursor (picklable: a
    second process sends it back): from which seq it read, the digests of its entries' and
    steps' rows, and its other events (a fold of the small tables)."""

    first: int | None
    rows: Digests
    tables: list[Event]


class MadeRows:
    """A ride (:class:`ledger.verify.Ride`) along the log's check: the rows the events it sees
    make, digested as they come (``row_of``, the fold's own rule)."""

    def __init__(self, cursor: int) -> None:
        self.cursor = cursor
        self.first: int | None = None
        self.rows = {False: RowDigest(), True: RowDigest()}
        self.tables: list[Event] = []

    def see(self, batch: list[Event]) -> None:
        if batch and self.first is None:
            self.first = batch[0].seq
        columns: dict[bool, tuple[list[str], list[str], list[int], list[bytes]]] = {
            False: ([], [], [], []),
            True: ([], [], [], []),
        }
        for event in batch:
            if event.seq > self.cursor:
                break
            row = row_of(event) if event.type in _ROW_KINDS else None
            if row is None:  # not a row's event, or a redacted stub: the small tables
                self.tables.append(event)
                continue
            names, ids, seqs, records = columns[event.type == "react_step"]
            names.append(row[0])
            ids.append(event.id)
            seqs.append(event.seq)
            records.append(row[1])
        for steps, digest in self.rows.items():
            names, ids, seqs, records = columns[steps]
            if seqs:
                digest.add((names, ids, seqs, Records.of(records)))

    def outcome(self) -> Made:
        return Made(self.first, {steps: d.digest() for steps, d in self.rows.items()}, self.tables)


_ROW_KINDS = frozenset({"memory_added", "react_step"})


def stored_digests(catalog: Catalog, bounds: list[int]) -> list[Digests]:
    """The digests of the catalog's rows with seqs in each range ``bounds`` cuts (``[b0, b1)``,
    ``[b1, b2)``, …, the last one open), per kind (steps or not)."""
    parts: list[dict[bool, RowDigest]] = [{False: RowDigest(), True: RowDigest()} for _ in bounds]
    cuts = np.asarray(bounds[1:], np.int64)
    for steps in (False, True):
        for names, ids, seqs, records in catalog.scan_columns(steps):
            at = np.searchsorted(np.asarray(seqs, np.int64), cuts, side="left").tolist()
            for part, lo, hi in zip(parts, [0, *at], [*at, len(seqs)]):
                if hi > lo:
                    part[steps].add((names[lo:hi], ids[lo:hi], seqs[lo:hi], records.part(lo, hi)))
    return [{steps: d.digest() for steps, d in part.items()} for part in parts]


class OneRead:
    """``ari-ledger verify``'s one read of the log for both its checks: the log's own
    (:class:`ledger.verify.LogCheck`, its pieces shared with a forked process begun as this is
    made) and the snapshot's rows, digested as the events are checked (:class:`MadeRows`, in
    each process) and compared with the stored rows' digests here.

    It is handed to ``check_snapshot`` (its ``one_read``, passed on to :func:`catalog_problem`),
    so the snapshot's other checks stay where they are; it is also the ``progress`` that counts
    the snapshot's part after the log's. When the
    digests differ, or the log's check could not give them, :func:`catalog_problem` compares
    the rows one by one as it always did, to say which row differs (or that a record in other
    bytes says the same). :meth:`report` is the log's report, whether or not the snapshot's
    check compared its rows."""

    def __init__(
        self,
        ledger: Ledger,
        anchors: Iterable[Anchor],
        cursor: int,
        progress: Progress | None = None,
    ) -> None:
        self.ledger, self.cursor, self._progress = ledger, cursor, progress
        self.check = LogCheck(ledger, anchors, self._count, parallel="auto", riding=lambda: MadeRows(cursor))
        self._report: VerifyReport | None = None

    def __call__(self, done: int, total: int) -> None:
        """The snapshot's part of the count (after the log's events)."""
        if self._progress is not None:
            self._progress(self.ledger.last_seq + done, self.ledger.last_seq + self.cursor)

    def _count(self, done: int, _total: int) -> None:
        """The log's events checked; each up to the cursor is also a row compared."""
        if self._progress is not None:
            self._progress(done + min(done, self.cursor), self.ledger.last_seq + self.cursor)

    def compare(self, catalog: Catalog) -> str | None:
        """Check the log, its rows' digests riding along; why the catalog is not their fold, or None."""
        planned = [seq for _offset, seq in self.check.pieces] or [1]
        stored = stored_digests(catalog, planned)  # while the second process checks pieces of the log
        self._report, outcomes = self.check.run(lambda: MadeRows(self.cursor))
        if self._report.reason is not None:
            return f"not compared: the log does not verify ({self._report.summary()})"
        made = [o for o in outcomes if isinstance(o, Made)]
        firsts = [m.first for m in made]
        if not made or len(made) != len(outcomes) or firsts[0] not in (1, None) or None in firsts[1:]:
            return catalog_problem(self.ledger, catalog, self.cursor)  # (no ride saw the events: never so far)
        bounds = [1, *(first for first in firsts[1:] if first is not None)]
        if bounds != planned:  # the log was read again in one process, or split elsewhere
            stored = stored_digests(catalog, bounds)
        if [m.rows for m in made] != stored:
            return catalog_problem(self.ledger, catalog, self.cursor)  # names the row, or finds it says the same
        tables = Catalog()
        for event in (event for m in made for event in m.tables):
            tables.apply(event)
        problem = _tables_problem(tables, catalog, self.cursor)
        if problem is None:
            self(self.cursor, self.cursor)
        return problem

    def report(self) -> VerifyReport:
        """The log's report (the log is checked here if the snapshot's check did not compare)."""
        if self._report is None:
            self._report = self.check.run()[0]
        return self._report
