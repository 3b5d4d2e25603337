"""The local projector: folds the log into the catalog and the semantic index, with a cursor.

State and cursor are snapshotted together next to the log (``snapshot``), so a resume maps
the snapshot and folds only the tail; the snapshot's rows are read in place, on demand, and
only the events folded since it are held in memory (a save writes them into a new snapshot
and reads them from there on; a large fold saves as it goes, so a fold from scratch of any
size holds at most FOLD_SAVE_EVERY events' rows in memory). The snapshot is a cache, never
trusted blindly: one that fails a checksum, was made with another embedding model or for
another checkpoint, or whose content disagrees with the log (``snapshot_check``) is rebuilt
from the log, with a warning and a note the next snapshot keeps for ``status`` — also when
the damage is found only when its rows are first read. One that has folded events the log
no longer holds is an alarm (RollbackDetected) until a person acts, never a silent rebuild.
Rebuilding from scratch yields exactly the state of incremental folding.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import msgspec

from ledger import Ledger
from ledger.anchor import Anchor
from ledger.errors import ACT_ON_ROLLBACK, RollbackDetected
from ledger.events import Event, EventsRedacted, utc_now
from projections.engines.parallel_embed import ParallelEmbedder
from projections.engines.protocol import Progress
from projections.engines.snapshot import (
    SNAPSHOT_FORMAT,
    SNAPSHOT_NAME,
    SnapshotDamaged,
    SnapshotError,
    SnapshotPreamble,
    SnapshotView,
    open_snapshot,
    read_preamble,
)
from projections.engines.snapshot_check import (
    OneRead,
    catalog_problem,
    random_items,
    sample_problem,
    vectors_problem,
)
from projections.engines.snapshot_writer import remove_stale_temps, write_snapshot
from projections.models.catalog import Catalog, Entry, Step
from projections.models.frozen import DamagedCache
from projections.models.semantic import Embedder, SemanticIndex

log = logging.getLogger("projections")

SNAPSHOT_EVERY = 5000  # events folded since the last snapshot before an automatic save
# At close, an unsaved tail shorter than this share of the folded log is left for the next
# open to fold: a one-entry hook process on a checkpoint of 20+ events writes no snapshot, and
# one save per (share x log) hooks keeps the snapshot's bytes per hook amortised-flat (about
# 1/share events' worth) up to SNAPSHOT_EVERY / share events, bounded by SNAPSHOT_EVERY beyond.
CLOSE_SAVE_SHARE = 0.05
FOLD_CHUNK = 2048  # events embedded together
# A fold of at least this many events embeds each chunk on several threads; onto an empty state
# (a cold fold) it also embeds on a thread while the catalog folds and the next chunk is read.
PARALLEL_FOLD = 4 * FOLD_CHUNK
# Such a fold also saves the snapshot whenever this many events are folded since the last save,
# and reads the rows from it from then on: what it holds in memory (~1.4 KB a row: the records,
# ids and vector codes) stays bounded, at the price of rewriting the snapshot every so often
# (O(n^2 / FOLD_SAVE_EVERY) bytes written in all; ~0.54 KB a row on disk).
FOLD_SAVE_EVERY = 150_000


class Projector:
    """Catalog + semantic index of one ledger, kept at ``cursor`` (the last folded seq).

    The local :class:`~projections.engines.protocol.Projection`: always kept, whatever
    engine answers searches, because every read of the API folds through it. ``catalog``
    and ``index`` stay the same objects for the projector's life (a rebuild or a save resets
    them in place), so callers may hold on to them.
    """

    name = "local"

    def __init__(self, ledger: Ledger, embedder: Embedder, *, use_snapshot: bool = True) -> None:
        self.ledger = ledger
        self.embedder = embedder
        self.snapshot_path = ledger.path.with_name(SNAPSHOT_NAME)
        self.cursor = 0
        self.cursor_hash = ""
        self.catalog = Catalog()
        self.index = SemanticIndex(embedder)
        self.catalog.on_damage = self.index.on_damage = self._heal
        self.rebuilt: str | None = None  # why this open did not use the snapshot (None: loaded, or none)
        self._rebuilt_note: str | None = None  # the last rebuild, kept in every snapshot written
        self._unsaved = 0
        self._next_save = SNAPSHOT_EVERY
        # The first fold of an open that found no usable snapshot folds the whole log: say so
        # once (``announce``: False for a caller that folds on purpose, ``ari-ledger rebuild``).
        self.announce = use_snapshot
        self.from_scratch: str | None = None  # why this open folded the whole log, once it did
        self._looked = False  # a first look at an empty log: what it folds later is written here, not a rebuild
        self.settled = (
            True  # False while a chunk is folded: one that stopped inside (Ctrl-C) is neither saved nor built on
        )
        # Told how far each fold is (events folded, events this fold folds), e.g. a command's bar.
        self.progress: Progress | None = None
        if not ledger.readonly:  # a killed save's temporary file (a whole snapshot's size) goes now,
            remove_stale_temps(self.snapshot_path)  # not at the next save, which a close may skip
        self.loaded_from_snapshot = use_snapshot and self._load()

    # -- folding ---------------------------------------------------------------------

    def catch_up(self) -> int:
        """Fold every event after the cursor; return how many were folded."""
        if not self.settled:  # a fold stopped inside a chunk: start again from the snapshot
            self.reset()
        target = self.ledger.refresh()
        first_look, self._looked = not self._looked, True
        if target <= self.cursor:
            return 0
        if first_look and self.cursor == 0 and not self.loaded_from_snapshot and self.from_scratch is None:
            self._say_from_scratch(target)  # (a note only when the fold costs the user: SNAPSHOT_EVERY)
        start, progress = self.cursor, self.progress
        events = self.ledger.events(after=self.cursor)
        if progress:
            progress(0, target - start)
        told = (lambda folded: progress(folded, max(folded, target - start))) if progress else None
        folded = self._fold(events, target - start, told)
        if self._unsaved >= self._next_save:
            self.save()
        return folded

    def _say_from_scratch(self, events: int) -> None:
        """One line on stderr (through ``logging``): this open folds the whole log, and why."""
        why = "no snapshot" if self.rebuilt is None else "snapshot not used"
        self.from_scratch = why
        if self.announce and events >= SNAPSHOT_EVERY:  # a few thousand fold in a blink: no note
            log.warning(
                "folding %s events from scratch (%s); `ari-ledger rebuild %s` saves one",
                f"{events:,}",
                why,
                self.ledger.checkpoint_dir,
            )

    def apply(self, events: list[Event]) -> None:
        """Fold events that directly follow the cursor (in seq order)."""
        if not events:
            return
        self._check_follows(events)
        self._fold_chunk(events)
        self._after_chunk(events)

    def _check_follows(self, events: list[Event]) -> None:
        if events[0].seq != self.cursor + 1:
            raise ValueError(f"projection at seq {self.cursor} cannot fold seq {events[0].seq}")

    def _fold_chunk(self, events: list[Event]) -> None:
        """Fold events that follow the cursor into the catalog and the index (unsettled meanwhile)."""
        self.settled = False
        for event in events:
            self.catalog.apply(event)
        self.index.apply_batch(events)
        self._settle(events)

    def _settle(self, events: list[Event]) -> None:
        """Both the catalog and the index hold ``events``: the cursor moves past them."""
        self.cursor, self.cursor_hash = events[-1].seq, events[-1].hash
        self.settled = True
        self._unsaved += len(events)

    def _after_chunk(self, events: list[Event]) -> None:
        if self._holds_redacted(events):
            # Folded before the log was rewritten: the state holds the removed bodies. A fold of
            # the rewritten log holds none (its stubs make no rows), so this happens once.
            log.warning("a redaction removed bodies this projection held; rebuilding it from the log")
            self._fold_from_scratch(self.cursor)

    def _holds_redacted(self, events: list[Event]) -> bool:
        """Whether the state holds bodies a redaction among ``events`` removed."""
        removed = [r["id"] for e in events if e.type == EventsRedacted.type_name for r in e.body["redacted"]]
        return bool(removed) and self.catalog.holds_any(removed)

    def _fold(self, events: Iterator[Event], expected: int, told: Callable[[int], None] | None = None) -> int:
        """Fold ``events`` (they follow the cursor) chunk by chunk, ``told(events folded)`` after
        each, always between two chunks; return how many were folded. ``expected`` (about how many
        there are) picks the way: a large fold embeds on several threads (:class:`ParallelEmbedder`,
        the same vectors), and onto an empty state also embeds on a thread while this one folds
        the catalog and reads the next chunk."""
        if expected < PARALLEL_FOLD:
            return self._fold_in_turn(events, told)
        one_thread, self.index.embedder = self.index.embedder, ParallelEmbedder(self.embedder)
        between = self._saving(_freezing(told))
        try:
            if self.index.base is None:
                return self._fold_ahead(events, between)
            return self._fold_in_turn(events, between)
        finally:
            self.index.embedder = one_thread
            gc.unfreeze()  # what the fold froze is collectable again (see _freezing)

    def _saving(self, told: Callable[[int], None]) -> Callable[[int], None]:
        """``told``, after saving the snapshot between two chunks of a large fold whenever
        FOLD_SAVE_EVERY events were folded since the last save: the fold then reads those rows
        from the file, so its memory stays bounded whatever the log's size. Each save is a
        whole snapshot of the fold so far, written like any other, so a fold killed between two
        saves leaves the last one, which the next open checks against the log and goes on from.
        After a save that could not be written, the next try waits another FOLD_SAVE_EVERY
        events. Nothing is saved while the log holds a redaction the fold has not reached
        (``save`` would have to fold it first)."""
        if self.ledger.readonly:
            return told
        due = FOLD_SAVE_EVERY

        def tell(done: int) -> None:
            nonlocal due
            if self._unsaved >= due and self.ledger.redacted_at <= self.cursor:
                due = FOLD_SAVE_EVERY if self.save() is not None else self._unsaved + FOLD_SAVE_EVERY
                # The snapshot replaced holds cycles (its rows point back at it), frozen with the
                # rest (``_freezing``): collect them now, while what is alive is small.
                gc.unfreeze()
                gc.collect()
            told(done)

        return tell

    def _fold_in_turn(self, events: Iterator[Event], told: Callable[[int], None] | None) -> int:
        folded = 0
        while chunk := list(islice(events, FOLD_CHUNK)):
            self.apply(chunk)
            folded += len(chunk)
            if told:
                told(folded)
        return folded

    def _fold_ahead(self, events: Iterator[Event], told: Callable[[int], None] | None) -> int:
        """The fold as ``_fold_in_turn`` does it, but each chunk's index fold (its embedding) runs
        on a thread while this one folds the chunk into the catalog and reads the next from the
        log. What the caller sees is the same: the state is unsettled while a chunk is folded, and
        ``told`` and the redaction check run here once both hold it, before the next starts, so
        a Ctrl-C raised by ``told`` leaves a settled state; one that lands anywhere else first
        waits for the index's fold in flight, and leaves the state settled only when the chunk
        is whole in both. Only onto an empty state, or the snapshots ``told`` saves on the way
        (``_saving``): folding an event into the catalog or the index only counts a base's rows,
        never reads them, so no repair (``_heal``) can start while the thread folds."""
        folded = 0
        chunk = list(islice(events, FOLD_CHUNK))
        while chunk:
            self._check_follows(chunk)
            self.settled = False
            job = _on_a_thread(self.index.apply_batch, chunk)
            in_catalog = False
            try:
                for event in chunk:
                    self.catalog.apply(event)
                in_catalog = True
                following = list(islice(events, FOLD_CHUNK))  # read while the index embeds
                job.result()
            except BaseException:
                _wait(job)
                if in_catalog and job.exception() is None and not self._holds_redacted(chunk):
                    self._settle(chunk)  # stopped while reading the next chunk: this one is whole
                raise
            self._settle(chunk)
            self._after_chunk(chunk)
            folded += len(chunk)
            if told:
                told(folded)
            chunk = following
        return folded

    def worth_saving(self, unfolded: int = 0) -> bool:
        """Whether closing should write the snapshot: the unsaved tail (folded, plus ``unfolded``
        events of the log not folded yet) is long enough that rewriting the whole snapshot costs
        less, amortised, than every next open folding it (bounded by SNAPSHOT_EVERY, so an
        open's fold stays cheap)."""
        threshold = min(SNAPSHOT_EVERY, int((self.cursor + unfolded) * CLOSE_SAVE_SHARE))
        return self._unsaved + unfolded >= max(1, threshold)

    @property
    def unsaved(self) -> int:
        """Events folded since the snapshot was last saved (or loaded)."""
        return self._unsaved

    def lag(self) -> int:
        """Events in the log not yet folded."""

        return max(0, self.ledger.refresh() - self.cursor)

    def health(self) -> dict[str, object]:
        return {"name": self.name, "cursor": self.cursor, "lag": self.lag(), "snapshot_rebuilt": self.rebuilt}

    def restore(self, progress=None) -> dict[str, object]:
        """Fold the whole log again from seq 0 (the snapshot is not read), then save it."""
        target = self.ledger.refresh()
        self._fold_from_scratch(target, progress)
        self.save()
        return {"name": self.name, "cursor": self.cursor, "events": self.cursor}

    def reset(self) -> None:
        """Forget the folded state and load it again (the snapshot, then what the log adds):
        for a process that cannot trust its in-memory fold, e.g. forked mid-fold."""
        self._install(None)
        self.index.embedder = self.embedder  # a fold stopped by a fork leaves its threaded embedder
        self.cursor, self.cursor_hash, self._unsaved, self._next_save = 0, "", 0, SNAPSHOT_EVERY
        self.settled = True
        self.loaded_from_snapshot = self._load()

    def _fold_from_scratch(self, target: int, progress=None) -> None:
        """Empty the state and fold events 1..target into it (``progress``, else the projector's,
        told after each chunk)."""
        progress = progress or self.progress
        self._install(None)
        self.cursor, self.cursor_hash, self._unsaved = 0, "", 0
        told = (lambda folded: progress(self.cursor, target)) if progress else None
        self._fold(self.ledger.events(as_of=target), target, told)

    def _heal(self, damage: DamagedCache) -> None:
        """Stored rows failed their check as they were first read: rebuild from the log up to
        the cursor, in place, so the read that found it can be answered."""
        self._discard(damage.reason)
        self.loaded_from_snapshot = False
        self._fold_from_scratch(self.cursor)

    # -- snapshot --------------------------------------------------------------------

    def save(self) -> Path | None:
        """Write the snapshot atomically and read the state from it from now on; return its
        path, or None when it was not written.

        A snapshot is a cache, so this never raises: on a read-only ledger, or after a fold
        that stopped inside a chunk (``settled`` False), it is skipped, and when the disk is full or the directory not writable it logs a warning, leaves no
        temporary file, and the next open folds from the last snapshot that was written.
        """
        if self.ledger.readonly or not self.settled:  # (unsettled: not the fold of 1..cursor)
            return None
        if self.ledger.redacted_at > self.cursor:  # never write bodies a redaction removed
            self.catch_up()
        preamble = SnapshotPreamble(
            SNAPSHOT_FORMAT,
            self.ledger.ckpt,
            self.cursor,
            self.cursor_hash,
            self.embedder.name,
            self.embedder.dim,
            self._rebuilt_note,
        )
        try:
            write_snapshot(self.snapshot_path, preamble, self.catalog, self.index)
        except DamagedCache as damage:  # the stored rows it copies are damaged: rebuild, then write
            self._heal(damage)
            return self.save()
        except (OSError, ValueError, msgspec.EncodeError) as exc:
            log.warning(
                "could not save the projection snapshot %s (%s); the next open folds more of the log",
                self.snapshot_path,
                exc,
            )
            self._next_save = self._unsaved + SNAPSHOT_EVERY  # try again later, not on every fold
            return None
        self._unsaved = 0
        self._next_save = SNAPSHOT_EVERY
        self._rebase(preamble)
        return self.snapshot_path

    def _rebase(self, saved: SnapshotPreamble) -> None:
        """Read the rows just saved from the new file, and drop them from memory."""
        try:
            view = open_snapshot(self.snapshot_path, check=False)
        except (OSError, SnapshotError) as exc:
            log.warning(
                "could not map the snapshot just saved %s (%s); keeping the state in memory", self.snapshot_path, exc
            )
            return
        if (view.preamble.ckpt, view.preamble.cursor, view.preamble.cursor_hash) == (
            saved.ckpt,
            saved.cursor,
            saved.cursor_hash,
        ):
            self._install(view)

    def _install(self, view: SnapshotView | None) -> None:
        self.catalog.reset(view, view.tables if view is not None else None)
        self.index.reset(view)

    def _load(self) -> bool:
        try:
            view = open_snapshot(self.snapshot_path)
        except FileNotFoundError:
            return False
        except SnapshotDamaged as damage:
            return self._discard(damage.reason)
        except SnapshotError as exc:
            return self._discard(f"unreadable ({exc})")
        reason = self._mismatch(view.preamble)
        if reason:
            return self._discard(reason)
        raise_on_rollback(self.ledger, view.preamble)
        self._install(view)
        try:
            problem, sampled = sample_problem(self.ledger, self.catalog, view)
            reason = f"its content disagrees with the log: {problem}" if problem else None
        except DamagedCache as damage:
            reason = damage.reason
        if reason:
            self._install(None)
            return self._discard(reason)
        self.index.pending_check = lambda: self._check_vectors(sampled)
        self.cursor, self.cursor_hash = view.preamble.cursor, view.preamble.cursor_hash
        self._rebuilt_note = view.preamble.rebuilt
        return True

    def _check_vectors(self, items: list[Entry | Step]) -> None:
        """Before the first search: the sampled rows' vectors are the embedding of their text."""
        problem = vectors_problem(self.index, self.embedder, items)
        if problem:
            raise DamagedCache(f"its content disagrees with the log: {problem}")

    def _discard(self, reason: str) -> bool:
        """Rebuild from the log instead of using the snapshot, and say so."""
        log.warning("projection snapshot %s not used: %s; rebuilding from the log", self.snapshot_path, reason)
        self.rebuilt = reason
        self._rebuilt_note = f"{utc_now()}: {reason}"
        return False

    def _mismatch(self, snap: SnapshotPreamble) -> str | None:
        """Why a sound snapshot is not this projection's (then it is rebuilt, not an alarm)."""
        if snap.model != self.embedder.name or snap.dim != self.embedder.dim:
            return f"made with embedding model {snap.model} ({snap.dim}-dim), now {self.embedder.name} ({self.embedder.dim}-dim)"
        if snap.cursor and self.ledger.ckpt is not None and snap.ckpt != self.ledger.ckpt:
            return f"made for checkpoint {snap.ckpt}, this log is {self.ledger.ckpt}"
        return None


def _on_a_thread(work: Callable[[list[Event]], object], chunk: list[Event]) -> Future[None]:
    """``work(chunk)`` on a thread of its own, as a Future. A plain thread, not an executor's:
    an executor refuses new work once the interpreter has begun to exit ("cannot schedule new
    futures after interpreter shutdown"), and the snapshot a library writer leaves at exit is
    folded here."""
    job: Future[None] = Future()

    def run() -> None:
        job.set_running_or_notify_cancel()
        try:
            work(chunk)
        except BaseException as exc:  # handed to the folding thread, which raises it
            job.set_exception(exc)
        else:
            job.set_result(None)

    threading.Thread(target=run, name="fold", daemon=True).start()
    return job


def _wait(job: Future[None]) -> None:
    """Wait for ``job`` to end (one chunk's index fold), through any Ctrl-C meanwhile: the
    caller is already raising, and must not leave a thread changing the state it hands back."""
    while True:
        try:
            job.exception()
            return
        except KeyboardInterrupt:
            continue


def snapshot_anchor(preamble: SnapshotPreamble) -> Anchor:
    """The last event a snapshot folded, as an anchor on the log."""
    return Anchor(SNAPSHOT_NAME, preamble.cursor_hash, preamble.cursor, preamble.ckpt)


def rollback_problem(ledger: Ledger, preamble: SnapshotPreamble) -> str | None:
    """Why the log no longer holds what this snapshot (of this checkpoint) folded, or None."""
    if not preamble.cursor or (ledger.ckpt is not None and preamble.ckpt != ledger.ckpt):
        return None  # nothing folded, or another checkpoint's snapshot: not an anchor on this log
    return ledger.anchor_problem(snapshot_anchor(preamble))


def raise_on_rollback(ledger: Ledger, preamble: SnapshotPreamble) -> None:
    problem = rollback_problem(ledger, preamble)
    if problem:
        raise RollbackDetected(f"{problem}; {ACT_ON_ROLLBACK}", seq=min(preamble.cursor, ledger.last_seq + 1))


@dataclass(frozen=True)
class SnapshotCheck:
    """What ``verify`` and ``status`` say about a checkpoint's snapshot."""

    present: bool
    cursor: int | None = None
    rebuilt: str | None = None  # the last rebuild the snapshot records
    rollback: str | None = None  # the log lost events the snapshot folded
    problem: str | None = None  # unreadable, or its content disagrees with the log


def check_snapshot(
    ledger: Ledger,
    embedder: Embedder | None = None,
    *,
    deep: bool = True,
    progress: Progress | None = None,
    one_read: OneRead | None = None,
) -> SnapshotCheck:
    """Check the checkpoint's snapshot against the log, read-only.

    ``deep`` (``verify``): every checksum and collection of the file, the catalog against a
    fresh fold of the log and a sample of vectors against a fresh embedding. Otherwise
    (``status``): the header's own checksum and its anchor only. ``progress(events compared,
    the snapshot's cursor)`` as the catalog is compared; ``one_read``: the catalog compared
    through the log's own check (see :class:`~projections.engines.snapshot_check.OneRead`).
    """
    path = ledger.path.with_name(SNAPSHOT_NAME)
    try:
        if not deep:
            preamble = read_preamble(path)
            return SnapshotCheck(True, preamble.cursor, preamble.rebuilt, rollback_problem(ledger, preamble))
        view = open_snapshot(path, check=False)
    except FileNotFoundError:
        return SnapshotCheck(False)
    except SnapshotDamaged as damage:
        return _problem(damage.reason)
    except SnapshotError as exc:
        return _problem(f"unreadable ({exc})")
    return _deep_check(ledger, view, embedder, progress, one_read)


def _problem(reason: str, preamble: SnapshotPreamble | None = None) -> SnapshotCheck:
    cursor, rebuilt = (preamble.cursor, preamble.rebuilt) if preamble else (None, None)
    return SnapshotCheck(
        True, cursor, rebuilt, problem=f"{SNAPSHOT_NAME}: {reason}; the next open rebuilds it from the log"
    )


def _deep_check(
    ledger: Ledger,
    view: SnapshotView,
    embedder: Embedder | None,
    progress: Progress | None = None,
    one_read: OneRead | None = None,
) -> SnapshotCheck:
    preamble = view.preamble
    found = SnapshotCheck(True, preamble.cursor, preamble.rebuilt, rollback_problem(ledger, preamble))
    if found.rollback or (preamble.cursor and preamble.ckpt != ledger.ckpt):
        return found
    if embedder is None:
        from projections.models.embedder import get_embedder

        embedder = get_embedder()
    if preamble.model != embedder.name:
        return found  # another model's snapshot is rebuilt on open; its vectors cannot be compared here
    catalog, index = Catalog(view, view.tables), SemanticIndex(embedder, view)
    try:
        view.check_all()
        # the vectors first: with ``one_read`` that is work done while a second process checks the
        # log, not after it; a problem of the catalog is the one reported when both have one
        vectors = vectors_problem(index, embedder, random_items(view, catalog))
        problem = catalog_problem(ledger, catalog, preamble.cursor, progress, one_read) or vectors
        reason = f"its content disagrees with the log: {problem}" if problem else None
    except DamagedCache as damage:
        reason = damage.reason
    return _problem(reason, preamble) if reason else found


def _freezing(told: Callable[[int], None] | None) -> Callable[[int], None]:
    """``told``, after moving what is alive into the collector's permanent generation
    (``gc.freeze``) between two chunks of a large fold. The folded rows are millions of live
    objects; every full collection would walk all of them again while holding the GIL, and
    stall the embedding threads (a 1M fold took 144 s with them, 103 s without). The fold
    unfreezes them when it ends."""

    def tell(done: int) -> None:
        gc.freeze()
        if told is not None:
            told(done)

    return tell
