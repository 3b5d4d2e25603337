"""ARI's memory API over one checkpoint: writes go to the ledger, reads come from projections.

Method names and return shapes are ARI's (``add_memory``, ``search_memory``, …) so ARI's
hooks can call this library instead of its memory skill. Every read first folds whatever
the log gained since the last read, from this process or another, so reads see every
acknowledged write.
"""
from __future__ import annotations

import atexit
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Protocol

from ledger import CopyOnWriteViolation, InvalidInput, Ledger, config
from ledger.events import CHECKPOINT_NODE, Event, check_text

from .access_log import AccessLog
from .audit import AuditMixin
from .catalog import Entry, Step
from .projector import Projector
from .research import ResearchMemory
from .verified import VerifiedContextMixin
from .working import WorkingContextMixin

DEFAULT_LIMIT = 5


class SearchEngine(Protocol):
    """Where semantic search runs: the embedded index, or a Letta server."""

    name: str

    def search(self, query: str, node_ids: list[str], limit: int, as_of: int | None) -> list[tuple[str, float]]: ...

    def react_search(self, query: str, limit: int, as_of: int | None) -> list[tuple[str, float]]: ...

    def lag(self) -> int: ...

    def health(self) -> dict[str, Any]: ...


class EmbeddedEngine:
    """The default engine: the local semantic index, no server."""

    name = "embedded"

    def __init__(self, projector: Projector) -> None:
        self.projector = projector

    def search(self, query: str, node_ids: list[str], limit: int, as_of: int | None) -> list[tuple[str, float]]:
        vector = self.projector.embedder.embed([query])[0]
        return self.projector.index.search(vector, node_ids, limit, as_of)

    def react_search(self, query: str, limit: int, as_of: int | None) -> list[tuple[str, float]]:
        from .semantic import REACT

        vector = self.projector.embedder.embed([query])[0]
        return self.projector.index.search(vector, [REACT], limit, as_of)

    def lag(self) -> int:
        return self.projector.lag()

    def health(self) -> dict[str, Any]:
        return {}


def entry_dict(entry: Entry) -> dict[str, Any]:
    """An entry in ARI's shape (plus ``kind``, None for free text)."""
    return {
        "entry_id": entry.entry_id,
        "node_id": entry.node_id,
        "text": entry.text,
        "metadata": entry.body.get("metadata", {}),
        "kind": entry.kind,
        "ts": entry.ts,
    }


def step_dict(step: Step) -> dict[str, Any]:
    return {"entry_id": step.step_id, "content": step.content, "metadata": step.metadata, "ts": step.ts}


class MemoryBackend(ResearchMemory, VerifiedContextMixin, AuditMixin, WorkingContextMixin):
    """One checkpoint's memory. Get it with :func:`get_backend`.

    The base class holds ARI's node-scope API; the mixins add the typed research layer
    (``research``), verified context (``verified``), audit and working context.
    """

    def __init__(self, checkpoint_dir: str | Path, *, embedder=None) -> None:
        from .embedder import get_embedder

        checkpoint_dir = Path(checkpoint_dir)
        self.checkpoint_dir = checkpoint_dir
        self.ledger = Ledger.open(checkpoint_dir)
        self.projector = Projector(self.ledger, embedder or get_embedder())
        self.engine: SearchEngine = EmbeddedEngine(self.projector)
        if config.letta_base_url():
            from .letta import LettaEngine

            self.engine = LettaEngine(self.projector, self.engine)
        self.access = AccessLog(checkpoint_dir)
        self._lock = threading.RLock()

    def close(self) -> None:
        """Save the projection snapshot and close the log."""
        with self._lock:
            if self.projector._unsaved:
                self.projector.save()
            self.ledger.close()

    # -- plumbing --------------------------------------------------------------------

    def _read(self) -> None:
        """Fold what the log gained (read-your-writes, across processes)."""
        self.projector.catch_up()

    def _write(self, node_id: str, type: str, body: dict, current_node: str | None = None) -> Event:
        event = self.ledger.append(node_id, type, body, current_node=current_node)
        self.projector.catch_up()
        return event

    @staticmethod
    def _limit(limit: object, field: str = "limit") -> int:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInput(field, f"must be a non-negative integer, got {limit!r}")
        return limit

    @staticmethod
    def _node_ids(ids: object, field: str = "ancestor_ids") -> list[str]:
        if isinstance(ids, str) or not isinstance(ids, (list, tuple)):
            raise InvalidInput(field, "must be a list of node ids")
        for i, nid in enumerate(ids):
            if not isinstance(nid, str):
                raise InvalidInput(f"{field}[{i}]", "must be a string")
        return list(ids)

    # -- node scope --------------------------------------------------------------------

    def start_node(
        self,
        node_id: str,
        parent_id: str | None = None,
        ancestor_ids: Iterable[str] = (),
        label: str = "other",
        depth: int | None = None,
        eval_summary: str | None = None,
        *,
        current_node: str | None = None,
    ) -> dict[str, Any]:
        """Record a node of the tree (the loop's node-start hook)."""
        ancestors = list(ancestor_ids)
        if node_id in ancestors:
            raise InvalidInput("ancestor_ids", f"lists {node_id!r} itself")
        body = {"parent_id": parent_id, "ancestor_ids": ancestors, "label": label, "depth": len(ancestors) if depth is None else depth}
        if eval_summary is not None:
            body["eval_summary"] = eval_summary
        with self._lock:
            try:
                event = self._write(node_id, "node_started", body, current_node)
            except CopyOnWriteViolation as exc:
                self.access.record("start_node", [], node=current_node, refused=exc.message)
                return exc.as_dict()
        self.access.record("start_node", [event.id], node=current_node)
        return {"ok": True, "id": event.id, "seq": event.seq}

    def add_memory(self, node_id: str, text: str, metadata: dict | None = None, *, current_node: str | None = None) -> dict[str, Any]:
        """Add a free-text node-scope entry; CoW-guarded."""
        return self._add_entry(node_id, {"text": text, "metadata": metadata or {}}, "add_memory", current_node)

    def _add_entry(self, node_id: str, body: dict, tool: str, current_node: str | None) -> dict[str, Any]:
        with self._lock:
            try:
                event = self._write(node_id, "memory_added", body, current_node)
            except CopyOnWriteViolation as exc:
                self.access.record(tool, [], node=current_node, refused=exc.message)
                return exc.as_dict()
        self.access.record(tool, [event.id], node=current_node)
        return {"ok": True, "id": event.id}

    def search_memory(self, query: str, ancestor_ids: list[str], limit: int = DEFAULT_LIMIT, *, as_of: int | None = None) -> dict[str, Any]:
        """Entries of exactly ``ancestor_ids``, ranked by semantic similarity to ``query``."""
        check_text(query, "query")
        scope, limit = self._node_ids(ancestor_ids), self._limit(limit)
        with self._lock:
            self._read()
            hits = self.engine.search(query, scope, limit, as_of) if scope and limit else []
            catalog = self.projector.catalog
            results = []
            for entry_id, score in hits:
                entry = catalog.entries[entry_id]
                results.append({**entry_dict(entry), "score": score})
        self.access.record("search_memory", [r["entry_id"] for r in results], scope=scope, as_of=as_of)
        return {"results": results}

    def get_node_memory(self, node_id: str, *, as_of: int | None = None) -> dict[str, Any]:
        with self._lock:
            self._read()
            entries = [entry_dict(e) for e in self.projector.catalog.node_entries(node_id, as_of)]
        self.access.record("get_node_memory", [e["entry_id"] for e in entries], target=node_id)
        return {"entries": entries}

    def clear_node_memory(self, node_id: str, *, current_node: str | None = None) -> dict[str, Any]:
        """Tombstone the node's entries (self only, CoW); the log keeps them."""
        with self._lock:
            self._read()
            visible = len(self.projector.catalog.node_entries(node_id))
            try:
                event = self._write(node_id, "node_cleared", {}, current_node)
            except CopyOnWriteViolation as exc:
                self.access.record("clear_node_memory", [], node=current_node, refused=exc.message)
                return exc.as_dict()
        self.access.record("clear_node_memory", [event.id], node=current_node, removed=visible)
        return {"removed": visible}

    def list_all_nodes(self, *, as_of: int | None = None) -> dict[str, Any]:
        with self._lock:
            self._read()
            catalog = self.projector.catalog
            by_node = {nid: [entry_dict(e) for e in catalog.node_entries(nid, as_of)] for nid in catalog.node_ids(as_of)}
        self.access.record("list_all_nodes", list(by_node))
        return {"by_node": by_node}

    def bulk_get_node_memory(self, node_ids: list[str], *, as_of: int | None = None) -> dict[str, Any]:
        ids = self._node_ids(node_ids, "node_ids")
        with self._lock:
            self._read()
            catalog = self.projector.catalog
            by_node = {nid: [entry_dict(e) for e in catalog.node_entries(nid, as_of)] for nid in dict.fromkeys(ids)}
        self.access.record("bulk_get_node_memory", [e["entry_id"] for es in by_node.values() for e in es])
        return {"by_node": by_node}

    # -- ReAct trace -------------------------------------------------------------------

    def react_add(self, content: str, metadata: dict | None = None) -> dict[str, Any]:
        node = config.current_node() or CHECKPOINT_NODE
        with self._lock:
            event = self._write(node, "react_step", {"content": content, "metadata": metadata or {}})
        self.access.record("react_add", [event.id])
        return {"ok": True, "id": event.id}

    def react_search(self, query: str, limit: int = 10, *, as_of: int | None = None) -> dict[str, Any]:
        check_text(query, "query")
        limit = self._limit(limit)
        with self._lock:
            self._read()
            hits = self.engine.react_search(query, limit, as_of) if limit else []
            steps = {s.step_id: s for s in self.projector.catalog.steps_as_of(as_of)}
            results = [{**step_dict(steps[sid]), "score": score} for sid, score in hits]
        self.access.record("react_search", [r["entry_id"] for r in results])
        return {"results": results}

    def react_get_all(self, *, as_of: int | None = None) -> dict[str, Any]:
        with self._lock:
            self._read()
            entries = [step_dict(s) for s in self.projector.catalog.steps_as_of(as_of)]
        self.access.record("react_get_all", [e["entry_id"] for e in entries])
        return {"entries": entries}

    # -- experiment context ------------------------------------------------------------

    def seed_core_memory(self, persona: str, human: str, context: dict | None = None) -> dict[str, Any]:
        """Seed the experiment context (goal, primary metric, hardware, …) once it is known."""
        node = config.current_node() or CHECKPOINT_NODE
        with self._lock:
            event = self._write(node, "core_seeded", {"persona": persona, "human": human, "context": context or {}})
        self.access.record("seed_core_memory", [event.id])
        return {"ok": True, "id": event.id}

    def get_experiment_context(self, *, as_of: int | None = None) -> dict[str, Any]:
        """The seeded context, ``{}`` before the seed; no search cost."""
        with self._lock:
            self._read()
            seed = self.projector.catalog.context(as_of)
        return dict(seed.context) if seed else {}

    # -- health ----------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        started = time.perf_counter()
        with self._lock:
            self._read()
            extra = self.engine.health()
            lag = self.engine.lag()
            events = self.ledger.last_seq
        return {
            "ok": True,
            "backend": self.engine.name,
            "latency_ms": round((time.perf_counter() - started) * 1000, 3),
            "events": events,
            "lag": lag,
            **extra,
        }


_backends: dict[Path, MemoryBackend] = {}
_backends_lock = threading.Lock()


def get_backend(checkpoint_dir: str | Path | None = None) -> MemoryBackend:
    """The backend of a checkpoint (``ARI_CHECKPOINT_DIR`` when not given), one per process."""
    path = Path(checkpoint_dir) if checkpoint_dir is not None else config.checkpoint_dir()
    if path is None:
        raise InvalidInput("checkpoint_dir", "not given and ARI_CHECKPOINT_DIR is not set")
    key = path.resolve()
    with _backends_lock:
        backend = _backends.get(key)
        if backend is None or backend.ledger.closed:
            backend = _backends[key] = MemoryBackend(key)
        return backend


@atexit.register
def _close_all() -> None:
    """Leave an up-to-date snapshot behind so the next process folds only the tail."""
    for backend in list(_backends.values()):
        try:
            backend.close()
        except Exception:  # noqa: BLE001 - best effort at exit; the log is already durable
            pass
    _backends.clear()
