"""The local projector: folds the log into the catalog and the semantic index, with a cursor.

State and cursor are snapshotted together next to the log, so a resume loads them and
folds only the tail. The snapshot is one zstandard stream: a magic, a msgpack header
(cursor, model, catalog, block ids) and then each block's arrays raw, streamed in and out
so no second copy of the vectors is ever held in memory. The snapshot is a cache: when it is missing,
corrupt, made with another embedding model, or does not match the log (another
checkpoint, a log cut back by recovery), it is ignored and the state rebuilt from seq 0.
Rebuilding from scratch yields exactly the state of incremental folding.
"""
from __future__ import annotations

import logging
import os
import struct
from itertools import islice
from pathlib import Path

import msgspec
import numpy as np
import zstandard

from ledger import Ledger
from ledger.events import Event

from .catalog import Catalog, CatalogState
from .semantic import VECTOR_DTYPE, Block, BlockMeta, Embedder, SemanticIndex

log = logging.getLogger("projections")

SNAPSHOT_NAME = "memory_projection.snapshot.zst"
SNAPSHOT_FORMAT = 4
MAGIC = b"ARISNAP\x00"
_LEN = struct.Struct("<Q")
SNAPSHOT_EVERY = 5000  # events folded since the last snapshot before an automatic save
FOLD_CHUNK = 2048  # events embedded together


class SnapshotPreamble(msgspec.Struct):
    """The snapshot's first record: small, so ``status`` can read a cursor cheaply."""

    format: int
    ckpt: str | None
    cursor: int
    cursor_hash: str
    model: str
    dim: int


class SnapshotBody(msgspec.Struct):
    catalog: CatalogState
    blocks: list[BlockMeta]


class SnapshotError(ValueError):
    """The snapshot file is cut short or malformed."""


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
        """Write the snapshot atomically (temp file + rename), streaming the vectors."""
        blocks = self.index.blocks
        preamble = SnapshotPreamble(
            SNAPSHOT_FORMAT, self.ledger.ckpt, self.cursor, self.cursor_hash, self.embedder.name, self.embedder.dim
        )
        body = SnapshotBody(self.catalog.state(), [BlockMeta(name, b.ids, b.hidden) for name, b in blocks.items()])
        tmp = self.snapshot_path.with_name(f"{self.snapshot_path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f, zstandard.ZstdCompressor(level=3).stream_writer(f, closefd=False) as out:
            out.write(MAGIC)
            for record in (preamble, body):
                data = msgspec.msgpack.encode(record)
                out.write(_LEN.pack(len(data)) + data)
            for block in blocks.values():
                n = block.n
                for array in (block.seqs[:n], block.cleared[:n], block.matrix[:n]):
                    out.write(np.ascontiguousarray(array).data)
        os.replace(tmp, self.snapshot_path)
        self._unsaved = 0
        return self.snapshot_path

    def _load(self) -> bool:
        try:
            with open(self.snapshot_path, "rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as src:
                return self._read_snapshot(src)
        except FileNotFoundError:
            return False
        except (OSError, zstandard.ZstdError, msgspec.DecodeError, msgspec.ValidationError, SnapshotError) as exc:
            log.warning("ignoring unreadable projection snapshot %s (%s); rebuilding", self.snapshot_path, exc)
            return False

    def _read_snapshot(self, src) -> bool:
        preamble = _read_preamble(src)
        reason = self._mismatch(preamble)
        if reason:
            log.warning("ignoring projection snapshot %s: %s; rebuilding", self.snapshot_path, reason)
            return False
        body = msgspec.msgpack.decode(_read_record(src), type=SnapshotBody)
        blocks = {}
        for meta in body.blocks:
            n, block = len(meta.ids), Block(preamble.dim, list(meta.ids), hidden=meta.hidden)
            block.seqs, block.cleared = _read_array(src, (n,), np.int64), _read_array(src, (n,), np.int64)
            block.matrix = _read_array(src, (n, preamble.dim), VECTOR_DTYPE)
            blocks[meta.name] = block
        self.catalog = Catalog(body.catalog)
        self.index = SemanticIndex(self.embedder, blocks)
        self.cursor, self.cursor_hash = preamble.cursor, preamble.cursor_hash
        return True

    def _mismatch(self, snap: SnapshotPreamble) -> str | None:
        if snap.format != SNAPSHOT_FORMAT:
            return f"format {snap.format}, expected {SNAPSHOT_FORMAT}"
        if snap.model != self.embedder.name or snap.dim != self.embedder.dim:
            return f"made with embedding model {snap.model} ({snap.dim}-dim), now {self.embedder.name} ({self.embedder.dim}-dim)"
        if snap.cursor == 0:
            return None
        if snap.ckpt != self.ledger.ckpt:
            return f"made for checkpoint {snap.ckpt}, this log is {self.ledger.ckpt}"
        at = next(self.ledger.events(after=snap.cursor - 1, as_of=snap.cursor), None)
        if at is None or at.hash != snap.cursor_hash:
            return f"its cursor (seq {snap.cursor}) is not an event of this log"
        return None


def snapshot_preamble(checkpoint_dir: Path) -> SnapshotPreamble | None:
    """The cursor and model of the checkpoint's snapshot, without loading it (None if unusable)."""
    try:
        with open(Path(checkpoint_dir) / SNAPSHOT_NAME, "rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as src:
            return _read_preamble(src)
    except (OSError, zstandard.ZstdError, msgspec.DecodeError, msgspec.ValidationError, SnapshotError):
        return None


def snapshot_anchor_problem(ledger: Ledger, last_seq: int) -> str | None:
    """What the snapshot proves is missing from the log, if anything.

    The snapshot records the seq and hash of the last event it folded: a log that now ends
    before that seq, or holds another event there, lost or rewrote its newest events.
    """
    snap = snapshot_preamble(ledger.checkpoint_dir)
    first = next(ledger.events(as_of=1), None)
    if snap is None or snap.cursor == 0 or first is None or snap.ckpt != first.ckpt:
        return None
    if snap.cursor > last_seq:
        return (
            f"the log ends at seq {last_seq}, but its projection snapshot had folded up to seq "
            f"{snap.cursor}: the newest events were removed"
        )
    at = next(ledger.events(after=snap.cursor - 1, as_of=snap.cursor), None)
    if at is None or at.hash != snap.cursor_hash:
        return f"event seq {snap.cursor} is not the one the projection snapshot folded: the log was rewritten"
    return None


def _read_preamble(src) -> SnapshotPreamble:
    if _read_exact(src, len(MAGIC)) != MAGIC:
        raise SnapshotError("not a projection snapshot")
    return msgspec.msgpack.decode(_read_record(src), type=SnapshotPreamble)


def _read_record(src) -> bytes:
    return _read_exact(src, _LEN.unpack(_read_exact(src, _LEN.size))[0])


def _read_exact(src, size: int) -> bytes:
    data = src.read(size)
    if len(data) != size:
        raise SnapshotError("cut short")
    return data


def _read_array(src, shape: tuple[int, ...], dtype) -> np.ndarray:
    """Stream an array straight into its own buffer (no intermediate bytes object)."""
    array = np.empty(shape, dtype)
    if not array.size:
        return array
    view = memoryview(array).cast("B")
    filled = 0
    while filled < len(view):
        got = src.readinto(view[filled:])
        if not got:
            raise SnapshotError("cut short")
        filled += got
    return array
