"""ARI's memory API over one checkpoint: writes go to the ledger, reads come from projections.

This is ARI's ``MemoryBackend`` contract (``ari_skill_memory.backends.base``) with ARI's method
names, argument names and return shapes, so ARI's hooks, ``ari resume``, ``ari memory
backup/restore`` and ARI's own tests work on it unchanged. This library's additions (entry
ids and ``seq`` in results, ``as_of=`` time travel, ``findings``, ``current_node=``) are
extra keys and keyword-only arguments, never replacements.

Every read first folds whatever the log gained since the last read, from this process or
another, so reads see every acknowledged write. Once an event is durable the call succeeds:
work after it (folding, the access log, a snapshot save) can only leave a warning in
``health()``, never turn a saved write into a reported failure.
"""
from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ledger import ConfigurationError, CopyOnWriteViolation, InvalidInput, Ledger, config
from ledger.ari_import import ARI_KINDS, Planned, entry_key, plan_entries, seed_key, step_key, step_node
from ledger.events import CHECKPOINT_NODE, TRUNCATED, Event, check_text

from projections.api.access_log import AccessLog
from projections.api.audit import AuditMixin
from projections.models.catalog import Entry, Step
from projections.engines.embedded import EmbeddedEngine
from projections.engines.local import Projector
from projections.engines.protocol import SearchEngine
from projections.api.research import ResearchMemory
from projections.api.verified import VerifiedContextMixin
from projections.api.working import WorkingContextMixin

log = logging.getLogger("projections")

DEFAULT_LIMIT = 5
IMPORT_BATCH = 1000
MAX_PROBLEMS = 20


def entry_dict(entry: Entry) -> dict[str, Any]:
    """An entry in ARI's shape (``entry_id``, ``text``, ``metadata``, ``ts`` float seconds) plus
    this library's ``node_id``, ``kind``, ``seq`` and, when there are any, ``findings``."""
    out = {
        "entry_id": entry.entry_id,
        "node_id": entry.node_id,
        "text": entry.text,
        "metadata": entry.metadata,
        "ts": entry.ts,
        "kind": entry.kind,
        "seq": entry.seq,
    }
    if entry.findings:
        out["findings"] = entry.findings
    return out


def step_dict(step: Step) -> dict[str, Any]:
    """A ReAct step in ARI's shape (``id``, ``content``, ``metadata``, ``ts``) plus ``seq``."""
    return {"id": step.step_id, "content": step.content, "metadata": step.metadata, "ts": step.ts,
            "entry_id": step.step_id, "node_id": step.node_id, "seq": step.seq}


def _version() -> str:
    try:
        return f"ari-memory-ledger {version('ari-memory-ledger')}"
    except PackageNotFoundError:
        return "ari-memory-ledger (source)"


def checkpoint_hash(checkpoint_dir: Path) -> str:
    """ARI's namespace of a checkpoint: ``sha1(str(resolved path))[:12]`` (Letta agent names)."""
    import hashlib

    return hashlib.sha1(str(Path(checkpoint_dir).resolve()).encode()).hexdigest()[:12]


class MemoryBackend(ResearchMemory, VerifiedContextMixin, AuditMixin, WorkingContextMixin):
    """One checkpoint's memory. Get it with :func:`get_backend`.

    The base class holds ARI's ``MemoryBackend`` contract; the mixins add the typed research
    layer (``research``), verified context (``verified``), audit and working context.
    """

    def __init__(self, checkpoint_dir: str | Path, *, embedder=None, readonly: bool = False) -> None:
        """Open a checkpoint's memory (created when missing).

        ``readonly=True`` opens an existing checkpoint only to read it (a person's ``search``):
        nothing in the directory changes — no recovery, no snapshot, no access log. On a
        read-only filesystem the backend falls back to that by itself; writes then raise
        ``LedgerReadOnly`` saying why.
        """
        from projections.models.embedder import get_embedder

        checkpoint_dir = Path(checkpoint_dir)
        self.checkpoint_dir = checkpoint_dir
        self.namespace = checkpoint_hash(checkpoint_dir)
        if readonly:
            self.ledger = Ledger.open(checkpoint_dir, create=False, readonly=True)
        else:
            self.ledger = Ledger.open(checkpoint_dir, readonly_fallback=True)
        self.projector = Projector(self.ledger, embedder or get_embedder())
        self.engine: SearchEngine = EmbeddedEngine(self.projector)
        if config.letta_base_url():
            from projections.engines.letta import LettaEngine

            self.engine = LettaEngine(self.projector, self.engine)
        self.access = AccessLog(checkpoint_dir, muted=self.ledger.readonly)
        self.problems: list[str] = []  # what failed after a write was already durable
        self._lock = threading.RLock()

    @property
    def _access(self) -> AccessLog:
        """ARI's name for the access log (ARI's tests drain it with ``_access.flush_and_close()``)."""
        return self.access

    @property
    def closed(self) -> bool:
        return self.ledger.closed

    def close(self) -> None:
        """Save the projection snapshot and close the log (a failed save is only a warning)."""
        with self._lock:
            if self.ledger.closed:
                return
            if self.projector._unsaved:
                self._after_durable("saving the projection snapshot", self.projector.save)
            self.access.flush_and_close()
            self.ledger.close()

    # -- plumbing --------------------------------------------------------------------

    def _read(self) -> None:
        """Fold what the log gained (read-your-writes, across processes)."""
        self.projector.catch_up()

    def _write(self, node_id: str, type: str, body: dict, current_node: str | None = None) -> Event:
        """Append one event; once it is durable nothing after it can fail the call."""
        event = self.ledger.append(node_id, type, body, current_node=current_node)
        self._after_durable("folding the new event", self.projector.catch_up)
        return event

    def _after_durable(self, what: str, work) -> None:
        """Run work that follows a durable write; a failure becomes a problem in ``health()``."""
        try:
            work()
        except Exception as exc:  # noqa: BLE001 - the event is durable: report, never fail the write
            problem = f"{what} failed: {type(exc).__name__}: {exc}"[:300]
            self.problems = [*self.problems[-(MAX_PROBLEMS - 1):], problem]
            log.warning("%s (the log holds the event; the next read retries)", problem)

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

    @staticmethod
    def _metadata(metadata: object, field: str = "metadata") -> dict[str, Any]:
        if metadata is None:
            return {}
        if not isinstance(metadata, Mapping):
            raise InvalidInput(field, f"must be an object (a dict) or None, got {type(metadata).__name__}")
        return dict(metadata)

    def _refused(self, tool: str, exc: CopyOnWriteViolation, current_node: str | None) -> None:
        self.access.record("refused", tool, node=current_node, error=exc.message)

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
        """Record a node of the tree. ARI never calls this; the lineage is also learned from
        the node reports that consolidation reads."""
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
                self._refused("start_node", exc, current_node)
                return exc.as_dict()
        self.access.record("start", "start_node", node=current_node, entry_id=event.id, seq=event.seq)
        return {"ok": True, "id": event.id, "seq": event.seq}

    def add_memory(self, node_id: str, text: str, metadata: dict | None = None, *, current_node: str | None = None) -> dict[str, Any]:
        """Add a node-scope entry; only the current node may write its own memory (CoW).

        Typed entries written by ARI's writer (``metadata`` with ``mem_kind``, refs, …) are
        typed entries here too; what is wrong with them is recorded as ``findings``.
        """
        return self._add_entry(node_id, {"text": text, "metadata": self._metadata(metadata)}, "add_memory", current_node)

    def _add_entry(self, node_id: str, body: dict, tool: str, current_node: str | None) -> dict[str, Any]:
        with self._lock:
            try:
                event = self._write(node_id, "memory_added", body, current_node)
            except CopyOnWriteViolation as exc:
                self._refused(tool, exc, current_node)
                return exc.as_dict()
        stored = event.body
        extra = {"findings": stored["findings"]} if stored.get("findings") else {}
        self.access.write("node_scope", event.id, stored["text"], stored.get("metadata", {}), tool=tool, node=current_node, seq=event.seq, **extra)
        return {"ok": True, "id": event.id, "seq": event.seq, **extra}

    def search_memory(self, query: str, ancestor_ids: list[str], limit: int = DEFAULT_LIMIT, *, as_of: int | None = None) -> dict[str, Any]:
        """Entries of exactly ``ancestor_ids``, ranked by semantic similarity to ``query``."""
        check_text(query, "query")
        scope, limit = self._node_ids(ancestor_ids), self._limit(limit)
        if not scope:
            return {"results": []}
        with self._lock:
            self._read()
            hits = self.engine.search(query, scope, limit, as_of) if limit else []
            entries = self.projector.catalog.entries
            results = [{**entry_dict(entries[entry_id]), "score": score} for entry_id, score in hits]
        self.access.read(
            "node_scope", query, scope, limit,
            [{"entry_id": r["entry_id"], "src_node_id": r["node_id"], "score": r["score"]} for r in results],
            tool="search_memory", as_of=as_of,
        )
        return {"results": results}

    def get_node_memory(self, node_id: str, *, as_of: int | None = None) -> dict[str, Any]:
        """A node's entries in log order (ARI's deterministic ancestor-inheritance read)."""
        with self._lock:
            self._read()
            entries = [entry_dict(e) for e in self.projector.catalog.node_entries(node_id, as_of)]
        self.access.read(
            "node_scope", "inherit:get_node_memory", [node_id], len(entries),
            [{"src_node_id": node_id, "entry_id": e["entry_id"], "type": e["metadata"].get("type")} for e in entries],
            tool="get_node_memory", as_of=as_of,
        )
        return {"entries": entries}

    def clear_node_memory(self, node_id: str, *, current_node: str | None = None) -> dict[str, Any]:
        """Tombstone the node's entries (self only, CoW); the log keeps them."""
        with self._lock:
            self._read()
            visible = len(self.projector.catalog.node_entries(node_id))
            try:
                event = self._write(node_id, "node_cleared", {}, current_node)
            except CopyOnWriteViolation as exc:
                self._refused("clear_node_memory", exc, current_node)
                return {"removed": 0, "error": exc.message}
        self.access.record("clear", "clear_node_memory", node=current_node, entry_id=event.id, seq=event.seq, removed=visible)
        return {"removed": visible}

    def list_all_nodes(self, *, as_of: int | None = None) -> dict[str, Any]:
        """Every node with visible entries, and its entries."""
        with self._lock:
            self._read()
            catalog = self.projector.catalog
            by_node = {nid: [entry_dict(e) for e in catalog.node_entries(nid, as_of)] for nid in catalog.node_ids(as_of)}
        return {"by_node": by_node}

    def bulk_get_node_memory(self, node_ids: list[str], *, as_of: int | None = None) -> dict[str, Any]:
        """The entries of exactly these nodes (every id requested gets a list, maybe empty)."""
        ids = self._node_ids(node_ids, "node_ids")
        with self._lock:
            self._read()
            catalog = self.projector.catalog
            by_node = {nid: [entry_dict(e) for e in catalog.node_entries(nid, as_of)] for nid in dict.fromkeys(ids)}
        self.access.read(
            "node_scope", "inherit:bulk_get_node_memory", ids, sum(len(v) for v in by_node.values()),
            [{"src_node_id": nid, "count": len(by_node[nid])} for nid in by_node],
            tool="bulk_get_node_memory", as_of=as_of,
        )
        return {"by_node": by_node}

    def purge_checkpoint(self) -> dict[str, Any]:
        """ARI's purge (``ari delete``, restore with overwrite): hide every entry, ReAct step and
        the core seed with one tombstone. The log keeps them; reads as of an earlier seq see them."""
        with self._lock:
            self._read()
            catalog = self.projector.catalog
            removed_node = sum(1 for e in catalog.entries.values() if e.visible(None))
            removed_react = len(catalog.steps_as_of())
            if removed_node or removed_react or catalog.context() is not None:
                event = self._write(config.current_node() or CHECKPOINT_NODE, "checkpoint_purged", {})
                self.access.record("purge", "purge_checkpoint", entry_id=event.id, seq=event.seq,
                                   removed_node=removed_node, removed_react=removed_react)
        return {"removed_node": removed_node, "removed_react": removed_react}

    def bulk_import(self, entries: list[dict], kind: str, *, source: str = "bulk_import") -> dict[str, Any]:
        """Import ARI entries of one kind (``node_scope``, ``react_step``, ``core_seed``).

        Idempotent: an entry whose content (node, text, metadata, ts) is already visible is
        skipped, so restoring the same backup twice, or a backup of this very checkpoint,
        adds nothing. ARI's ``ts`` is kept. All entries are checked before any is written.
        ``source`` (this library's addition) is recorded in each event's ``origin``.
        """
        planned = plan_entries(entries, kind, source=source)
        with self._lock:
            self._read()
            fresh = self._not_yet_imported(planned)
            for start in range(0, len(fresh), IMPORT_BATCH):
                with self.ledger.batch() as batch:
                    for p in fresh[start : start + IMPORT_BATCH]:
                        batch.append(p.node, p.type, p.body, current_node=p.node)
            if fresh:
                self._after_durable("folding the imported events", self.projector.catch_up)
        self.access.record("import", "bulk_import", kind=kind, imported=len(fresh), skipped=len(planned) - len(fresh))
        return {"imported": len(fresh), "kind": kind, "skipped": len(planned) - len(fresh)}

    def _not_yet_imported(self, planned: list[Planned]) -> list[Planned]:
        """The planned events whose content is not visible yet (nor earlier in the same call).

        An entry ARI gave no time matches a visible entry with the same content, whatever
        its time (each is also keyed without one), so it is imported once, not on every run.
        """
        catalog = self.projector.catalog
        seen: set[str] = set()
        nodes = {p.node for p in planned if p.type == "memory_added"}
        for nid in nodes:
            for e in catalog.node_entries(nid):
                seen.update((entry_key(nid, e.text, e.metadata, e.ts), entry_key(nid, e.text, e.metadata, None)))
        if any(p.type == "react_step" for p in planned):
            for s in catalog.steps_as_of():
                seen.update((step_key(s.content, s.metadata, s.ts), step_key(s.content, s.metadata, None)))
        seed = catalog.context()
        if seed is not None:
            seen.add(seed_key(seed.persona, seed.human, seed.context))
        fresh = []
        for p in planned:
            if p.key not in seen:
                seen.add(p.key)
                fresh.append(p)
        return fresh

    # -- ReAct trace -------------------------------------------------------------------

    def react_add(self, content: str, metadata: dict | None = None) -> dict[str, Any]:
        """Append a step to the checkpoint's flat ReAct trace (ARI returns None; the id here
        is an addition). ``ARI_REACT_MEMORY_MAX_ENTRY_CHARS`` cuts long steps as ARI does."""
        if not isinstance(content, str):
            raise InvalidInput("content", f"must be a string, got {type(content).__name__}")
        metadata = self._metadata(metadata)
        body: dict[str, Any] = {"content": content, "metadata": metadata}
        cap = config.react_max_entry_chars()
        if cap and len(content) > cap:
            body["content"] = content[:cap] + TRUNCATED
            body["findings"] = [{"field": "content", "reason": f"{len(content)} characters cut to ARI_REACT_MEMORY_MAX_ENTRY_CHARS={cap}"}]
        node = step_node(metadata, config.current_node())
        with self._lock:
            event = self._write(node, "react_step", body)
        self.access.write("react_step", event.id, event.body["content"], metadata, tool="react_add", seq=event.seq)
        return {"ok": True, "id": event.id, "seq": event.seq}

    def react_search(self, query: str, limit: int = 10, *, as_of: int | None = None) -> list[dict[str, Any]]:
        """Semantic search over the whole ReAct trace (no ancestor filter), best first."""
        check_text(query, "query")
        limit = self._limit(limit)
        with self._lock:
            self._read()
            hits = self.engine.react_search(query, limit, as_of) if limit else []
            steps = {s.step_id: s for s in self.projector.catalog.steps_as_of(as_of)}
            results = [{**step_dict(steps[sid]), "score": score} for sid, score in hits]
        self.access.read(
            "react_step", query, None, limit,
            [{"entry_id": r["id"], "src_node_id": "", "score": r["score"]} for r in results],
            tool="react_search", as_of=as_of,
        )
        return results

    def react_get_all(self, *, as_of: int | None = None) -> list[dict[str, Any]]:
        """The whole ReAct trace in order."""
        return self.list_react_entries(as_of=as_of)

    def list_react_entries(self, limit: int | None = None, *, as_of: int | None = None) -> list[dict[str, Any]]:
        """The ReAct trace in order; with ``limit``, its last ``limit`` steps (as ARI)."""
        if limit is not None:
            self._limit(limit)
        with self._lock:
            self._read()
            steps = self.projector.catalog.steps_as_of(as_of)
        if limit is not None:
            steps = steps[-limit:] if limit else []
        return [step_dict(s) for s in steps]

    # -- experiment context ------------------------------------------------------------

    def seed_core_memory(self, persona: str, human: str, context: dict | None = None) -> dict[str, Any]:
        """Seed the experiment context (goal, primary metric, hardware, …) once it is known."""
        node = config.current_node() or CHECKPOINT_NODE
        body = {"persona": persona, "human": human, "context": self._metadata(context, "context")}
        with self._lock:
            event = self._write(node, "core_seeded", body)
            seed = self.projector.catalog.context()
        seeded_at = seed.ts if seed is not None and seed.seq == event.seq else time.time()
        self.access.record("seed", "seed_core_memory", entry_id=event.id, seq=event.seq)
        return {"ok": True, "seeded_at": seeded_at, "id": event.id, "seq": event.seq}

    def get_experiment_context(self, *, as_of: int | None = None) -> dict[str, Any]:
        """The seeded context exactly as seeded, ``{}`` before the seed; no search cost."""
        with self._lock:
            self._read()
            seed = self.projector.catalog.context(as_of)
        return dict(seed.context) if seed else {}

    # -- health ----------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """ARI's health shape (``ok``, ``backend``, ``latency_ms``, ``server_version``,
        ``namespace``) plus events, projection lag and problems after durable writes."""
        started = time.perf_counter()
        with self._lock:
            self._read()
            extra = self.engine.health()
            lag = self.engine.lag()
            events = self.ledger.last_seq
        problems = [*self.problems, *self.access.problems]
        return {
            "ok": True,
            "backend": self.engine.name,
            "latency_ms": round((time.perf_counter() - started) * 1000, 3),
            "server_version": _version(),
            "namespace": self.namespace,
            "events": events,
            "lag": lag,
            "problems": problems,
            "readonly": self.ledger.readonly_reason,
            "torn_tail": self.ledger.torn_tail is not None,
            "snapshot_rebuilt": self.projector.rebuilt,
            **extra,
        }


# ---------------------------------------------------------------------------- the cache

_backends: dict[Path, MemoryBackend] = {}
_backends_lock = threading.Lock()


def get_backend(checkpoint_dir: str | Path | None = None, *, reset: bool = False) -> MemoryBackend:
    """The backend of a checkpoint, one per checkpoint per process (ARI's factory and cache).

    ``checkpoint_dir`` defaults to ``ARI_CHECKPOINT_DIR``; with neither, ConfigurationError (a
    RuntimeError, as ARI raises). ``reset=True`` closes the cached backend and opens a new one.
    """
    path = Path(checkpoint_dir).expanduser() if checkpoint_dir is not None else config.checkpoint_dir()
    if path is None:
        raise ConfigurationError("ari-memory-ledger requires ARI_CHECKPOINT_DIR (or a checkpoint_dir); there is no global memory")
    config.memory_backend()  # an unsupported ARI_MEMORY_BACKEND is refused, as ARI does
    key = path.resolve()
    with _backends_lock:
        backend = _backends.get(key)
        if reset and backend is not None:
            _close_quietly(backend)
            backend = None
        if backend is None or backend.closed:
            backend = _backends[key] = MemoryBackend(key)
        return backend


def clear_backend_cache() -> None:
    """Close and forget every cached backend (ARI's test and CLI helper)."""
    with _backends_lock:
        for backend in list(_backends.values()):
            _close_quietly(backend)
        _backends.clear()


def _close_quietly(backend: MemoryBackend) -> None:
    try:
        backend.close()
    except Exception as exc:  # noqa: BLE001 - closing saves a cache; the log is already durable
        log.warning("closing the backend of %s: %s", backend.checkpoint_dir, exc)


@atexit.register
def _close_all() -> None:
    """Leave an up-to-date snapshot behind so the next process folds only the tail."""
    clear_backend_cache()


__all__ = ["MemoryBackend", "get_backend", "clear_backend_cache", "entry_dict", "step_dict", "ARI_KINDS"]
