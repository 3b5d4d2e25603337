"""The catalog projection: every entry, node, ReAct step and core seed, foldable as of any seq.

Nothing is removed when folding: a ``node_cleared`` tombstone stamps the node's earlier
entries with the seq that hid them, so a read "as of seq N" (R29) sees exactly what a
node saw when it ran, and the current view hides them.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

import msgspec

from ledger.events import Event
from ledger.typed import kind_label, typed_kind

NEVER = 2**62  # cleared_at of an entry no tombstone has hidden


def event_time(event: Event) -> float:
    """An entry's ``ts`` as ARI gives it: float seconds — the original time of an imported
    entry, else when the event was appended."""
    origin = event.body.get("origin") or {}
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
    """Everything the catalog holds, as stored in the snapshot."""

    entries: list[Entry] = []
    nodes: list[NodeInfo] = []
    steps: list[Step] = []
    seeds: list[Seed] = []
    purges: list[int] = []


class Catalog:
    """Fold of the log into entries by node, the node tree, the ReAct trace and core seeds."""

    def __init__(self, state: CatalogState | None = None) -> None:
        state = state or CatalogState()
        self.entries: dict[str, Entry] = {}
        self.by_node: dict[str, list[Entry]] = {}
        for entry in state.entries:
            self._add(entry)
        self.nodes: dict[str, NodeInfo] = {n.node_id: n for n in state.nodes}
        self.steps: list[Step] = list(state.steps)
        self.seeds: list[Seed] = list(state.seeds)
        self.purges: list[int] = list(state.purges)

    def state(self) -> CatalogState:
        return CatalogState(list(self.entries.values()), list(self.nodes.values()), self.steps, self.seeds, self.purges)

    # -- folding ---------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        body = event.body
        if event.type == "memory_added":
            entry = Entry(event.id, event.node, event.seq, event_time(event), body, typed_kind(body.get("metadata", {})))
            self._add(entry)
        elif event.type == "node_cleared":
            for entry in self.by_node.get(event.node, ()):
                if entry.cleared_at == NEVER:
                    entry.cleared_at = event.seq
        elif event.type == "checkpoint_purged":
            for item in (*self.entries.values(), *self.steps):
                if item.cleared_at == NEVER:
                    item.cleared_at = event.seq
            self.purges.append(event.seq)
        elif event.type == "node_started":
            self.nodes.setdefault(
                event.node,
                NodeInfo(
                    event.node,
                    event.seq,
                    body.get("parent_id"),
                    body.get("ancestor_ids", []),
                    body.get("label", "other"),
                    body.get("depth", 0),
                    body.get("eval_summary"),
                ),
            )
        elif event.type == "react_step":
            self.steps.append(Step(event.id, event.node, event.seq, event_time(event), body["content"], body.get("metadata", {})))
        elif event.type == "core_seeded":
            seed = Seed(event.seq, body.get("persona", ""), body.get("human", ""), body.get("context", {}), event_time(event))
            self.seeds.append(seed)

    def _add(self, entry: Entry) -> None:
        self.entries[entry.entry_id] = entry
        self.by_node.setdefault(entry.node_id, []).append(entry)

    # -- queries ---------------------------------------------------------------------

    def node_entries(self, node_id: str, as_of: int | None = None) -> list[Entry]:
        """The node's visible entries in log order."""
        return [e for e in self.by_node.get(node_id, ()) if e.visible(as_of)]

    def scope_entries(self, node_ids: Iterable[str], as_of: int | None = None) -> list[Entry]:
        """Visible entries of exactly these nodes (ids compared whole), in log order."""
        found = [e for nid in dict.fromkeys(node_ids) for e in self.node_entries(nid, as_of)]
        return sorted(found, key=lambda e: e.seq)

    def get(self, entry_id: str, as_of: int | None = None) -> Entry | None:
        entry = self.entries.get(entry_id)
        return entry if entry is not None and entry.visible(as_of) else None

    def node_ids(self, as_of: int | None = None) -> list[str]:
        """Every node that has a visible entry, in order of first appearance."""
        return [nid for nid, entries in self.by_node.items() if any(e.visible(as_of) for e in entries)]

    def steps_as_of(self, as_of: int | None = None) -> list[Step]:
        """The visible ReAct steps in log order."""
        return [s for s in self.steps if s.visible(as_of)]

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
