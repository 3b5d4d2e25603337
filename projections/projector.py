"""The local projector: folds the log into the catalog and the semantic index, with a cursor.

State and cursor are snapshotted together (msgpack, zstandard) next to the log, so a
resume loads them and folds only the tail. The snapshot is a cache: when it is missing,
corrupt, made with another embedding model, or does not match the log (another
checkpoint, a log cut back by recovery), it is ignored and the state rebuilt from seq 0.
Rebuilding from scratch yields exactly the state of incremental folding.
"""
from __future__ import annotations

import logging
import os
from itertools import islice
from pathlib import Path

import msgspec
import zstandard

from ledger import Ledger
from ledger.events import Event

from .catalog import Catalog, CatalogState
from .semantic import Embedder, SemanticIndex, SemanticState

log = logging.getLogger("projections")

SNAPSHOT_NAME = "memory_projection.snapshot.zst"
SNAPSHOT_FORMAT = 1
SNAPSHOT_EVERY = 5000  # events folded since the last snapshot before an automatic save
FOLD_CHUNK = 2048  # events embedded together


class Snapshot(msgspec.Struct):
    format: int
    ckpt: str | None
    cursor: int
    cursor_hash: str
    catalog: CatalogState
    semantic: SemanticState


class Projector:
    """Catalog + semantic index of one ledger, kept at ``cursor`` (the last folded seq)."""

    def __init__(self, ledger: Ledger, embedder: Embedder, *, use_snapshot: bool = True) -> None:
        self.ledger = ledger
        self.embedder = embedder
        self.snapshot_path = ledger.checkpoint_dir / SNAPSHOT_NAME
        self.cursor = 0
        self.cursor_hash = ""
        self.catalog = Catalog()
        self.index = SemanticIndex(embedder)
        self._unsaved = 0
        self.loaded_from_snapshot = use_snapshot and self._load()

    # -- folding ---------------------------------------------------------------------

    def catch_up(self) -> int:
        """Fold every event after the cursor; return how many were folded."""
        if self.ledger.refresh() <= self.cursor:
            return 0
        folded = 0
        events = self.ledger.events(after=self.cursor)
        while chunk := list(islice(events, FOLD_CHUNK)):
            self.apply(chunk)
            folded += len(chunk)
        if self._unsaved >= SNAPSHOT_EVERY:
            self.save()
        return folded

    def apply(self, events: list[Event]) -> None:
        """Fold events that directly follow the cursor (in seq order)."""
        if not events:
            return
        if events[0].seq != self.cursor + 1:
            raise ValueError(f"projection at seq {self.cursor} cannot fold seq {events[0].seq}")
        for event in events:
            self.catalog.apply(event)
        self.index.apply_batch(events)
        self.cursor, self.cursor_hash = events[-1].seq, events[-1].hash
        self._unsaved += len(events)

    def lag(self) -> int:
        """Events in the log not yet folded."""
        return max(0, self.ledger.refresh() - self.cursor)

    # -- snapshot --------------------------------------------------------------------

    def save(self) -> Path:
        """Write the snapshot atomically (temp file + rename)."""
        snap = Snapshot(
            SNAPSHOT_FORMAT, self.ledger.ckpt, self.cursor, self.cursor_hash, self.catalog.state(), self.index.state()
        )
        data = zstandard.ZstdCompressor(level=3).compress(msgspec.msgpack.encode(snap))
        tmp = self.snapshot_path.with_name(f"{self.snapshot_path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.snapshot_path)
        self._unsaved = 0
        return self.snapshot_path

    def _load(self) -> bool:
        try:
            raw = zstandard.ZstdDecompressor().decompress(self.snapshot_path.read_bytes())
            snap = msgspec.msgpack.decode(raw, type=Snapshot)
        except FileNotFoundError:
            return False
        except (OSError, zstandard.ZstdError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("ignoring unreadable projection snapshot %s (%s); rebuilding", self.snapshot_path, exc)
            return False
        reason = self._mismatch(snap)
        if reason:
            log.warning("ignoring projection snapshot %s: %s; rebuilding", self.snapshot_path, reason)
            return False
        self.catalog = Catalog(snap.catalog)
        self.index = SemanticIndex(self.embedder, snap.semantic)
        self.cursor, self.cursor_hash = snap.cursor, snap.cursor_hash
        return True

    def _mismatch(self, snap: Snapshot) -> str | None:
        if snap.format != SNAPSHOT_FORMAT:
            return f"format {snap.format}, expected {SNAPSHOT_FORMAT}"
        if snap.semantic.model != self.embedder.name or snap.semantic.dim != self.embedder.dim:
            return (
                f"made with embedding model {snap.semantic.model} ({snap.semantic.dim}-dim), "
                f"now {self.embedder.name} ({self.embedder.dim}-dim)"
            )
        if snap.cursor == 0:
            return None
        if snap.ckpt != self.ledger.ckpt:
            return f"made for checkpoint {snap.ckpt}, this log is {self.ledger.ckpt}"
        at = next(self.ledger.events(after=snap.cursor - 1, as_of=snap.cursor), None)
        if at is None or at.hash != snap.cursor_hash:
            return f"its cursor (seq {snap.cursor}) is not an event of this log"
        return None
