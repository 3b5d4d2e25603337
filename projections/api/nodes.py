"""Node-scope memory: ARI's add, search, get, clear, list and purge.

A node writes only its own memory (copy-on-write: ARI's refusals, word for word); it reads
exactly its ancestors' (ids compared whole), ranked by the engine's semantic order and the
lexical channel fused (``projections.models.fusion``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ledger import CopyOnWriteViolation, InvalidInput, config
from ledger.events import CHECKPOINT_NODE, check_text
from projections.access.log import ReadTool
from projections.api import checks
from projections.api.session import Session
from projections.engines.embedded import EmbeddedEngine
from projections.models.catalog import Catalog
from projections.models.fused_scope import fuse_scope
from projections.models.fusion import POOL, fuse
from projections.models.shapes import AddResult, ByNode, ClearResult, NodeMemory, PurgeResult, SearchResult, StartResult
from projections.models.views import entry_view

DEFAULT_LIMIT = 5


class Nodes:
    """The node-scope half of ARI's backend."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def start(
        self,
        node_id: str,
        parent_id: str | None,
        ancestor_ids: Iterable[str],
        label: str,
        depth: int | None,
        eval_summary: str | None,
        current_node: str | None,
    ) -> StartResult:
        """Record a node of the tree. ARI never calls this; the lineage is also learned from
        the node reports consolidation reads."""
        ancestors = list(ancestor_ids)
        if node_id in ancestors:
            raise InvalidInput("ancestor_ids", f"lists {node_id!r} itself")
        body: dict[str, Any] = {
            "parent_id": parent_id,
            "ancestor_ids": ancestors,
            "label": label,
            "depth": len(ancestors) if depth is None else depth,
        }
        if eval_summary is not None:
            body["eval_summary"] = eval_summary
        try:
            event = self.session.append(node_id, "node_started", body, current_node)
        except CopyOnWriteViolation as exc:
            return self.session.refused("start_node", exc, current_node)
        self.session.access.record("start", "start_node", node=current_node, entry_id=event.id, seq=event.seq)
        return {"ok": True, "id": event.id, "seq": event.seq}

    def add(self, node_id: str, body: dict[str, Any], tool: str, current_node: str | None) -> AddResult:
        """Append one entry (free text, or typed by its metadata); CoW-guarded."""
        try:
            event = self.session.append(node_id, "memory_added", body, current_node)
        except CopyOnWriteViolation as exc:
            return self.session.refused(tool, exc, current_node)
        stored = event.body
        result: AddResult = {"ok": True, "id": event.id, "seq": event.seq}
        extra = {"findings": stored["findings"]} if stored.get("findings") else {}
        self.session.access.write(
            "node_scope",
            event.id,
            stored["text"],
            stored.get("metadata", {}),
            tool=tool,
            node=current_node,
            seq=event.seq,
            **extra,
        )
        if extra:
            result["findings"] = stored["findings"]
        return result

    def search(self, query: str, ancestor_ids: list[str], limit: int, as_of: int | None) -> SearchResult:
        check_text(query, "query")
        scope, limit = checks.node_ids(ancestor_ids), checks.limit(limit)
        if not scope:
            return {"results": []}
        with self.session.reading() as catalog:
            hits = self._ranked(catalog, query, scope, limit, as_of) if limit else []
            results = [{**entry_view(catalog.entries[entry_id]), "score": score} for entry_id, score in hits]
            stamp = self.session.read_stamp(as_of)
        self.session.access.node_search(query, scope, limit, results, tool=ReadTool.SEARCH_MEMORY, as_of=as_of, **stamp)
        return {"results": results}  # type: ignore[typeddict-item]

    def _ranked(
        self, catalog: Catalog, query: str, scope: list[str], limit: int, as_of: int | None
    ) -> list[tuple[str, float]]:
        """The engine's semantic best and the lexical channel's, fused (``projections.models.fusion``)."""
        lexical, engine = self.session.lexical, self.session.engine
        if isinstance(engine, EmbeddedEngine):  # both channels as arrays (a Protocol's check costs 60 µs)
            ranked = lexical.ranked(catalog, query, scope, as_of, max(limit, POOL))
            winners = fuse_scope(query, engine.scope_rows(query, scope, as_of), ranked, scope[-1], limit)
            if winners is not None:
                for winner in winners:  # the entries are read next: where the stored ones are
                    if winner.row is not None:
                        catalog.remember(winner.id, winner.collection, winner.row)
                return [(w.id, w.score) for w in winners]
        semantic = engine.search(query, scope, max(limit, POOL), as_of)
        matches = lexical.scores(catalog, query, scope, as_of, max(limit, POOL))
        return fuse(
            query,
            semantic,
            matches.scores,
            matches.about,
            scope[-1],
            limit,
            matches.coverage,
        )

    def get(self, node_id: str, as_of: int | None) -> NodeMemory:
        with self.session.reading() as catalog:
            entries = [entry_view(e) for e in catalog.node_entries(node_id, as_of)]
            stamp = self.session.read_stamp(as_of)
        self.session.access.read(
            "node_scope",
            "inherit:get_node_memory",
            [node_id],
            len(entries),
            [{"src_node_id": node_id, "entry_id": e["entry_id"], "type": e["metadata"].get("type")} for e in entries],
            tool=ReadTool.GET_NODE_MEMORY,
            as_of=as_of,
            **stamp,
        )
        return {"entries": entries}

    def clear(self, node_id: str, current_node: str | None) -> ClearResult:
        """Tombstone the node's entries (self only, CoW); the log keeps them."""
        with self.session.reading() as catalog:
            visible = len(catalog.node_entries(node_id))
            try:
                event = self.session.append(node_id, "node_cleared", {}, current_node)
            except CopyOnWriteViolation as exc:
                self.session.refused("clear_node_memory", exc, current_node)
                return {"removed": 0, "error": exc.message}  # ARI's refusal of a clear
        self.session.access.record(
            "clear", "clear_node_memory", node=current_node, entry_id=event.id, seq=event.seq, removed=visible
        )
        return {"removed": visible}

    def list_all(self, as_of: int | None) -> ByNode:
        with self.session.reading() as catalog:
            return {
                "by_node": {
                    nid: [entry_view(e) for e in catalog.node_entries(nid, as_of)] for nid in catalog.node_ids(as_of)
                }
            }

    def bulk_get(self, node_ids: list[str], as_of: int | None) -> ByNode:
        ids = checks.node_ids(node_ids, "node_ids")
        with self.session.reading() as catalog:
            by_node = {nid: [entry_view(e) for e in catalog.node_entries(nid, as_of)] for nid in dict.fromkeys(ids)}
        self.session.access.read(
            "node_scope",
            "inherit:bulk_get_node_memory",
            ids,
            sum(len(v) for v in by_node.values()),
            [{"src_node_id": nid, "count": len(by_node[nid])} for nid in by_node],
            tool="bulk_get_node_memory",
            as_of=as_of,
        )
        return {"by_node": by_node}

    def purge(self) -> PurgeResult:
        """ARI's purge: hide every entry, ReAct step and the core seed with one tombstone."""
        with self.session.reading() as catalog:
            removed_node = sum(1 for e in catalog.entries.values() if e.visible(None))
            removed_react = len(catalog.steps_as_of())
            if removed_node or removed_react or catalog.context() is not None:
                event = self.session.append(config.current_node() or CHECKPOINT_NODE, "checkpoint_purged", {})
                self.session.access.record(
                    "purge",
                    "purge_checkpoint",
                    entry_id=event.id,
                    seq=event.seq,
                    removed_node=removed_node,
                    removed_react=removed_react,
                )
        return {"removed_node": removed_node, "removed_react": removed_react}

    def info(self, node_id: str) -> dict[str, Any] | None:
        """The node as the tree recorded it (parent, ancestors, label, depth, eval_summary), or None."""
        with self.session.reading() as catalog:
            node = catalog.nodes.get(node_id)
            if node is None:
                return None
            return {
                "node_id": node.node_id,
                "parent_id": node.parent_id,
                "ancestor_ids": list(node.ancestor_ids),
                "label": node.label,
                "depth": node.depth,
                "eval_summary": node.eval_summary,
                "seq": node.seq,
            }

    def since(self, node_id: str) -> int | None:
        """The seq of the node's first event (its ``node_started`` or first entry), or None."""
        with self.session.reading() as catalog:
            return catalog.node_since(node_id)

    def lineage(self, node_id: str) -> list[str] | None:
        """Root→node from the recorded tree; None for a node this checkpoint does not know."""
        with self.session.reading() as catalog:
            if node_id not in catalog.nodes and node_id not in catalog.by_node:
                return None
            return catalog.lineage(node_id)
