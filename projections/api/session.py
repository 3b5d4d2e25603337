"""One checkpoint, open: what every service of the API shares.

A :class:`Session` holds the ledger (writes), the list of projections (the local one, folded
by every read; any shared one, kept current by its own runner thread), the search engine, the
access log and one lock. Its read helper folds whatever the log gained — from
this process or another — before a service reads, so reads see every acknowledged write (and
writes fold nothing: the next read does). Its write helpers append, and once the event is
durable nothing after it can fail the call: the access log, waking the runners and a snapshot
save only leave a line in ``problems``.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ledger import ConfigurationError, CopyOnWriteViolation, Ledger
from ledger.events import Event, EventType
from ledger.ledger import Batch
from projections import settings
from projections.access.log import AccessLines, AccessLog, ReadCapture
from projections.engines.embedded import EmbeddedEngine
from projections.engines.local import Projector
from projections.engines.protocol import Progress, Projection, SearchEngine, SharedProjection
from projections.engines.runner import ProjectionRunner
from projections.evidence.grounding import CitedFiles
from projections.models.catalog import Catalog
from projections.models.lexical import LexicalIndex

log = logging.getLogger("projections")

MAX_PROBLEMS = 20
EXIT_FOLD_FREE = 2048  # at exit, a tail of others' events up to this many is still folded and saved


class Session:
    """The open state of one checkpoint, shared by the API's services."""

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
        """Open a checkpoint (created when missing). ``readonly=True`` opens an existing one only
        to read it (a person's ``search``): nothing in the directory changes — no recovery, no
        snapshot, no access log. On a read-only filesystem the session falls back to that by
        itself; writes then raise ``LedgerReadOnly`` saying why. ``progress(events folded,
        events to fold)`` is told how far each fold of the local projection is (a first fold
        of a large log takes seconds). ``ledger``: the checkpoint's log, already open (a tool
        that verified it first: one open per command), refused as an open refuses it
        (``Ledger.check_usable``) and closed with the session. ``cited_files``: what reading
        the cited files found, shared by every read of this session (see
        :class:`~projections.evidence.grounding.CitedFiles`)."""
        from projections.models.embedder import get_embedder

        self.checkpoint_dir = Path(checkpoint_dir)
        self.namespace = settings.checkpoint_hash(self.checkpoint_dir)
        self.cited_files = cited_files
        if ledger is not None:
            ledger.check_usable()
            self.ledger = ledger
        elif readonly:
            self.ledger = Ledger.open(self.checkpoint_dir, create=False, readonly=True)
        else:
            self.ledger = Ledger.open(self.checkpoint_dir, readonly_fallback=True)
        self.projector = Projector(self.ledger, embedder or get_embedder())
        self.projector.progress = progress
        self.engine: SearchEngine = EmbeddedEngine(self.projector)
        self.lexical = LexicalIndex()  # the lexical channel beside whichever engine answers
        self.runners: list[ProjectionRunner] = []  # one per shared projection
        if settings.letta_base_url():
            self._keep_letta(settings.search_engine())
        self.access: AccessLines = AccessLog(self.checkpoint_dir, muted=self.ledger.readonly)
        self.lock = threading.RLock()
        self.problems: list[str] = []  # what failed after a write was already durable
        self._refold = False  # forked while another thread held the lock: the fold may be half done
        self.appended = 0  # events this session appended (the exit-time save weighs them)
        _LIVE.add(self)

    def _keep_letta(self, reads: str) -> None:
        """Keep a Letta projection current; read from it only if chosen."""
        from projections.engines.letta import LettaEngine, LettaProjection, make_client

        runner = self._keep(LettaProjection(self.projector, make_client(), auto_restore=settings.auto_restore()))
        if reads == "letta":
            self.engine = LettaEngine(self.projector, self.engine, runner)

    def _keep(self, projection: SharedProjection) -> ProjectionRunner:
        """A shared projection joins the list, with a runner that keeps it current."""
        runner = ProjectionRunner(projection)
        self.runners.append(runner)
        runner.poke()  # a missing one is restored, a lag drained, without waiting for a write
        return runner

    @property
    def projections(self) -> list[Projection]:
        """Every projection this session keeps: the local one, then each runner's."""
        return [self.projector, *(runner.projection for runner in self.runners)]

    def runner(self, name: str) -> ProjectionRunner | None:
        """The runner of the shared projection called ``name``, if this session keeps one."""
        return next((r for r in self.runners if r.name == name), None)

    @property
    def letta(self) -> ProjectionRunner | None:
        """The Letta projection's runner (what its own tools, like ``dedupe``, reach through)."""
        return self.runner("letta")

    def restore_targets(self, only: str | None = None) -> list[Projection]:
        """What an explicit restore rebuilds: the projection named ``only``; else every shared
        one, or the local one when there is none (it is rebuilt by any open anyway)."""
        if only is None:
            return [r.projection for r in self.runners] or [self.projector]
        found = [p for p in self.projections if p.name == only]
        if not found:
            kept = ", ".join(p.name for p in self.projections)
            raise ConfigurationError(f"restore: no projection named {only!r} here (this checkpoint keeps: {kept})")
        return found

    @property
    def closed(self) -> bool:
        return self.ledger.closed

    def close(self, *, save: bool = True, at_exit: bool = False) -> None:
        """Save the projection snapshot when the unsaved tail is worth it (``worth_saving``: a
        one-entry hook process writes none) and close the log (a failed save is only a problem).
        ``save=False`` (after an interrupt) folds and saves nothing: only closes. ``at_exit``:
        the process is ending; a tail mostly of other processes' events (more than
        :data:`EXIT_FOLD_FREE`, and over twice what this one appended) is left to the next
        reader to fold, so several writers ending together do not each fold the same log (what
        this one folded is still saved)."""
        with self.lock:
            if self.ledger.closed:
                return
            for runner in self.runners:
                runner.close()
            unfolded = max(0, self.ledger.last_seq - self.projector.cursor)
            theirs = at_exit and unfolded > max(EXIT_FOLD_FREE, 2 * self.appended)
            if not save or self.ledger.readonly:  # read-only: nothing can be saved
                pass
            elif theirs and self.projector.worth_saving() and self.ledger.redacted_at <= self.projector.cursor:
                self.after_durable("saving the projection snapshot", self.projector.save)
            elif not theirs and self.projector.worth_saving(unfolded):
                self.after_durable("saving the projection snapshot", self._fold_and_save)
            self.access.flush_and_close()
            self.ledger.close()

    def close_interrupted(self, *, keep: bool = False) -> Path | None:
        """Close after Ctrl-C: fold nothing more (a close would fold the rest of the log), but
        save what was folded when it is worth it (``worth_saving``), or whenever it is more than
        the snapshot holds (``keep``): a fold up to the cursor, from which the next open folds on.
        Returns the snapshot written, or None. A fold that stopped inside a chunk is not saved."""
        with self.lock:
            if self.ledger.closed:
                return None
            projector, saved = self.projector, None
            try:
                wanted = projector.worth_saving() or (keep and projector.unsaved > 0)

                if wanted and self.ledger.redacted_at <= projector.cursor:  # (else a save folds on)
                    saved = projector.save()
            finally:
                self.close(save=False)
            return saved

    # -- after a fork --------------------------------------------------------------------

    def _forked(self) -> None:
        """In a forked child, at once: a fresh lock (the inherited one may be held by a parent
        thread that does not exist here, and then the fold it guarded may be half done), no
        runner threads. The ledger reopens itself (``Ledger._own``); the projector's state is a
        fold of a log that only grows, so it stays, unless a parent thread was changing it."""
        inherited, self.lock = self.lock, threading.RLock()
        if inherited.acquire(blocking=False):  # only this (the forking) thread could have held it
            inherited.release()
        else:
            self._refold = True
        self._drop_runners_in_child()

    def _drop_runners_in_child(self) -> None:
        """The runner threads did not survive the fork, so the child must never wait on them
        (``close`` joins them): the child reads from the local projection and leaves folding
        its writes into the shared ones to a process that keeps a runner (every runner polls
        the log for other processes' writes)."""
        if not self.runners:
            return
        self.runners = []
        self.engine = EmbeddedEngine(self.projector)

    def _fold(self) -> None:
        """Fold the log's tail (all of it again when a fork cut a fold short)."""
        if self._refold:
            self._refold = False
            self.projector.reset()
        self.projector.catch_up()

    # -- the read helper --------------------------------------------------------------

    @contextmanager
    def reading(self) -> Iterator[Catalog]:
        """Hold the lock with the catalog folded to the end of the log."""
        with self.lock:
            self._fold()
            yield self.projector.catalog

    @contextmanager
    def capturing(self) -> Iterator[ReadCapture]:
        """Reads made inside keep their access-log lines in memory (``lines``), writing none:
        a replay of a recorded read compares the line it would have written."""
        with self.lock:
            kept, capture = self.access, ReadCapture()
            self.access = capture
            try:
                yield capture
            finally:
                self.access = kept

    def event_hashes(self, seqs: Iterable[int]) -> dict[int, tuple[str, str]]:
        """(event id, hash) of each seq the log holds, from one pass over the log between the
        first and the last wanted (a member is decoded once, however many seqs are in it)."""
        wanted = {s for s in seqs if s >= 1}
        if not wanted:
            return {}
        events = self.ledger.events(as_of=max(wanted), after=min(wanted) - 1)
        return {e.seq: (e.id, e.hash) for e in events if e.seq in wanted}

    def read_stamp(self, as_of: int | None) -> dict[str, Any]:
        """What a read inside :meth:`reading` records so it can be replayed: the log position
        it saw (``as_of``, else the fold's end) and the engine that ranked it."""
        at = min(as_of, self.projector.cursor) if as_of is not None else self.projector.cursor
        return {"at": at, "engine": self.engine.name}

    # -- the write helpers --------------------------------------------------------------

    def append(self, node_id: str, type: EventType, body: dict[str, Any], current_node: str | None = None) -> Event:
        """Append one event; once it is durable nothing after it can fail the call."""
        with self.lock:
            event = self.ledger.append(node_id, type, body, current_node=current_node)
            self.appended += 1
            self.after_durable("waking the runners", self._written)
        return event

    @contextmanager
    def batch(self) -> Iterator[Batch]:
        """Group commit (one member, one fsync), folded once it is durable."""
        with self._batch(fold_first=False) as (_catalog, batch):
            yield batch

    @contextmanager
    def deciding(self) -> Iterator[tuple[Catalog, Batch]]:
        """A group commit whose content is decided under the log's lock: the catalog is folded
        to the end of the log after the lock is taken, so what another process wrote a moment
        ago counts as there. What is promised once (an import, a consolidation) decides here."""
        with self._batch(fold_first=True) as pair:
            yield pair

    @contextmanager
    def _batch(self, *, fold_first: bool) -> Iterator[tuple[Catalog, Batch]]:
        with self.lock:
            with self.ledger.batch() as batch:
                if fold_first:
                    self._fold()
                yield self.projector.catalog, batch
            if batch.events:
                self.appended += len(batch.events)
                self.after_durable("waking the runners", self._written)

    def _fold_and_save(self) -> None:
        """Close's save: the fold it needs saves its snapshot at once, so the "folding from
        scratch … rebuild saves one" line would be advice already taken."""
        self.projector.announce = False
        self._fold()
        self.projector.save()

    def _written(self) -> None:
        """Wake the runners of the shared projections. The local projection folds at the next
        read (or at close, when the tail is worth a snapshot), not here: folding embeds every
        new entry, this process's and every other writer's, so a write that folded paid for the
        whole checkpoint's writes (``bench/processes_bench.py``: one writer through
        ``add_memory`` 795/s folding, 1,972/s not; two writers 0.55 and 1.00 of one), and a
        hook that only writes embeds nothing."""
        for runner in self.runners:
            runner.poke()

    def after_durable(self, what: str, work: Callable[[], object]) -> None:
        """Run work that follows a durable write; a failure becomes a line of ``problems``."""
        try:
            work()
        except Exception as exc:
            problem = f"{what} failed: {type(exc).__name__}: {exc}"[:300]
            self.problems = [*self.problems[-(MAX_PROBLEMS - 1) :], problem]
            log.warning("%s (the log holds the event; the next read retries)", problem)

    def refused(self, tool: str, exc: CopyOnWriteViolation, current_node: str | None, **more: Any) -> Any:
        """A write the copy-on-write guard refused: a line in the access log (nothing in the
        ledger), and ARI's refusal for the call to return, ``{"ok": False, "error"}``
        (:meth:`~ledger.errors.CopyOnWriteViolation.as_dict`), then the call's own keys ``more``."""
        self.access.record("refused", tool, node=current_node, error=exc.message)
        return {**exc.as_dict(), **more}


_LIVE: weakref.WeakSet[Session] = weakref.WeakSet()  # open sessions, for the fork hook


EXIT_CLOSE_WAIT_S = 10.0  # how long the exit-time close waits for a thread still holding a session


def close_open_sessions(wait: float = EXIT_CLOSE_WAIT_S) -> None:
    """At exit: close every session still open (a library writer that never called ``close``),
    so the snapshot of what it wrote is saved and the next process folds only what follows. A
    session a thread still holds after ``wait`` seconds is left as it is: its events are durable
    already, and the next open folds them."""
    for session in list(_LIVE):
        if session.closed:
            continue
        if not session.lock.acquire(timeout=wait):
            log.warning("%s: a thread still holds the memory at exit; not saving its snapshot", session.checkpoint_dir)
            continue
        try:
            session.close(at_exit=True)
        except Exception as exc:
            log.warning("closing %s at exit: %s", session.checkpoint_dir, exc)
        finally:
            session.lock.release()


def _after_fork_in_child() -> None:
    for session in list(_LIVE):
        session._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)
