"""The projection snapshot file: the catalog's and the index's rows, read in place. Format 7.

A snapshot is derived data, so it is checked before anything in it is used, but it is not
read whole: it is memory-mapped, and a reopen reads only its header; the rows of a
collection (a node's entries, or the ReAct trace) are checked and read the first time a
read needs them. So a reopen and a scoped search cost the same in a checkpoint of any size,
and memory follows what is read. Layout (little-endian, sections 64-byte aligned)::

    prologue  64 bytes            b"ARISNAP\\x00", u32 format (7), zeros
    sections, rows in collection order (each collection's rows in seq order):
      seqs     int64[N]           the event's seq
      cleared  int64[N]           the seq of the tombstone that hid the row, or NEVER
      ids      S{w}[N]            event ids
      vectors  int8[N, dim]       the embedding quantised (``frozen.quantise``: 12-bit codes,
                                  -2047..2047), their high bytes (``frozen.split``)
      low      uint8[N, dim / 2]  their low 4 bits, two per byte
      scales   float32[N]         each row's scale (its largest component / 2047)
      records  bytes              the rest of the row, JSON (catalog.EntryRecord / StepRecord),
                                  each record a zstd frame alone, with the dictionary below
      offsets  int64[N + 1]       where each record starts in ``records``
      dictionary bytes            the zstd dictionary of the records (empty: records stored raw)
      sorted   S{w}[N]            the ids sorted, to find a row by id
      id_rows  int64[N]           the row of each sorted id
    header    u64 length, preamble (JSON: format, ckpt, cursor, cursor_hash, model, dim, rebuilt)
              u64 length, layout (zstd-compressed JSON: sections, collections [name, first row,
                          rows], every 1024th sorted id, the catalog's tables: nodes, seeds,
                          tombstones)
              sha256 of every 64 KiB chunk of the file before the header
    trailer   u64 header offset, u64 header length, sha256(prologue + header), b"ARISNAP\\x00"

Checks: the header's sha256 on every open; a chunk's sha256 before any byte of it is used
(all chunks at once when the file is at most 64 MiB); a collection's structure (seqs
increasing, offsets in range, tombstones exactly those its tombstone events make) when it
is first read; ``check_all`` does everything (``verify``). A failure raises SnapshotDamaged,
and the projection is rebuilt from the log. The file is written (``snapshot_writer``) to a temporary name made
exclusively (``<name>.<pid>.<random>.tmp``: nobody can prepare it, link or file) and renamed
into place, keeping the old file's mode, never changed in place (a reader may have it mapped); a
temporary file left by a killed process is removed by the next save. It is opened for reading
only as a regular file, never through a link (``ledger.safe_io.open_file``): anything else in
its place is unreadable, and rebuilt.
"""

from __future__ import annotations

import bisect
import hashlib
import mmap
import os
import struct
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, cast

import msgspec
import numpy as np
import zstandard

from ledger.checkpoint_format import SNAPSHOT_NAME
from ledger.safe_io import UnsafeFile, open_file
from projections.models.catalog import CatalogTables
from projections.models.frozen import NEVER, REACT, DamagedCache, Records, Rows, VectorCache

SNAPSHOT_FORMAT = 7
MAGIC = b"ARISNAP\x00"
PROLOGUE = (MAGIC + struct.pack("<I", SNAPSHOT_FORMAT)).ljust(64, b"\x00")
CHUNK = 1 << 16  # bytes per checksummed chunk
FENCE = 1024  # every FENCE-th sorted id is kept in the header
CHECK_WHOLE_UP_TO = 64 << 20  # a file this small is checked whole on open (~35 ms)
SECTIONS = (
    *("seqs", "cleared", "ids", "vectors", "low", "scales"),
    *("records", "offsets", "dictionary", "sorted", "id_rows"),
)
Column = Literal["seqs", "cleared", "ids", "vectors", "low", "scales"]  # fixed-width sections, a collection at a time
ROW_COLUMNS: tuple[Column, ...] = ("seqs", "cleared", "ids", "vectors", "low", "scales")  # one value per row
VECTOR_CACHE_BYTES = 64 << 20  # dequantised rows kept for the collections searched last (~32,000 rows of 256)
RECORD_MOST = 1 << 30  # a record said to be larger is decompressed alone (``unpack_many``)
_ALIGN = 64
_LEN = struct.Struct("<Q")
_TRAILER = struct.Struct("<QQ32s8s")
_DIGEST = 32


class SnapshotPreamble(msgspec.Struct):
    """The snapshot's first record: small, so ``status`` reads it without the rest."""

    format: int
    ckpt: str | None
    cursor: int
    cursor_hash: str
    model: str
    dim: int
    rebuilt: str | None = None  # when and why the state was last rebuilt from the log instead of loaded


class Layout(msgspec.Struct):
    """Where everything is: sections, collections, the id fence and the catalog's tables."""

    rows: int
    id_width: int
    sections: dict[str, tuple[int, int]]  # name → (file offset, bytes)
    collections: list[tuple[str, int, int]]  # (name, first row, rows) in order of first appearance
    fence: list[str]
    tables: CatalogTables


class SnapshotError(ValueError):
    """The snapshot file is cut short, damaged, or not a format-7 snapshot."""


class SnapshotDamaged(SnapshotError, DamagedCache):
    """A check of the snapshot's content failed; ``reason`` says how, as warnings say it."""

    def __init__(self, reason: str) -> None:
        DamagedCache.__init__(self, reason)


def unreadable(detail: str) -> SnapshotDamaged:
    return SnapshotDamaged(f"unreadable ({detail})")


def disagrees(detail: str) -> SnapshotDamaged:
    return SnapshotDamaged(f"its content disagrees with the log: {detail}")


# -- reading ------------------------------------------------------------------------------


def read_preamble(path: Path) -> SnapshotPreamble:
    """Only the preamble (cursor, model, …) of a snapshot whose header checksum is right: for
    ``status``. Raises FileNotFoundError or SnapshotError."""
    fd = _open_for_reading(path)
    try:
        return _read_header(fd)[0]
    finally:
        os.close(fd)


def _open_for_reading(path: Path) -> int:
    """The snapshot opened as a regular file only: a link, a FIFO, a device or a directory in its
    place is unreadable (SnapshotDamaged: rebuilt from the log), never followed or waited on."""
    try:
        return open_file(path, os.O_RDONLY)
    except (UnsafeFile, IsADirectoryError) as exc:
        raise unreadable(str(exc)) from None


def open_snapshot(path: Path, *, check: bool | None = None) -> SnapshotView:
    """Open a snapshot for reading in place; ``check`` every chunk and collection now (True),
    on first use (False), or now only when the file is small (None). Raises
    FileNotFoundError, or SnapshotError (SnapshotDamaged when a check failed)."""
    return SnapshotView(path, check=check)


class SnapshotView:
    """A snapshot mapped read-only: the ``Frozen`` fold the catalog and the index sit on."""

    def __init__(self, path: Path, *, check: bool | None = None) -> None:
        self.path = path
        self._fd = _open_for_reading(path)
        self._closer = weakref.finalize(self, os.close, self._fd)  # when the view is dropped (no warning)
        # Not at exit: a cached backend saves its snapshot then, copying rows from this file, and
        # finalizers would run first (a closed descriptor, or a reused one); the OS closes it after.
        self._closer.atexit = False
        try:
            self.preamble, layout, digests, self._data_end = _read_header(self._fd)
            _check_layout(layout, self.preamble, self._data_end)
            self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
            self.cursor = self.preamble.cursor
            self.tables = layout.tables
            self._digests = digests
            self._ok = bytearray(len(digests) // _DIGEST)
            self._rows: dict[str, Rows] = {}
            self._collections = {name: (start, count) for name, start, count in layout.collections}
            self.names = [name for name, _start, _count in layout.collections]
            self._starts = [start for _name, start, _count in layout.collections]
            self._counts = [count for _name, _start, count in layout.collections]
            self._fence = [i.encode() for i in layout.fence]
            self._sections = layout.sections
            self._arrays(layout)
            self.cache = VectorCache(VECTOR_CACHE_BYTES)
            self._decompress: Callable[[memoryview], bytes] | None = None  # made when a record is first read
            self._dctx: zstandard.ZstdDecompressor | None = None  # and this, when records are compressed
            if check or (check is None and self._data_end <= CHECK_WHOLE_UP_TO):
                self.check_all()
        except BaseException:
            self._closer()
            raise

    def _arrays(self, layout: Layout) -> None:
        n, w, dim = layout.rows, layout.id_width, self.preamble.dim
        ids = np.dtype(f"S{max(w, 1)}")

        def view(name: str, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
            offset, _size = self._sections[name]
            return np.frombuffer(self._map, dtype, int(np.prod(shape)), offset).reshape(shape)

        self.rows_total = n
        self._seqs = view("seqs", "<i8", (n,))
        self._cleared = view("cleared", "<i8", (n,))
        self._ids = view("ids", ids, (n,))
        self._vectors = view("vectors", "i1", (n, dim))
        self._low = view("low", "u1", (n, (dim + 1) // 2))
        self._scales = view("scales", "<f4", (n,))
        self._offsets = view("offsets", "<i8", (n + 1,))
        offset, size = self._sections["records"]
        self._records = memoryview(self._map)[offset : offset + size]
        # each byte of the records with the 15 after it (the file goes on after them: offsets, header, trailer)
        heads = len(self._map) - offset - _HEAD + 1
        self._heads = np.ndarray((max(heads, 0),), f"S{_HEAD}", self._map, offset, (1,))
        self._sorted = view("sorted", ids, (n,))
        self._id_rows = view("id_rows", "<i8", (n,))

    def dictionary(self) -> bytes:
        """The records' zstd dictionary (empty: records are stored raw), its chunks checked."""
        offset, size = self._sections["dictionary"]
        self._check_bytes(offset, offset + size)
        return _pread(self._fd, size, offset)

    def unpack(self, record: memoryview) -> bytes:
        """A stored record's JSON (raises SnapshotDamaged when it does not decompress). The
        dictionary is read, and its chunks checked, when the first record is."""
        decompress = self._decompress or self._decompressor()
        try:
            return decompress(record)
        except zstandard.ZstdError as exc:
            raise disagrees(f"a record does not decompress ({exc})") from None

    def unpack_many(self, starts: np.ndarray, ends: np.ndarray) -> Records:
        """The records at [starts, ends) of the records section, end to end with their lengths:
        the bytes ``unpack`` gives one by one (and the same SnapshotDamaged), decompressed in one
        call. The frames'
        headers are read here first, and the batch is given their sizes: zstandard's batch call
        misreads some frames ``unpack`` reads right (a first frame of size 0 frees memory twice,
        a size near 2**64 overflows its buffer, a skippable frame reads as empty). So when any
        frame is not a plain one of 1..RECORD_MOST bytes, or the batch fails, the records are
        decompressed one by one, and ``unpack`` has the last word (names the first bad one)."""
        if self._decompress is None:
            self._decompressor()
        if self._dctx is not None and len(starts):
            sizes = _content_sizes(self._heads, starts, ends)
            if sizes is not None:
                segments = np.stack([starts, ends - starts], 1).astype("<u8").tobytes()
                frames = zstandard.BufferWithSegments(self._records, segments)
                try:
                    found = self._dctx.multi_decompress_to_buffer(frames, decompressed_sizes=sizes.tobytes(), threads=0)
                except (zstandard.ZstdError, ValueError, MemoryError):
                    pass  # (the record that fails is named below, as unpack names it)
                else:
                    data = b"".join(cast(Iterable[bytes], found))  # (segments: iterable, buffers, unlike its stub says)
                    if len(data) == int(sizes.sum()):  # (each frame is checked against its size as it is read)
                        return Records(data, sizes.astype(np.int64))
        records = self._records
        return Records.of([self.unpack(records[a:b]) for a, b in zip(starts.tolist(), ends.tolist())])

    def _decompressor(self) -> Callable[[memoryview], bytes]:
        """How a record is decompressed: with the dictionary (read now, its chunks checked), or
        ``bytes`` when records are stored raw."""
        dictionary = self.dictionary()
        if dictionary:
            self._dctx = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(dictionary))
            self._decompress = self._dctx.decompress
        else:
            self._decompress = bytes
        return self._decompress

    # -- the Frozen protocol -----------------------------------------------------------

    def count(self, name: str) -> int:
        found = self._collections.get(name)
        return found[1] if found else 0

    def rows(self, name: str) -> Rows | None:
        rows = self._rows.get(name)
        if rows is None:
            if name not in self._collections:
                return None
            rows = self._rows[name] = self._load(name)
        return rows

    def locate(self, item_id: str) -> tuple[str, int] | None:
        key = item_id.encode()
        k = bisect.bisect_right(self._fence, key) - 1
        if k < 0 or len(key) > self._sorted.dtype.itemsize:
            return None
        lo, hi = k * FENCE, min((k + 1) * FENCE, self.rows_total)
        self._check_rows("sorted", lo, hi)
        self._check_rows("id_rows", lo, hi)
        j = lo + int(np.searchsorted(self._sorted[lo:hi], key))
        if j == hi or self._sorted[j] != key:
            return None
        row = int(self._id_rows[j])
        if not 0 <= row < self.rows_total:
            raise disagrees(f"its id index points at row {row} of {self.rows_total}")
        name, rows, i = self.rows_at(row)
        if rows.ids[i] != key:
            raise disagrees(f"its id index does not match the rows of {_label(name)}")
        return name, i

    def row_at(self, row: int) -> tuple[str, int]:
        """(collection, index in it) of a row of the file."""
        b = bisect.bisect_right(self._starts, row) - 1
        return self.names[b], row - self._starts[b]

    def rows_at(self, row: int) -> tuple[str, Rows, int]:
        """(collection, its rows, index in them) of a row of the file."""
        name, i = self.row_at(row)
        rows = self.rows(name)
        assert rows is not None, "row_at names only collections that hold rows"
        return name, rows, i

    def span(self, name: str, section: str) -> tuple[int, int]:
        """The file's bytes [lo, hi) holding a collection's part of a section."""
        start, count = self._collections[name]
        offset, size = self._sections[section]
        if section == "records":
            offsets = self._offsets[start : start + count + 1]
            return offset + int(offsets[0]), offset + int(offsets[-1])
        width = size // (self.rows_total + (section == "offsets"))
        return offset + start * width, offset + (start + count + (section == "offsets")) * width

    def copy(self, name: str, section: str) -> bytes:
        """A checked copy of a collection's part of a section, read with pread (a save
        copies the whole file without mapping it into memory)."""
        self.rows(name)
        lo, hi = self.span(name, section)
        return _pread(self._fd, hi - lo, lo)

    def check_all(self) -> None:
        """Check every chunk and every collection's structure: all the collections at once
        (``_sound``), then alone those it leaves out, in order, so the first wrong one is named."""
        self._check_bytes(0, self._data_end)
        sound = self._sound()
        if any(sound):
            hidden = np.add.reduceat(self._cleared != NEVER, self._starts, dtype=np.int64).tolist()
            for name, ok, start, count, hides in zip(self.names, sound, self._starts, self._counts, hidden):
                if ok and name not in self._rows:
                    self._rows[name] = self._make_rows(name, start, start + count, hides)
        for name in self.names:
            self.rows(name)
        if self.rows_total:
            self._check_id_index()

    # -- checks --------------------------------------------------------------------------

    def _check_bytes(self, lo: int, hi: int) -> None:
        """Check the chunks holding bytes [lo, hi) of the file (each once). They are read
        with pread, so checking touches no page of the mapping: only reads do."""
        for c in range(lo // CHUNK, (max(hi, lo + 1) - 1) // CHUNK + 1):
            if not self._ok[c]:
                start = c * CHUNK
                self._verify(c, _pread(self._fd, min(CHUNK, self._data_end - start), start))

    def _verify(self, chunk: int, data: bytes) -> None:
        if hashlib.sha256(data).digest() != self._digests[chunk * _DIGEST : (chunk + 1) * _DIGEST]:
            lo = chunk * CHUNK
            raise unreadable(f"checksum mismatch in bytes {lo}-{lo + len(data)}: changed after it was written")
        self._ok[chunk] = 1

    def _check_rows(self, section: str, start: int, stop: int) -> None:
        offset, size = self._sections[section]
        width = size // max(self.rows_total + (section == "offsets"), 1)
        self._check_bytes(offset + start * width, offset + stop * width)

    def _load(self, name: str) -> Rows:
        """A collection's rows, their chunks and structure checked."""
        start, count = self._collections[name]
        stop = start + count
        for section in ROW_COLUMNS:
            self._check_rows(section, start, stop)
        self._check_rows("offsets", start, stop + 1)
        offsets = self._offsets[start : stop + 1]
        if np.any(np.diff(offsets) < 0) or offsets[0] < 0 or offsets[-1] > len(self._records):
            raise disagrees(f"record offsets of {_label(name)} are out of order or out of range")
        records_at = self._sections["records"][0]
        self._check_bytes(records_at + int(offsets[0]), records_at + int(offsets[-1]))
        rows = self._make_rows(name, start, stop, int(np.count_nonzero(self._cleared[start:stop] != NEVER)))
        problem = _rows_problem(name, rows, self.tables, self.cursor)
        if problem:
            raise disagrees(problem)
        return rows

    def _make_rows(self, name: str, start: int, stop: int, hidden: int) -> Rows:
        return Rows(
            name,
            self._seqs[start:stop],
            self._cleared[start:stop],
            self._ids[start:stop],
            self._vectors[start:stop],
            self._low[start:stop],
            self._scales[start:stop],
            self._offsets[start : stop + 1],
            self._records,
            hidden,
            self.cache,
            self.unpack,
            self.unpack_many,
        )

    def _sound(self) -> list[bool]:
        """Which collections ``_load`` would pass, checked all at once once every chunk is
        (``check_all``): record offsets in order and in range, seqs increasing within 1..cursor,
        tombstones those the purges make. Collections with node_cleared tombstones of their own
        are left to ``_load``, and so is every collection when any check fails anywhere."""
        none = [False] * len(self.names)
        offsets, seqs, n = self._offsets, self._seqs, self.rows_total
        if not n or len(self._collections) != len(self.names):
            return none
        if offsets[0] < 0 or offsets[-1] > len(self._records) or np.any(offsets[1:] < offsets[:-1]):
            return none
        firsts = np.asarray(self._starts, np.int64)
        lasts = np.append(firsts[1:], n) - 1
        increasing = seqs[1:] > seqs[:-1]
        increasing[lasts[:-1]] = True  # (from one collection to the next)
        if np.any(seqs[firsts] < 1) or np.any(seqs[lasts] > self.cursor) or not np.all(increasing):
            return none
        alone = [name != REACT and bool(self.tables.clears.get(name)) for name in self.names]
        try:
            expected = _tombstones_after(sorted(self.tables.purges), seqs)
        except OverflowError:
            return none  # (a tombstone beyond int64: _load says what it says)
        wrong = expected != self._cleared
        if any(alone):
            wrong &= ~np.repeat(np.asarray(alone), self._counts)
        if np.any(wrong):
            return none
        return [not own for own in alone]

    def _check_id_index(self) -> None:
        """The sorted ids are this file's ids, each once (``check_all`` only: O(rows))."""
        order = self._id_rows
        if np.any(order < 0) or np.any(order >= self.rows_total):
            raise disagrees("its id index points outside its rows")
        if np.any(self._sorted[1:] <= self._sorted[:-1]) or not np.array_equal(self._ids[order], self._sorted):
            raise disagrees("its id index is not the sorted ids of its rows")
        fence = [i.decode() for i in self._sorted[::FENCE]]
        if fence != [i.decode() for i in self._fence]:
            raise disagrees("its id fence is not every 1024th sorted id")


def _pread(fd: int, size: int, offset: int) -> bytes:
    """Exactly ``size`` bytes at ``offset`` (pread may return less than asked for)."""
    data = os.pread(fd, size, offset)
    if len(data) == size:
        return data
    parts = [data]
    while size > sum(map(len, parts)):
        got = sum(map(len, parts))
        part = os.pread(fd, size - got, offset + got)
        if not part:
            raise unreadable("cut short while it was read")
        parts.append(part)
    return b"".join(parts)


def _frame_tables() -> tuple[np.ndarray, ...]:
    """By a zstd frame's descriptor byte (RFC 8878 3.1.1.1.1): where its header ends, and the
    shift, mask and addend that read its content size from the header's first 16 bytes as two
    little-endian words. A frame without a content size, with a dictionary id (never written)
    or a reserved bit set ends "never": it is read alone."""
    descriptor = np.arange(256)
    single, flag = (descriptor >> 5) & 1, descriptor >> 6
    width = np.array([0, 2, 4, 8, 1, 2, 4, 8])[(single << 2) | flag]
    at = 6 - single
    plain = (width > 0) & ((descriptor & 0b1011) == 0)
    end = np.where(plain, at + width, 1 << 62)
    mask = np.array([(1 << 8 * int(w)) - 1 for w in width], np.uint64)
    return end, (8 * at).astype(np.uint64), (64 - 8 * at).astype(np.uint64), mask, np.where(width == 2, 256, 0)


_FRAME_END, _SIZE_SHIFT, _SIZE_CARRY, _SIZE_MASK, _SIZE_ADD = _frame_tables()
_FRAME_MAGIC = 0xFD2FB528
_HEAD = 16  # bytes of a record read for its frame header


def _content_sizes(heads: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
    """The content size each zstd frame at [starts, ends) of ``heads`` (the records section, as
    S16: the 16 bytes from each byte on) declares in its header, or None unless every one is a
    plain frame header whole in its record with a size in 1..RECORD_MOST."""
    if not len(starts) or int(starts.max()) >= len(heads):
        return None
    head = heads[starts].view(np.uint8).reshape(-1, _HEAD)
    descriptor = head[:, 4]
    if np.any(head.view("<u4")[:, 0] != _FRAME_MAGIC) or np.any(_FRAME_END[descriptor] > ends - starts):
        return None  # not a frame, not a plain one, or its header cut short
    lo, hi = head.view("<u8").T
    sizes = (lo >> _SIZE_SHIFT[descriptor] | hi << _SIZE_CARRY[descriptor]) & _SIZE_MASK[descriptor]
    sizes += _SIZE_ADD[descriptor].astype(np.uint64)
    if np.any(sizes < 1) or np.any(sizes > RECORD_MOST):
        return None
    return sizes


def _tombstones_after(tombstones: list[int], seqs: np.ndarray) -> np.ndarray:
    """Each row's tombstone: the first of ``tombstones`` (sorted) after its seq, or NEVER."""
    if not tombstones:
        return np.full(len(seqs), NEVER, np.int64)
    after = np.searchsorted(np.asarray(tombstones, np.int64), seqs, side="right")
    return np.append(np.asarray(tombstones, np.int64), NEVER)[after]


def _rows_problem(name: str, rows: Rows, tables: CatalogTables, cursor: int) -> str | None:
    """Why a collection's rows cannot be the fold of a log up to ``cursor``, or None."""
    seqs = rows.seqs
    if rows.n == 0 or seqs[0] < 1 or seqs[-1] > cursor or np.any(np.diff(seqs) <= 0):
        return f"seqs of {_label(name)} are not increasing within 1..{cursor}"
    tombstones = sorted([*tables.purges, *([] if name == REACT else tables.clears.get(name, []))])
    if not np.array_equal(_tombstones_after(tombstones, seqs), rows.cleared):
        return f"tombstones of {_label(name)} are not those its node_cleared and checkpoint_purged events make"
    return None


def _read_header(fd: int) -> tuple[SnapshotPreamble, Layout, bytes, int]:
    """(preamble, layout, chunk digests, end of the data) from a file whose header checks out."""
    size = os.fstat(fd).st_size
    if size < len(PROLOGUE) + _TRAILER.size:
        raise unreadable("cut short")
    at, length, digest, magic = _TRAILER.unpack(os.pread(fd, _TRAILER.size, size - _TRAILER.size))
    prologue = os.pread(fd, len(PROLOGUE), 0)
    if prologue[: len(MAGIC)] != MAGIC:
        raise unreadable("not a projection snapshot")
    if prologue != PROLOGUE:
        found = struct.unpack("<I", prologue[8:12])[0]
        raise unreadable(f"format {found}, expected {SNAPSHOT_FORMAT}")
    if magic != MAGIC or at < len(PROLOGUE) or at + length + _TRAILER.size != size:
        raise unreadable("cut short, or its trailer is damaged")
    header = os.pread(fd, length, at)
    if hashlib.sha256(prologue + header).digest() != digest:
        raise unreadable("checksum mismatch: its header changed or was cut short after it was written")
    try:
        n, pos = _LEN.unpack_from(header, 0)[0], _LEN.size
        preamble = msgspec.json.decode(header[pos : pos + n], type=SnapshotPreamble)
        pos += n
        n = _LEN.unpack_from(header, pos)[0]
        body = zstandard.ZstdDecompressor().decompress(header[pos + _LEN.size : pos + _LEN.size + n])
        layout = msgspec.json.decode(body, type=Layout)
        digests = header[pos + _LEN.size + n :]
    except (struct.error, msgspec.DecodeError, msgspec.ValidationError, zstandard.ZstdError) as exc:
        raise unreadable(f"unreadable header ({exc})") from None
    if len(digests) != -(-at // CHUNK) * _DIGEST:
        raise unreadable("its chunk checksums do not cover its data")
    return preamble, layout, digests, at


def _check_layout(layout: Layout, preamble: SnapshotPreamble, data_end: int) -> None:
    """Sections inside the data, sized for the rows; collections partition the rows."""
    n, w, dim = layout.rows, layout.id_width, preamble.dim
    widths = {
        "seqs": 8,
        "cleared": 8,
        "ids": w,
        "vectors": dim,
        "low": (dim + 1) // 2,
        "scales": 4,
        "offsets": 8,
        "sorted": w,
        "id_rows": 8,
    }
    if n < 0 or w < 0 or dim <= 0 or set(layout.sections) != set(SECTIONS):
        raise disagrees("its layout is not a format-7 layout")
    for name, (offset, size) in layout.sections.items():
        rows = n + 1 if name == "offsets" else n
        sized = name in ("records", "dictionary") or size == rows * widths[name]
        if offset < len(PROLOGUE) or size < 0 or offset + size > data_end or not sized:
            raise disagrees(f"its section {name} does not fit its {n} rows")
    at = 0
    for _name, start, count in layout.collections:
        if start != at or count <= 0:
            raise disagrees("its collections do not partition its rows")
        at += count
    if at != n or len(layout.fence) != -(-n // FENCE):
        raise disagrees("its collections or id fence do not cover its rows")


def _label(name: str) -> str:
    return "the ReAct trace" if name == REACT else repr(name)


__all__ = [
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_NAME",
    "SnapshotDamaged",
    "SnapshotError",
    "SnapshotPreamble",
    "SnapshotView",
    "open_snapshot",
    "read_preamble",
]
