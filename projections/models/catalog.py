"""The catalog projection: every entry, node, ReAct step and core seed, foldable as of any seq.

Nothing is removed when folding: a ``node_cleared`` tombstone stamps the node's earlier
entries with the seq that hid them, so a read "as of seq N" (R29) sees exactly what a
node saw when it ran, and the current view hides them.

Entries and steps are kept as rows of collections (one per node, one for the ReAct trace):
the rows a snapshot holds are read from it on demand (``frozen``), the rows folded since
are kept in memory with their records encoded, and an ``Entry`` is decoded only when a
read returns it. So the catalog's memory follows the reads and the events folded since
the last snapshot, not the size of the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

import msgspec
import numpy as np

from ledger.events import (
    CoreSeeded,
    Event,
    EventsRedacted,
    NodeStarted,
    PerEventType,
    ReactStep,
    StoredType,
    handlers,
    is_stub_body,
)
from ledger.typed import kind_label, typed_kind
from projections.models.frozen import (
    NEVER,
    REACT,
    Frozen,
    OnDamage,
    Records,
    Rows,
    effective_cleared,
    heals,
    visible_rows,
)

__all__ = [
    "NEVER",
    "REACT",
    "Catalog",
    "CatalogState",
    "CatalogTables",
    "Entry",
    "NodeInfo",
    "Seed",
    "Step",
    "event_time",
]


def event_time(event: Event) -> float:
    """An entry's ``ts`` as ARI gives it: float seconds — the original time of an imported
    entry, else when the event was appended."""
    origin = event.body.get("origin") or {}  # memory_added, react_step and core_seeded all carry it
    ts = origin.get("ts")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return float(ts)
    return datetime.fromisoformat(event.ts.replace("Z", "+00:00")).timestamp()


class Entry(msgspec.Struct, array_like=True, gc=False):
    """One node-scope memory entry (a ``memory_added`` event)."""

    entry_id: str
    node_id: str
    seq: int
    ts: float
    body: dict[str, Any]
    kind: str | None = None  # the research-memory kind (ledger.typed), None for free text
    cleared_at: int = NEVER

    def visible(self, as_of: int | None) -> bool:
        if as_of is None:
            return self.cleared_at == NEVER
        return self.seq <= as_of < self.cleared_at

    @property
    def text(self) -> str:
        return self.body["text"]

    @property
    def metadata(self) -> dict[str, Any]:
        return self.body.get("metadata", {})

    @property
    def label(self) -> str | None:
        """ARI's kind label (``mem_kind`` or ``type``; also free-text labels like ``result_summary``)."""
        return kind_label(self.metadata)

    @property
    def findings(self) -> list[dict[str, str]]:
        return self.body.get("findings", [])


class NodeInfo(msgspec.Struct, array_like=True, gc=False):
    """A node as recorded by its ``node_started`` event."""

    node_id: str
    seq: int
    parent_id: str | None
    ancestor_ids: list[str]
    label: str
    depth: int
    eval_summary: str | None = None


class RedactedInfo(msgspec.Struct, array_like=True, gc=False):
    """An event whose body a redaction removed: what stays visible of it (it has no row)."""

    event_id: str
    seq: int
    node_id: str
    type: StoredType
    kind: str
    reason: str
    by: str
    redacted_at: int  # the seq of the events_redacted event


class Step(msgspec.Struct, array_like=True, gc=False):
    """One ReAct step of the flat checkpoint trace."""

    step_id: str
    node_id: str
    seq: int
    ts: float
    content: str
    metadata: dict[str, Any]
    cleared_at: int = NEVER

    def visible(self, as_of: int | None) -> bool:
        if as_of is None:
            return self.cleared_at == NEVER
        return self.seq <= as_of < self.cleared_at


class Seed(msgspec.Struct, array_like=True, gc=False):
    seq: int
    persona: str
    human: str
    context: dict[str, Any]
    ts: float = 0.0


class CatalogState(msgspec.Struct):
    """Everything the catalog holds, materialised (for comparisons in tests and checks)."""

    entries: list[Entry] = []
    nodes: list[NodeInfo] = []
    steps: list[Step] = []
    seeds: list[Seed] = []
    purges: list[int] = []
    redacted: list[RedactedInfo] = []


class CatalogTables(msgspec.Struct):
    """What the catalog keeps besides rows (small: one item per node, seed, tombstone and
    redacted event)."""

    nodes: list[NodeInfo] = []
    seeds: list[Seed] = []
    purges: list[int] = []
    clears: dict[str, list[int]] = {}  # node → seqs of its node_cleared tombstones
    redacted: list[RedactedInfo] = []


class EntryRecord(msgspec.Struct, array_like=True, gc=False):
    """An entry's stored record; its id, node, seq and tombstone are the row's columns."""

    ts: float
    body: dict[str, Any]
    kind: str | None


class StepRecord(msgspec.Struct, array_like=True, gc=False):
    """A ReAct step's stored record (its node varies within the trace's collection)."""

    node_id: str
    ts: float
    content: str
    metadata: dict[str, Any]


_ENCODE = msgspec.json.Encoder().encode
_ENTRY = msgspec.json.Decoder(EntryRecord).decode
_STEP = msgspec.json.Decoder(StepRecord).decode

Item = Entry | Step
HINTS = 1024


def make_item(name: str, item_id: str, seq: int, cleared: int, record: bytes | memoryview) -> Item:
    """Decode a row of collection ``name`` into an Entry (a node's) or a Step (the trace's)."""
    if name == REACT:
        s = _STEP(record)
        return Step(item_id, s.node_id, seq, s.ts, s.content, s.metadata, cleared)
    e = _ENTRY(record)
    return Entry(item_id, name, seq, e.ts, e.body, e.kind, cleared)


def row_of(event: Event) -> tuple[str, bytes] | None:
    """The row a ``memory_added`` (in its node's collection) or ``react_step`` (in the trace)
    makes: (collection, encoded record), or None for a redacted stub, which makes none."""
    body = event.body
    if is_stub_body(body):
        return None
    if event.type == "react_step":
        step = event.body_as(ReactStep)
        return REACT, _ENCODE(StepRecord(event.node, event_time(event), step.content, step.metadata))
    return event.node, _ENCODE(EntryRecord(event_time(event), body, typed_kind(body.get("metadata", {}))))


Row = tuple[str, str, int, int, bytes]  # (collection, id, seq, cleared at, encoded record): a row as stored
RowColumns = tuple[list[str], list[str], list[int], Records]  # rows as columns: collections, ids, seqs, records


class Fresh:
    """Rows of one collection folded after the stored ones: in memory, records encoded."""

    __slots__ = ("cleared", "ids", "records", "seqs")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.seqs: list[int] = []
        self.cleared: list[int] = []
        self.records: list[bytes] = []

    def add(self, item_id: str, seq: int, record: bytes) -> None:
        self.ids.append(item_id)
        self.seqs.append(seq)
        self.cleared.append(NEVER)
        self.records.append(record)

    def clear(self, seq: int) -> None:
        self.cleared = [seq if c == NEVER else c for c in self.cleared]

    def visible(self, i: int, as_of: int | None) -> bool:
        if as_of is None:
            return self.cleared[i] == NEVER
        return self.seqs[i] <= as_of < self.cleared[i]


class Catalog:
    """Fold of the log into entries by node, the node tree, the ReAct trace and core seeds.

    ``entries`` (id → Entry), ``by_node`` (node → its entries) and ``steps`` are read-only
    views that decode on demand. ``on_damage`` (set by the projector) is called when stored
    rows fail their check; it rebuilds the catalog from the log before the read is retried.
    """

    def __init__(self, base: Frozen | None = None, tables: CatalogTables | None = None) -> None:
        self.on_damage: OnDamage | None = None
        self._resets = 0  # how many times it started over: a derived view of the rows is stale across one
        self.changes = 0  # moves with every event folded and every start over: no view is stale while it stays
        self.reset(base, tables)
        self.entries = EntryMap(self)
        self.by_node = ByNode(self)
        self.steps = StepList(self)

    def reset(self, base: Frozen | None = None, tables: CatalogTables | None = None) -> None:
        """Start over on ``base`` (None: empty) with these tables; the views stay valid."""
        tables = tables or CatalogTables()
        self.base = base
        self.nodes: dict[str, NodeInfo] = {n.node_id: n for n in tables.nodes}
        self.seeds: list[Seed] = list(tables.seeds)
        self.purges: list[int] = list(tables.purges)
        self.clears: dict[str, list[int]] = {node: list(seqs) for node, seqs in tables.clears.items()}
        self.redacted: dict[str, RedactedInfo] = {r.event_id: r for r in tables.redacted}
        self._fresh: dict[str, Fresh] = {}
        self._where: dict[str, tuple[str, int]] | None = None  # id of a fresh row → (collection, index), once looked up
        self._hints: dict[str, tuple[str, int]] = {}  # id of a stored row a search just found → its row
        self._after_clear: dict[str, int] = {}  # stored collection → first node_cleared after the base
        self._after_purge = NEVER  # first checkpoint_purged after the base
        self._resets += 1
        self.changes += 1

    def tables(self) -> CatalogTables:
        return CatalogTables(
            list(self.nodes.values()),
            list(self.seeds),
            list(self.purges),
            {n: list(s) for n, s in self.clears.items()},
            list(self.redacted.values()),
        )

    # -- folding ---------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        self.changes += 1
        _APPLY[event.type](self, event)

    def _row(self, event: Event) -> None:
        row = row_of(event)
        if row is not None:  # None: redacted, no row; the redaction event that follows records what stays visible
            self._add(row[0], event.id, event.seq, row[1])

    def _clear(self, event: Event) -> None:
        self.clears.setdefault(event.node, []).append(event.seq)
        self._tombstone(event.node, event.seq)

    def _purge(self, event: Event) -> None:
        self.purges.append(event.seq)
        for fresh in self._fresh.values():
            fresh.clear(event.seq)
        if self.base is not None and self._after_purge == NEVER:
            self._after_purge = event.seq

    def _node(self, event: Event) -> None:
        node = event.body_as(NodeStarted)
        self.nodes.setdefault(
            event.node,
            NodeInfo(
                event.node, event.seq, node.parent_id, node.ancestor_ids, node.label, node.depth, node.eval_summary
            ),
        )

    def _seed(self, event: Event) -> None:
        if is_stub_body(event.body):
            return
        core = event.body_as(CoreSeeded)
        self.seeds.append(Seed(event.seq, core.persona, core.human, core.context, event_time(event)))

    def _redaction(self, event: Event) -> None:
        redaction = event.body_as(EventsRedacted)
        for r in redaction.redacted:
            self.redacted[r.id] = RedactedInfo(
                r.id, r.seq, r.node, r.type, r.kind, redaction.reason, redaction.by, event.seq
            )

    def holds_any(self, item_ids: Iterable[str]) -> bool:
        """Whether any of these entries or steps has a row (a body) here."""
        return any(self.lookup(i) is not None for i in item_ids)

    def _add(self, name: str, item_id: str, seq: int, record: bytes) -> None:
        fresh = self._fresh.get(name)
        if fresh is None:
            fresh = self._fresh[name] = Fresh()
        if self._where is not None:
            self._where[item_id] = (name, len(fresh.ids))
        fresh.add(item_id, seq, record)

    def _tombstone(self, name: str, seq: int) -> None:
        """Hide the collection's live rows as of ``seq`` (stored ones through ``_after_clear``)."""
        if name in self._fresh:
            self._fresh[name].clear(seq)
        if self.base is not None and self.base.count(name) and name != REACT:
            self._after_clear.setdefault(name, seq)

    # -- rows --------------------------------------------------------------------------

    def collections(self) -> list[str]:
        """Every collection with rows (nodes and the ReAct trace), in order of first appearance."""
        if self.base is None:
            return list(self._fresh)
        return [*self.base.names, *(name for name in self._fresh if not self.base.count(name))]

    def after(self, name: str) -> int:
        """The first tombstone after the base that hides the collection's stored rows (or NEVER)."""
        clear = NEVER if name == REACT else self._after_clear.get(name, NEVER)
        return min(clear, self._after_purge)

    def stored(self, name: str) -> Rows | None:
        return self.base.rows(name) if self.base is not None else None

    def fresh(self, name: str) -> Fresh | None:
        return self._fresh.get(name)

    def _items(self, name: str, as_of: int | None, every: bool = False) -> list[Item]:
        """The collection's rows decoded, in log order: visible ones, or ``every`` one."""
        out: list[Item] = []
        rows = self.stored(name)
        if rows is not None:
            cleared = effective_cleared(rows, self.after(name))
            picked = range(rows.n) if every else visible_rows(rows.seqs, cleared, as_of).tolist()
            out.extend(make_item(name, rows.id(i), int(rows.seqs[i]), int(cleared[i]), rows.record(i)) for i in picked)
        fresh = self._fresh.get(name)
        if fresh is not None:
            out.extend(
                make_item(name, fresh.ids[i], fresh.seqs[i], fresh.cleared[i], fresh.records[i])
                for i in range(len(fresh.ids))
                if every or fresh.visible(i, as_of)
            )
        return out

    def _fresh_where(self) -> dict[str, tuple[str, int]]:
        """Where each fresh row is, by id: built on the first look-up, then kept up to date
        (a cold fold of a million entries never looks one up, and saves the dict)."""
        if self._where is None:
            self._where = {
                item_id: (name, i) for name, fresh in self._fresh.items() for i, item_id in enumerate(fresh.ids)
            }
        return self._where

    def remember(self, item_id: str, name: str, row: int) -> None:
        """Where a search found a stored row: the caller looks its entry up next, and this
        spares the id index. Kept for the last HINTS searched rows."""
        if len(self._hints) >= HINTS:
            self._hints.clear()
        self._hints[item_id] = (name, row)

    @heals
    def lookup(self, item_id: str) -> Item | None:
        """The entry or step with this id, visible or not."""
        where = self._fresh_where().get(item_id)
        if where is not None:
            name, i = where
            fresh = self._fresh[name]
            return make_item(name, item_id, fresh.seqs[i], fresh.cleared[i], fresh.records[i])
        if self.base is None:
            return None
        found = self._hints.get(item_id) or self.base.locate(item_id)
        if found is None:
            return None
        name, i = found
        rows = self.base.rows(name)
        if rows is None:
            return None
        cleared = effective_cleared(rows, self.after(name))
        return make_item(name, item_id, int(rows.seqs[i]), int(cleared[i]), rows.record(i))

    def lexical_version(self, node_id: str) -> tuple[object, ...]:
        """What a view derived from a node's rows must be rebuilt on: its rows added, cleared,
        purged or redacted, or the catalog started over (no row is read)."""
        return (
            self._resets,
            self.count(node_id),
            len(self.clears.get(node_id, ())),
            len(self.purges),
            len(self.redacted),
        )

    @heals
    def first_seq(self, name: str) -> int | None:
        """The seq of the collection's first row (rows are in log order), visible or not; None
        without rows. What a read "as of seq N" asks to know whether a node had written by then."""
        rows = self.stored(name)
        if rows is not None and rows.n:
            return int(rows.seqs[0])
        fresh = self._fresh.get(name)
        return fresh.seqs[0] if fresh is not None and fresh.seqs else None

    def node_since(self, node_id: str) -> int | None:
        """The seq of the node's first event the catalog keeps: its ``node_started`` or its first
        entry, whichever came first; None for a node it does not know."""
        info = self.nodes.get(node_id)
        seqs = [s for s in (info.seq if info else None, self.first_seq(node_id)) if s is not None]
        return min(seqs) if node_id != REACT and seqs else None

    def count(self, name: str) -> int:
        """Rows of a collection, stored and fresh, visible or not (no row is read)."""
        fresh = self._fresh.get(name)
        return (self.base.count(name) if self.base is not None else 0) + (len(fresh.ids) if fresh else 0)

    @heals
    def _any_visible(self, name: str, as_of: int | None) -> bool:
        rows = self.stored(name)
        if rows is not None:
            after = self.after(name)
            if as_of is None and after == NEVER:
                if rows.hidden < rows.n:
                    return True
            elif visible_rows(rows.seqs, effective_cleared(rows, after), as_of).size:
                return True
        fresh = self._fresh.get(name)
        return fresh is not None and any(fresh.visible(i, as_of) for i in range(len(fresh.ids)))

    @heals
    def scan(self, steps: bool) -> Iterator[Item]:
        """Every entry (``steps`` False) or step (True) in seq order, visible or not.

        Every stored collection is read (and so checked) before the first item is returned,
        so a scan never stops half way on damage.
        """
        return (make_item(*row) for row in self.scan_rows(steps))

    def scan_rows(self, steps: bool) -> Iterator[Row]:
        """:meth:`scan` as the rows are stored, records encoded (a check compares them
        with :func:`row_of` without decoding them)."""
        names = [n for n in self.collections() if (n == REACT) == steps]
        stored = [
            (n, rows, effective_cleared(rows, self.after(n))) for n in names if (rows := self.stored(n)) is not None
        ]
        return self._scan(names, stored)

    def scan_columns(self, steps: bool, chunk: int = 4096) -> Iterator[RowColumns]:
        """:meth:`scan_rows` a chunk of rows at a time, as columns (collections, ids, seqs,
        records): a check that digests the rows whole spares a tuple and a lookup per row.
        (The stored rows of every collection are one base's: one records section, decompressed a
        chunk at a time.)"""
        names = [n for n in self.collections() if (n == REACT) == steps]
        stored = [rows for n in names if (rows := self.stored(n)) is not None]
        if stored:
            seqs = np.concatenate([rows.seqs for rows in stored])
            order = np.argsort(seqs, kind="stable")
            which = np.repeat(np.arange(len(stored)), [rows.n for rows in stored])[order].tolist()
            ids = np.concatenate([rows.ids for rows in stored])[order].tolist()
            starts = np.concatenate([rows.offsets[:-1] for rows in stored])[order]
            ends = np.concatenate([rows.offsets[1:] for rows in stored])[order]
            seqs = seqs[order].tolist()
            unpack_many, name_of = stored[0].unpack_many, [rows.name for rows in stored].__getitem__
            for lo in range(0, len(seqs), chunk):
                hi = lo + chunk
                yield (
                    list(map(name_of, which[lo:hi])),
                    [i.decode() for i in ids[lo:hi]],
                    seqs[lo:hi],
                    unpack_many(starts[lo:hi], ends[lo:hi]),
                )
        fresh = list(self._scan(names, []))
        if fresh:
            yield [r[0] for r in fresh], [r[1] for r in fresh], [r[2] for r in fresh], Records.of([r[4] for r in fresh])

    def scan_entries(self) -> Iterator[Entry]:
        return cast(Iterator[Entry], self.scan(False))

    def scan_steps(self) -> Iterator[Step]:
        return cast(Iterator[Step], self.scan(True))

    def _scan(self, names: list[str], stored: list[tuple[str, Rows, np.ndarray]]) -> Iterator[Row]:
        if stored:
            seqs = np.concatenate([rows.seqs for _, rows, _ in stored])
            which = np.repeat(np.arange(len(stored)), [rows.n for _, rows, _ in stored])
            starts = np.cumsum([0] + [rows.n for _, rows, _ in stored])
            for k in np.argsort(seqs, kind="stable").tolist():
                b = int(which[k])
                name, rows, cleared = stored[b]
                i = k - int(starts[b])
                yield name, rows.id(i), int(rows.seqs[i]), int(cleared[i]), rows.record(i)
        fresh = sorted((f.seqs[i], n, i) for n in names if (f := self._fresh.get(n)) for i in range(len(f.ids)))
        for seq, name, i in fresh:
            f = self._fresh[name]
            yield name, f.ids[i], seq, f.cleared[i], f.records[i]

    def state(self) -> CatalogState:
        """Everything, materialised in log order (for tests and ``verify``; O(checkpoint))."""
        return CatalogState(
            list(self.scan_entries()),
            list(self.nodes.values()),
            list(self.scan_steps()),
            list(self.seeds),
            list(self.purges),
            list(self.redacted.values()),
        )

    # -- queries ---------------------------------------------------------------------

    @heals
    def node_entries(self, node_id: str, as_of: int | None = None) -> list[Entry]:
        """The node's visible entries in log order."""
        return self._items(node_id, as_of) if node_id != REACT else []  # type: ignore[return-value]

    def scope_entries(self, node_ids: Iterable[str], as_of: int | None = None) -> list[Entry]:
        """Visible entries of exactly these nodes (ids compared whole), in log order."""
        found = [e for nid in dict.fromkeys(node_ids) for e in self.node_entries(nid, as_of)]
        return sorted(found, key=lambda e: e.seq)

    def get(self, entry_id: str, as_of: int | None = None) -> Entry | None:
        entry = self.lookup(entry_id)
        return entry if isinstance(entry, Entry) and entry.visible(as_of) else None

    def node_ids(self, as_of: int | None = None) -> list[str]:
        """Every node that has a visible entry, in order of first appearance."""
        return [name for name in self.collections() if name != REACT and self._any_visible(name, as_of)]

    @heals
    def entries_of(self, node_id: str) -> list[Entry]:
        """All of a node's entries, visible or not, in log order."""
        return self._items(node_id, None, every=True) if node_id != REACT else []  # type: ignore[return-value]

    @heals
    def every_step(self) -> list[Step]:
        """The whole ReAct trace, visible or not, in log order."""
        return self._items(REACT, None, every=True)  # type: ignore[return-value]

    @heals
    def steps_as_of(self, as_of: int | None = None) -> list[Step]:
        """The visible ReAct steps in log order."""
        return self._items(REACT, as_of)  # type: ignore[return-value]

    def context(self, as_of: int | None = None) -> Seed | None:
        """The latest core seed at or before ``as_of`` that no purge hid since."""
        limit = NEVER if as_of is None else as_of
        purged = max((p for p in self.purges if p <= limit), default=0)
        seeds = [s for s in self.seeds if purged < s.seq <= limit]
        return seeds[-1] if seeds else None

    def lineage(self, node_id: str) -> list[str]:
        """Root→node ids from the recorded tree (the node's scope is this minus itself)."""
        info = self.nodes.get(node_id)
        return [*info.ancestor_ids, node_id] if info else [node_id]


_APPLY: PerEventType[Callable[[Catalog, Event], None]] = handlers(
    "Catalog.apply",
    {
        "memory_added": Catalog._row,
        "react_step": Catalog._row,
        "node_cleared": Catalog._clear,
        "checkpoint_purged": Catalog._purge,
        "node_started": Catalog._node,
        "core_seeded": Catalog._seed,
        "events_redacted": Catalog._redaction,
    },
)


class EntryMap(Mapping[str, Entry]):
    """``catalog.entries``: id → Entry (visible or not), decoded on demand; iterates in seq order."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def __getitem__(self, entry_id: str) -> Entry:
        entry = self._catalog.lookup(entry_id) if isinstance(entry_id, str) else None
        if not isinstance(entry, Entry):
            raise KeyError(entry_id)
        return entry

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and isinstance(self._catalog.lookup(entry_id), Entry)

    def __iter__(self) -> Iterator[str]:
        return (e.entry_id for e in self._catalog.scan_entries())

    def __len__(self) -> int:
        return sum(self._catalog.count(n) for n in self._catalog.collections() if n != REACT)

    def values(self) -> Iterator[Entry]:  # type: ignore[override]
        return self._catalog.scan_entries()

    def items(self) -> Iterator[tuple[str, Entry]]:  # type: ignore[override]
        return ((e.entry_id, e) for e in self._catalog.scan_entries())


class ByNode(Mapping[str, list[Entry]]):
    """``catalog.by_node``: node → all its entries (visible or not), in order of first appearance."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def __getitem__(self, node_id: str) -> list[Entry]:
        if node_id not in self:
            raise KeyError(node_id)
        return self._catalog.entries_of(node_id)

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, str) and node_id != REACT and self._catalog.count(node_id) > 0

    def __iter__(self) -> Iterator[str]:
        return (n for n in self._catalog.collections() if n != REACT)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class StepList(Sequence[Step]):
    """``catalog.steps``: the whole ReAct trace (visible or not) in log order, decoded on demand."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def __len__(self) -> int:
        return self._catalog.count(REACT)

    def __getitem__(self, index):
        return self._catalog.every_step()[index]

    def __iter__(self) -> Iterator[Step]:
        return iter(self._catalog.every_step())
