"""ARI's memory API over one checkpoint: ``MemoryBackend`` and its per-process cache.

This is ARI's ``MemoryBackend`` contract (``ari_skill_memory.backends.base``) with ARI's method
names, argument names and return shapes (``shapes``), so ARI's hooks, ``ari resume``, ``ari
memory backup/restore`` and ARI's own tests work on it unchanged. This library's additions
(entry ids and ``seq`` in results, ``as_of=`` time travel, ``findings``, ``current_node=``)
are extra keys and keyword-only arguments, never replacements.

The class is the plain list of those calls. Each delegates to one small service, and every
service shares one :class:`~projections.api.session.Session` (the ledger, the projections,
the search engine, the access log, one lock).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from ledger import ConfigurationError, Ledger, layout
from ledger.anchor import HeadFile, anchor_problem, verified_context_anchor
from ledger.errors import RollbackDetected, act_on_missing_log
from ledger.layout import SNAPSHOT_NAME
from projections import settings
from projections.access.log import ReadCapture
from projections.api.audit import Audit
from projections.api.context import ExperimentContext
from projections.api.imports import Imports
from projections.api.nodes import DEFAULT_LIMIT, Nodes
from projections.api.react import ReactTrace
from projections.api.research import Pointers, Research
from projections.api.session import Session, close_open_sessions
from projections.api.unfinished import finish_unfinished, refuse_unfinished
from projections.api.verified import VerifiedContext
from projections.api.working import WorkingContextBuilder
from projections.engines.local import snapshot_anchor
from projections.engines.protocol import Progress
from projections.engines.snapshot import SnapshotError, read_preamble
from projections.evidence.grounding import CitedFiles
from projections.models.catalog import Catalog
from projections.models.shapes import (
    AddResult,
    AuditResult,
    ByNode,
    ClearResult,
    ConsolidationResult,
    Health,
    ImportResult,
    NodeMemory,
    PurgeResult,
    ReactAdded,
    ResearchEntryView,
    ResearchResult,
    SearchResult,
    SeedResult,
    StartResult,
    StepView,
    VerifiedContextView,
    WorkingContext,
)

log = logging.getLogger("projections")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~4 MB: only when status is asked

    try:
        return f"ari-memory-ledger {version('ari-memory-ledger')}"
    except PackageNotFoundError:
        return "ari-memory-ledger (source)"


class MemoryBackend:
    """One checkpoint's memory. Get it with :func:`get_backend` (one per checkpoint per process).

    ``readonly=True`` opens an existing checkpoint only to read it: nothing in the directory
    changes. On a read-only filesystem the backend falls back to that by itself; writes then
    raise ``LedgerReadOnly`` saying why.
    """

    def __init__(
        self,
        checkpoint_dir: str | Path,
        *,
        embedder: Any = None,
        readonly: bool = False,
        progress: Progress | None = None,
        ledger: Ledger | None = None,
        cited_files: CitedFiles | None = None,
    ) -> None:
        """``progress(events folded, events to fold)``, when given, is told how far each fold of
        the log into the local projection is (the first one of a large log takes seconds).

        For a tool's one command: ``ledger``, the checkpoint's log the tool already opened (to
        verify it: ``Ledger.open_readonly``), so the command opens it once; it is refused as an
        open refuses it (damage, a rollback) and closed with the backend. ``cited_files``: what
        reading the cited files finds, shared by every read of this backend and with the tool
        (:class:`~projections.evidence.grounding.CitedFiles`), so each file is hashed once."""
        self.finished: list[str] = []  # what a crash had left unfinished, finished by this open
        if ledger is None:  # what a crash interrupted, finished (or, read-only, refused) before anything is read
            if readonly:
                refuse_unfinished(checkpoint_dir)
            else:
                self.finished = finish_unfinished(checkpoint_dir)
        _refuse_a_missing_log(Path(checkpoint_dir))
        self.session = session = Session(
            checkpoint_dir,
            embedder=embedder,
            readonly=readonly,
            progress=progress,
            ledger=ledger,
            cited_files=cited_files,
        )
        self._nodes = Nodes(session)
        self._react = ReactTrace(session)
        self._context = ExperimentContext(session)
        self._imports = Imports(session)
        self._research = Research(session, self._nodes, self._context)
        self._verified = VerifiedContext(session, self._context)
        self._audit = Audit(session)
        self._working = WorkingContextBuilder(session, self._context)

    # -- what callers may look at (read-only views of the session) -----------------------

    @property
    def checkpoint_dir(self) -> Path:
        return self.session.checkpoint_dir

    @property
    def namespace(self) -> str:
        return self.session.namespace

    @property
    def closed(self) -> bool:
        return self.session.closed

    @property
    def _access(self) -> Any:
        """ARI's name for the access log (ARI's tests drain it with ``_access.flush_and_close()``)."""
        return self.session.access

    def close(self) -> None:
        """Save the projection snapshot and close the log (a failed save is only a problem)."""
        self.session.close()

    # -- what the tools above (reviewers, operators) read -----------------------------------
    # ``projections.tools`` and the adapters read a checkpoint through these, never through
    # ``session``: the log's position, the catalog folded to it, a claim's event, replays.

    @property
    def readonly_reason(self) -> str | None:
        """Why this backend cannot write (opened read-only, a read-only file system, …); None when it can."""
        return self.session.ledger.readonly_reason

    @property
    def engine_name(self) -> str:
        """The search engine that ranks this backend's searches (``embedded``, ``letta``)."""
        return self.session.engine.name

    @property
    def last_seq(self) -> int:
        """The log's last seq as this backend last read it (no I/O: every read looks again)."""
        return self.session.ledger.last_seq

    def seq_on_disk(self) -> int:
        """The log's last seq on disk now, other processes' appends included; folds nothing."""
        return self.session.ledger.refresh()

    @property
    def folded_seq(self) -> int:
        """The seq the local index is folded to, as it stands (no fold: see :meth:`fold`)."""
        return self.session.projector.cursor

    def fold(self, *, announce: bool = True) -> int:
        """Bring the local index to the end of the log, as every read does first; returns the
        events this folded. ``announce=False``: a fold from scratch is what the caller asked for
        (``ari-ledger rebuild``), so no warning says it happens."""
        projector = self.session.projector
        if not announce:
            projector.announce = False
        before = projector.cursor
        with self.session.reading():
            return projector.cursor - before

    def fresh_catalog(self) -> Catalog:
        """The catalog (entries per node, the tree, ReAct steps, core seeds, tombstones,
        redactions) with the log's tail folded in first. The same object for the backend's life:
        a later fold changes it."""
        with self.session.reading() as catalog:
            return catalog

    @property
    def from_scratch(self) -> str | None:
        """Why this backend folded the whole log (no snapshot, or why the snapshot was not
        used); None when it folded on from the snapshot, or has not folded."""
        projector = self.session.projector
        return projector.from_scratch and (projector.rebuilt or projector.from_scratch)

    def save_snapshot(self) -> Path | None:
        """Save the local index as the projection snapshot now; None when it cannot be (a
        warning says why)."""
        return self.session.projector.save()

    def close_interrupted(self, *, keep: bool = False) -> Path | None:
        """Close after Ctrl-C without folding more, saving what was folded when that is worth it
        (or whenever it is more than the snapshot holds: ``keep``); the snapshot written, or None."""
        return self.session.close_interrupted(keep=keep)

    def event_hashes(self, seqs: Iterable[int]) -> dict[int, tuple[str, str]]:
        """(event id, hash) of each seq the log holds, from one pass over the log (how a claim
        is traced to the event that wrote it)."""
        return self.session.event_hashes(seqs)

    @contextmanager
    def capturing_reads(self) -> Iterator[ReadCapture]:
        """Reads made inside keep their access-log lines in memory (``.lines``) and write none:
        how a recorded read is replayed and the line it would write compared with the recorded one."""
        with self.session.capturing() as capture:
            yield capture

    # -- ARI's node scope --------------------------------------------------------------

    def add_memory(
        self, node_id: str, text: str, metadata: dict[str, Any] | None = None, *, current_node: str | None = None
    ) -> AddResult:
        """Add a node-scope entry; only the current node may write its own memory (CoW).
        Entries ARI's writer typed (``metadata`` with ``mem_kind``, refs, …) are typed here too."""
        from projections.api.checks import metadata as checked
        from projections.api.checks import text_type

        body = {"text": text_type(text), "metadata": checked(metadata)}
        return self._nodes.add(node_id, body, "add_memory", current_node)

    def search_memory(
        self, query: str, ancestor_ids: list[str], limit: int = DEFAULT_LIMIT, *, as_of: int | None = None
    ) -> SearchResult:
        """Entries of exactly ``ancestor_ids``, ranked by the semantic and lexical channels fused (``projections.models.fusion``)."""
        return self._nodes.search(query, ancestor_ids, limit, as_of)

    def get_node_memory(self, node_id: str, *, as_of: int | None = None) -> NodeMemory:
        """A node's entries in log order (ARI's ancestor-inheritance read)."""
        return self._nodes.get(node_id, as_of)

    def clear_node_memory(self, node_id: str, *, current_node: str | None = None) -> ClearResult:
        """Tombstone the node's entries (self only, CoW); the log keeps them."""
        return self._nodes.clear(node_id, current_node)

    def list_all_nodes(self, *, as_of: int | None = None) -> ByNode:
        return self._nodes.list_all(as_of)

    def bulk_get_node_memory(self, node_ids: list[str], *, as_of: int | None = None) -> ByNode:
        """The entries of exactly these nodes (every id requested gets a list, maybe empty)."""
        return self._nodes.bulk_get(node_ids, as_of)

    def purge_checkpoint(self) -> PurgeResult:
        """ARI's purge (``ari delete``, restore with overwrite): one tombstone hides everything."""
        return self._nodes.purge()

    def bulk_import(
        self,
        entries: Sequence[Mapping[str, Any]],
        kind: str,
        *,
        source: str = "bulk_import",
        progress: Progress | None = None,
    ) -> ImportResult:
        """Import ARI entries of one kind (``node_scope``, ``react_step``, ``core_seed``), once:
        an entry already visible is skipped. ``source`` is recorded in each event's ``origin``;
        ``progress(entries done, entries)`` after each batch written (each one group commit)."""
        return self._imports.bulk_import(entries, kind, source, progress)

    # -- ARI's ReAct trace ---------------------------------------------------------------

    def react_add(self, content: str, metadata: dict[str, Any] | None = None) -> ReactAdded:
        """Append a step to the flat trace (ARI returns nothing; the id here is an addition)."""
        return self._react.add(content, metadata)

    def react_search(self, query: str, limit: int = 10, *, as_of: int | None = None) -> list[StepView]:
        return self._react.search(query, limit, as_of)

    def react_get_all(self, *, as_of: int | None = None) -> list[StepView]:
        return self._react.entries(None, as_of)

    def list_react_entries(self, limit: int | None = None, *, as_of: int | None = None) -> list[StepView]:
        """The trace in order; with ``limit``, its last ``limit`` steps (as ARI)."""
        return self._react.entries(limit, as_of)

    # -- ARI's experiment context --------------------------------------------------------

    def seed_core_memory(self, persona: str, human: str, context: dict[str, Any] | None = None) -> SeedResult:
        return self._context.seed(persona, human, context)

    def get_experiment_context(self, *, as_of: int | None = None) -> dict[str, Any]:
        """The seeded context exactly as seeded, ``{}`` before the seed; no search cost."""
        return self._context.get(as_of)

    # -- ARI's typed research memory ----------------------------------------------------------

    def add_typed_memory(
        self,
        node_id: str,
        kind: str,
        text: str,
        *,
        metric_ptr: object = None,
        artifact_refs: list[Any] | None = None,
        node_report_ref: object = None,
        extra: Mapping[str, Any] | None = None,
        current_node: str | None = None,
    ) -> AddResult:
        """ARI's ``writer.add_typed_memory``: an unknown kind is refused, the rest stored and flagged."""
        pointers = Pointers(metric_ptr, artifact_refs, node_report_ref, extra)
        return self._research.typed(node_id, kind, text, pointers, current_node=current_node)

    def add_experiment_result(
        self,
        node_id: str,
        text: str,
        metric_ptr: object = None,
        artifact_refs: list[Any] | None = None,
        node_report_ref: object = None,
        *,
        extra: Mapping[str, Any] | None = None,
        current_node: str | None = None,
    ) -> AddResult:
        pointers = Pointers(metric_ptr, artifact_refs, node_report_ref, extra)
        return self._research.typed(
            node_id, "experiment_result", text, pointers, tool="add_experiment_result", current_node=current_node
        )

    def add_failure_case(
        self,
        node_id: str,
        text: str,
        artifact_refs: list[Any] | None = None,
        node_report_ref: object = None,
        *,
        metric_ptr: object = None,
        extra: Mapping[str, Any] | None = None,
        current_node: str | None = None,
    ) -> AddResult:
        pointers = Pointers(metric_ptr, artifact_refs, node_report_ref, extra)
        return self._research.typed(
            node_id, "failure_case", text, pointers, tool="add_failure_case", current_node=current_node
        )

    def add_procedure_memory(
        self,
        node_id: str,
        text: str,
        artifact_refs: list[Any] | None = None,
        node_report_ref: object = None,
        *,
        metric_ptr: object = None,
        extra: Mapping[str, Any] | None = None,
        current_node: str | None = None,
    ) -> AddResult:
        pointers = Pointers(metric_ptr, artifact_refs, node_report_ref, extra)
        return self._research.typed(
            node_id, "procedure", text, pointers, tool="add_procedure_memory", current_node=current_node
        )

    def add_reflection(
        self,
        node_id: str,
        text: str,
        confidence: float | None = None,
        node_report_ref: object = None,
        *,
        artifact_refs: list[Any] | None = None,
        metric_ptr: object = None,
        extra: Mapping[str, Any] | None = None,
        current_node: str | None = None,
    ) -> AddResult:
        """A reflection (never a claim); ``confidence`` goes into metadata as ARI's writer puts it."""
        extra = {**(extra or {}), **({"confidence": confidence} if confidence is not None else {})}
        pointers = Pointers(metric_ptr, artifact_refs, node_report_ref, extra)
        return self._research.typed(
            node_id, "reflection", text, pointers, tool="add_reflection", current_node=current_node
        )

    def add_reproducibility_event(
        self,
        node_id: str,
        target_memory_id: str,
        status: str,
        artifact_refs: list[Any] | None = None,
        text: str | None = None,
        *,
        current_node: str | None = None,
    ) -> AddResult:
        """Append a status change about another entry (never edits it)."""
        return self._research.reproducibility(node_id, target_memory_id, status, artifact_refs, text, current_node)

    def consolidate_node_memory(
        self,
        node_id: str,
        node_report: Mapping[str, Any] | str | Path,
        work_dir: str | Path,
        run_id: str | None = None,
        *,
        current_node: str | None = None,
    ) -> ConsolidationResult:
        """node_report → experiment_result / failure_case (+ reflection), once per report:
        ARI's ``{"written": [{"kind", "ok", "id"}]}``."""
        return self._research.consolidate(node_id, node_report, work_dir, run_id, current_node)

    def consolidate_from_node_report(
        self, node_report: Mapping[str, Any], work_dir: str | Path, run_id: str | None = None
    ) -> list[dict[str, Any]]:
        """ARI's pure planner: the specs a report consolidates to (no writes)."""
        return self._research.plan(node_report, work_dir, run_id)

    def search_research_memory(
        self,
        query: str,
        ancestor_ids: list[str],
        kinds: list[str] | None = None,
        require_artifacts: bool = False,
        limit: int = 5,
        *,
        as_of: int | None = None,
    ) -> ResearchResult:
        return self._research.search(query, ancestor_ids, kinds, require_artifacts, limit, as_of)

    def check_kinds(self, kinds: list[str] | None, field: str = "kinds") -> None:
        """Refuse a kind that names nothing: not one of ARI's kinds, and no entry's label (the
        CLI's ``--kind`` and the MCP tool's ``kinds``; ``search_research_memory`` itself keeps
        ARI's answer, no result)."""
        self._research.check_kinds(kinds, field)

    def ancestor_typed_memory(
        self, ancestor_ids: list[str], kinds: list[str] | None = None, *, as_of: int | None = None
    ) -> list[ResearchEntryView]:
        return self._research.ancestors(ancestor_ids, kinds, as_of)

    def fold_reproducibility(self, ancestor_ids: list[str], *, as_of: int | None = None) -> dict[str, dict[str, Any]]:
        return self._research.reproducibility_status(ancestor_ids, as_of)

    def get_verified_context(
        self,
        ancestor_ids: list[str],
        purpose: str = "paper",
        limit: int | None = None,
        *,
        min_evidence: str | None = None,
        experiments_root: str | Path | None = None,
        as_of: int | None = None,
        keep_mismatches: bool = False,
    ) -> VerifiedContextView:
        """ARI's verified context; claims whose numbers do not match their evidence are kept out
        of ``usable_for_claims`` unless ``keep_mismatches``."""
        return self._verified.get(ancestor_ids, purpose, limit, min_evidence, experiments_root, as_of, keep_mismatches)

    def write_verified_context(
        self, nodes: Iterable[Mapping[str, Any]], *, experiments_root: str | Path | None = None
    ) -> Path | None:
        return self._verified.write(nodes, experiments_root)

    def export_verified_context(
        self, ancestor_ids: list[str], path: str | Path, *, keep_mismatches: bool = True
    ) -> Path:
        """The verified context of any scope, anchored to the log's head, written to ``path``:
        a file a reviewer keeps apart and checks with ``ari-ledger prove --context``."""
        ctx = self._verified.get(ancestor_ids, "review", None, None, None, None, keep_mismatches)
        return self._verified.save(ctx, Path(path))

    def audit_memory(
        self, experiments_root: str | Path, run_id: str | None = None, *, as_of: int | None = None
    ) -> AuditResult:
        """The audit of what memory held ``as_of`` a seq (default: now); the files it re-hashes
        and the log's chain are checked as they are now: files cannot travel in time."""
        return self._audit.run(experiments_root, run_id, as_of)

    # -- this library's additions ----------------------------------------------------------

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
    ) -> StartResult:
        """Record a node of the tree (ARI never calls this: the tree is learned from reports)."""
        return self._nodes.start(node_id, parent_id, ancestor_ids, label, depth, eval_summary, current_node)

    def build_working_context(
        self, node_id: str, ancestor_ids: list[str], eval_summary: str | None = None, *, as_of: int | None = None
    ) -> WorkingContext:
        return self._working.build(node_id, ancestor_ids, eval_summary, as_of)

    def node(self, node_id: str) -> dict[str, Any] | None:
        """The node as the tree recorded it (from ``start_node`` or its report), or None."""
        return self._nodes.info(node_id)

    def lineage(self, node_id: str) -> list[str] | None:
        """Root→node from the recorded tree; None for a node this checkpoint does not know."""
        return self._nodes.lineage(node_id)

    def node_since(self, node_id: str) -> int | None:
        """The seq of the node's first event (its ``node_started`` or its first entry, whichever
        came first); None for a node this checkpoint does not know. Says why a read as of an
        earlier seq finds nothing of it: the node did not exist yet."""
        return self._nodes.since(node_id)

    def restore(self, progress: Any = None, *, only: str | None = None) -> dict[str, Any]:
        """Rebuild projections from the log, whatever ``ARI_MEMORY_AUTO_RESTORE`` says: the
        shared ones (Letta) when configured, else the local one; ``only`` names one. One
        projection restored returns its result; several, ``{"restored": [...]}``."""
        targets = self.session.restore_targets(only)
        with self.session.reading():
            results = [projection.restore(progress) for projection in targets]
        for runner in self.session.runners:
            if runner.projection in targets:
                runner.restored()
        return results[0] if len(results) == 1 else {"restored": results}

    def dedupe_letta_agents(self) -> list[str]:
        """Delete the duplicate Letta agents of this checkpoint (older versions let two processes
        create one each); keeps the oldest, which every process uses. Returns the deleted ids."""
        if self.session.letta is None:
            raise ConfigurationError("LETTA_BASE_URL is not set: there is no Letta agent to dedupe")
        from projections.engines.letta import LettaProjection  # only a Letta session gets here

        projection = self.session.letta.projection
        assert isinstance(projection, LettaProjection)
        return projection.dedupe()

    # -- ARI's health --------------------------------------------------------------------

    def health(self) -> Health:
        """ARI's ``ok``, ``backend``, ``latency_ms``, ``server_version``, ``namespace``, plus the
        events, the lag, problems after durable writes and the state of the checkpoint."""
        started = time.perf_counter()
        session = self.session
        with session.reading():
            extra = session.engine.health()
            lag = session.engine.lag()
            events = session.ledger.last_seq
        return cast(
            Health,
            {
                "ok": True,
                "backend": session.engine.name,
                "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                "server_version": _version(),
                "namespace": session.namespace,
                "events": events,
                "lag": lag,
                "problems": [*session.problems, *session.access.problems],
                "readonly": session.ledger.readonly_reason,
                "torn_tail": session.ledger.torn_tail is not None,
                "snapshot_rebuilt": session.projector.rebuilt,
                **{runner.name: runner.health() for runner in session.runners},
                **extra,
            },
        )

    def flush_projections(self, timeout: float = 60.0) -> bool:
        """Wait until every projection (the Letta agent too) holds the whole log; True when it does.
        Writes never wait for a shared projection; tests, benchmarks and ``restore`` sometimes must."""
        with self.session.reading():
            pass
        deadline = time.monotonic() + timeout
        return all([runner.flush(max(0.0, deadline - time.monotonic())) for runner in self.session.runners])


def write_verified_context(checkpoint_dir: str | Path, nodes: Iterable[Mapping[str, Any]]) -> Path | None:
    """ARI's pipeline entry point: the checkpoint's backend writes its verified context."""
    return get_backend(checkpoint_dir).write_verified_context(nodes)


# ---------------------------------------------------------------------------- the cache

_backends: dict[Path, MemoryBackend] = {}
_backends_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """The cache's lock may be held by a parent thread that does not exist in the child. The
    cached backends themselves are kept: their ledger and session repair themselves in the
    child (their own descriptor and lock, head re-read, no Letta thread), so ``get_backend``
    in a forked child hands back a backend that is safe to write through."""
    global _backends_lock
    _backends_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def get_backend(checkpoint_dir: str | Path | None = None, *, reset: bool = False) -> MemoryBackend:
    """The backend of a checkpoint, one per checkpoint per process (ARI's factory and cache).

    ``checkpoint_dir`` defaults to ``ARI_CHECKPOINT_DIR``; with neither, ConfigurationError (a
    RuntimeError, as ARI raises). ``reset=True`` closes the cached backend and opens a new one.
    """
    path = Path(checkpoint_dir).expanduser() if checkpoint_dir is not None else settings.checkpoint_dir()
    if path is None:
        raise ConfigurationError(
            "ari-memory-ledger requires ARI_CHECKPOINT_DIR (or a checkpoint_dir); there is no global memory"
        )
    settings.memory_backend()  # an unsupported ARI_MEMORY_BACKEND is refused, as ARI does
    key = path.resolve()
    with _backends_lock:
        backend = _backends.get(key)
        if reset and backend is not None:
            _close_quietly(backend)
            backend = None
        if backend is None or backend.closed:
            backend = _backends[key] = MemoryBackend(key)
        return backend


def _refuse_a_missing_log(checkpoint_dir: Path) -> None:
    """Before a checkpoint is opened: refuse a path that is not one (``layout.log_path`` runs
    ``layout.check_checkpoint_dir``: InvalidInput), and a log that holds nothing (missing, so
    a writable open would create it empty, or created empty by an earlier one) while the
    snapshot or ``verified_context.json`` records events: the log looks missing or moved, and
    nothing is created (RollbackDetected, without offering to accept the empty log). A head
    file beside a missing or empty log is the ledger's to report (``Ledger.open``)."""
    path = layout.log_path(checkpoint_dir)
    if path.exists() and path.stat().st_size:
        return  # a log with events: the open checks it against every anchor
    if HeadFile(path).path.exists():
        return  # the ledger's to report
    anchors = []
    try:
        preamble = read_preamble(path.with_name(SNAPSHOT_NAME))
        if preamble.cursor:
            anchors.append(snapshot_anchor(preamble))
    except (OSError, SnapshotError):
        pass  # none, or unreadable: the open reports a damaged snapshot
    context, _problem = verified_context_anchor(checkpoint_dir)
    if context is not None and context.seq:
        anchors.append(context)
    if anchors:
        anchor = max(anchors, key=lambda a: a.seq or 0)
        problem = anchor_problem(anchor, None, 0, lambda _seq: None)
        raise RollbackDetected(f"{problem}; {act_on_missing_log(path, layout.misplaced_log(checkpoint_dir))}", seq=1)


def clear_backend_cache() -> None:
    """Close and forget every cached backend (ARI's test and CLI helper)."""
    with _backends_lock:
        for backend in list(_backends.values()):
            _close_quietly(backend)
        _backends.clear()


def _close_quietly(backend: MemoryBackend) -> None:
    try:
        backend.close()
    except Exception as exc:
        log.warning("closing the backend of %s: %s", backend.checkpoint_dir, exc)


@atexit.register
def _close_all() -> None:
    """Leave an up-to-date snapshot behind so the next process folds only the tail: every open
    session closed as the process ends (the cached backends' and any a script opened and never
    closed), then the cache forgotten."""
    close_open_sessions()
    clear_backend_cache()


__all__ = ["MemoryBackend", "clear_backend_cache", "get_backend", "write_verified_context"]
