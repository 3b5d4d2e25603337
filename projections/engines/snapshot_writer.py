"""Writing the projection snapshot (the format is :mod:`projections.engines.snapshot`'s header):
the catalog's and the index's rows in collection order, each record a zstd frame with a
dictionary trained on a sample, the header's tables, a sha256 per 64 KiB chunk; written to a
temporary file made exclusively and renamed into place, so a reader that has the old file
mapped keeps it whole, and a temporary file a killed writer left is removed by the next save.
"""

from __future__ import annotations

import hashlib
import os
import random
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, assert_never, cast

import msgspec
import numpy as np
import zstandard

from ledger.checkpoint_format import SNAPSHOT_TEMP_SUFFIX
from ledger.processes import pid_alive
from ledger.safe_io import kept_mode
from projections.engines.snapshot import (
    _ALIGN,
    _LEN,
    _TRAILER,
    CHUNK,
    FENCE,
    MAGIC,
    PROLOGUE,
    ROW_COLUMNS,
    Column,
    Layout,
    SnapshotPreamble,
    SnapshotView,
    _label,
)
from projections.models.catalog import Catalog
from projections.models.frozen import effective_cleared
from projections.models.semantic import SemanticIndex

STALE_TEMP_SECONDS = 3600  # a temporary file this old is stale even if its pid was reused
DICTIONARY_BYTES = 16 << 10  # the records' zstd dictionary (16 KiB: as small as larger ones, faster to decode)
DICTIONARY_FROM = 1000  # records: fewer are stored raw (a dictionary would not pay)
DICTIONARY_F = 16  # log2 of the dictionary trainer's frequency table
DICTIONARY_SAMPLES = 20000  # records a dictionary is trained on, chosen at random
RECORD_LEVEL = 3  # zstd level of the records (higher levels are larger with a dictionary, and slower)
LAYOUT_LEVEL = 3  # zstd level of the header's layout


def write_snapshot(path: Path, preamble: SnapshotPreamble, catalog: Catalog, index: SemanticIndex) -> None:
    """Write the fold atomically (temporary file, rename). Raises OSError (disk full, read-only)
    and leaves no temporary file behind when it does; DamagedCache when stored rows it copies
    fail their check."""
    remove_stale_temps(path)
    mode = kept_mode(path)  # the new file keeps the old one's permission bits
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(8)}{SNAPSHOT_TEMP_SUFFIX}")
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644 if mode is None else 0o600
    )
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            out = _Out(f)
            out.write(PROLOGUE)
            layout = _write_sections(out, catalog, index, preamble.dim)
            data_end = out.finish()
            head = msgspec.json.encode(preamble)
            body = zstandard.ZstdCompressor(level=LAYOUT_LEVEL).compress(msgspec.json.encode(layout))
            header = _LEN.pack(len(head)) + head + _LEN.pack(len(body)) + body + b"".join(out.digests)
            f.write(header)
            f.write(_TRAILER.pack(data_end, len(header), hashlib.sha256(PROLOGUE + header).digest(), MAGIC))
        os.replace(tmp, path)  # not fsynced: after a power loss a garbled file fails its checksums and is rebuilt
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class _Out:
    """Writes the data part of a snapshot and the sha256 of each of its 64 KiB chunks."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.pos = 0
        self.digests: list[bytes] = []
        self._hash = hashlib.sha256()

    def write(self, data: Any) -> None:
        view = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else memoryview(_as_bytes(data))  # type: ignore[arg-type]
        while len(view):
            piece = view[: CHUNK - self.pos % CHUNK]
            self._hash.update(piece)
            self._f.write(piece)
            self.pos += len(piece)
            if self.pos % CHUNK == 0:
                self.digests.append(self._hash.digest())
                self._hash = hashlib.sha256()
            view = view[len(piece) :]

    def align(self, to: int = _ALIGN) -> int:
        self.write(b"\x00" * (-self.pos % to))
        return self.pos

    def finish(self) -> int:
        if self.pos % CHUNK:
            self.digests.append(self._hash.digest())
        return self.pos


def _as_bytes(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


class _Collection:
    """One collection's rows as the writer reads them: stored (views) and fresh (memory)."""

    def __init__(self, name: str, catalog: Catalog, index: SemanticIndex) -> None:
        self.name = name
        self.view = cast(SnapshotView, catalog.base)  # the writer copies stored rows only from a snapshot view
        self.stored = catalog.stored(name)
        self.after = catalog.after(name)
        self.fresh = catalog.fresh(name)
        self.block = index.blocks.get(name)
        fresh_rows = len(self.fresh.ids) if self.fresh else 0
        block_rows = self.block.n if self.block else 0
        if fresh_rows != block_rows or (self.fresh and self.block and self.block.ids != self.fresh.ids):
            raise ValueError(f"the index of {_label(name)} holds {block_rows} fresh rows, the catalog {fresh_rows}")
        self.n = (self.stored.n if self.stored is not None else 0) + fresh_rows

    def column(self, section: Column, width: int) -> list[Any]:
        """This collection's part of a fixed-width section, as arrays or buffers to write in order."""
        stored, fresh, block = self.stored, self.fresh, self.block
        parts: list[Any]
        match section:
            case "seqs":
                parts = [stored.seqs if stored is not None else None, np.asarray(fresh.seqs, "<i8") if fresh else None]
            case "cleared":
                parts = [
                    effective_cleared(stored, self.after) if stored is not None else None,
                    np.asarray(fresh.cleared, "<i8") if fresh else None,
                ]
            case "ids":
                parts = [self.stored_ids(width), self.fresh_ids(width)]
            case "vectors" | "low" | "scales":
                parts = [self.view.copy(self.name, section) if stored is not None else None]
                if block is not None:
                    parts.append({"vectors": block.high, "low": block.low, "scales": block.scales}[section][: block.n])
            case _:
                assert_never(section)
        return [p for p in parts if p is not None]

    def records(self, pack: Callable[[bytes], bytes], keep: bool) -> Iterator[tuple[Any, np.ndarray]]:
        """(bytes to write, each record's length in them): stored records copied as they are
        (``keep``: the new file has the old one's dictionary) or packed again, then the fresh ones."""
        if self.stored is not None:
            data = memoryview(self.view.copy(self.name, "records"))
            lengths = np.diff(self.stored.offsets)
            if keep:
                yield data, lengths
            else:
                ends = np.cumsum(lengths).tolist()
                packed = [pack(self.view.unpack(data[a:b])) for a, b in zip([0, *ends[:-1]], ends)]
                yield b"".join(packed), np.fromiter(map(len, packed), np.int64, len(packed))
        if self.fresh:
            packed = [pack(r) for r in self.fresh.records]
            yield b"".join(packed), np.fromiter(map(len, packed), np.int64, len(packed))

    def record(self, i: int) -> bytes:
        """Row ``i``'s record, JSON."""
        stored = self.stored.n if self.stored is not None else 0
        if i < stored:
            assert self.stored is not None
            return self.stored.record(i)
        assert self.fresh is not None
        return self.fresh.records[i - stored]

    def stored_ids(self, width: int) -> np.ndarray | None:
        if self.stored is None:
            return None
        return np.frombuffer(self.view.copy(self.name, "ids"), self.stored.ids.dtype).astype(f"S{width}")

    def fresh_ids(self, width: int) -> np.ndarray | None:
        return np.array([i.encode() for i in self.fresh.ids], f"S{width}") if self.fresh else None


def _dictionary(catalog: Catalog, collections: list[_Collection], n: int) -> tuple[bytes, bool]:
    """(the records' dictionary, whether the stored records keep theirs): the old file's while
    it holds at least half the rows (so records are recompressed O(1) times each, amortised),
    else one trained on a random sample; none (records raw) below DICTIONARY_FROM rows."""
    view = cast(SnapshotView | None, catalog.base)
    old = view.dictionary() if view is not None else b""
    if old and 2 * view.rows_total >= n:  # type: ignore[union-attr]
        return old, True
    if n < DICTIONARY_FROM:
        return b"", not old
    starts = np.cumsum([0] + [c.n for c in collections])
    picked = sorted(random.Random(n).sample(range(n), min(DICTIONARY_SAMPLES, n)))
    which = np.searchsorted(starts, picked, side="right") - 1
    samples = [collections[b].record(i - int(starts[b])) for i, b in zip(picked, which.tolist())]
    try:
        # f: a 2^16-entry frequency table (zstd's default 2^20 costs ~10 MB more at the close of
        # a small checkpoint's process; the records compress to the same size within 0.3 %)
        trained = zstandard.train_dictionary(DICTIONARY_BYTES, samples, level=RECORD_LEVEL, f=DICTIONARY_F)
    except zstandard.ZstdError:  # too few or too uniform samples: records stay raw
        return b"", not old
    return trained.as_bytes(), False


def _packer(dictionary: bytes) -> Callable[[bytes], bytes]:
    if not dictionary:
        return bytes
    compressor = zstandard.ZstdCompressor(
        level=RECORD_LEVEL,
        dict_data=zstandard.ZstdCompressionDict(dictionary),
        write_checksum=False,  # the file's chunks have their sha256
        write_dict_id=False,
    )
    return compressor.compress


def _write_sections(out: _Out, catalog: Catalog, index: SemanticIndex, dim: int) -> Layout:
    collections = [c for c in (_Collection(name, catalog, index) for name in catalog.collections()) if c.n]
    n = sum(c.n for c in collections)
    width = max(
        [c.stored.ids.dtype.itemsize for c in collections if c.stored is not None]
        + [len(i.encode()) for c in collections if c.fresh for i in c.fresh.ids]
        + [1]
    )
    sections: dict[str, tuple[int, int]] = {}
    for section in ROW_COLUMNS:
        start = out.align()
        for c in collections:
            for part in c.column(section, width):
                out.write(part)
        sections[section] = (start, out.pos - start)
    dictionary, keep = _dictionary(catalog, collections, n)
    pack = _packer(dictionary)
    start = out.align()
    lengths = [np.zeros(1, np.int64)]
    for c in collections:
        for data, sizes in c.records(pack, keep):
            out.write(data)
            lengths.append(sizes)
    sections["records"] = (start, out.pos - start)
    start = out.align(CHUNK if dictionary else _ALIGN)  # a collection's offsets never share a chunk with records
    out.write(np.cumsum(np.concatenate(lengths)).astype("<i8"))
    sections["offsets"] = (start, out.pos - start)
    start = out.align(CHUNK if dictionary else _ALIGN)  # in chunks of its own: damage elsewhere
    out.write(dictionary)  # never stops every record from being read
    sections["dictionary"] = (start, out.pos - start)
    ids = (
        np.concatenate([p for c in collections for p in c.column("ids", width)])
        if collections
        else np.empty(0, f"S{width}")
    )
    order = np.argsort(ids, kind="stable")
    ids = ids[order]  # sorted (one copy of the ids at a time: 36 MB at a million rows)
    start = out.align(CHUNK if dictionary else _ALIGN)
    out.write(ids)
    sections["sorted"] = (start, out.pos - start)
    start = out.align()
    out.write(order.astype("<i8", copy=False))
    sections["id_rows"] = (start, out.pos - start)
    spans, at = [], 0
    for c in collections:
        spans.append((c.name, at, c.n))
        at += c.n
    fence = [i.decode() for i in ids[::FENCE]]
    return Layout(n, width, sections, spans, fence, catalog.tables())


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove temporary files of ``path`` left by a writer that died (its pid is gone, or
    the file is older than an hour); return them."""
    removed = []
    for tmp in path.parent.glob(f"{path.name}.*{SNAPSHOT_TEMP_SUFFIX}"):
        pid = tmp.name[len(path.name) + 1 : -len(SNAPSHOT_TEMP_SUFFIX)].split(".")[0]  # <name>.<pid>[.<random>].tmp
        try:
            alive = pid.isdigit() and int(pid) != os.getpid() and pid_alive(int(pid))
            if not alive or time.time() - tmp.stat().st_mtime > STALE_TEMP_SECONDS:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            continue
    return removed
