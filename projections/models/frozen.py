"""A fold stored on disk and read on demand: what the catalog and the index sit on.

A snapshot holds every collection's rows (a node's entries, or the ReAct trace) as columns:
seqs, tombstones, ids, vectors (12-bit codes and a float32 scale per row: ``quantise``) and
encoded records (each alone, zstd-compressed with the snapshot's dictionary). The catalog and the semantic
index read them through :class:`Frozen` without materialising them, so memory follows what
a read touches, not the checkpoint; events folded after the snapshot live beside it in
memory. A stored row that turns out damaged when first read raises :class:`DamagedCache`,
and whoever owns the fold rebuilds it from the log (``heals``).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np

NEVER = 2**62  # cleared_at of a row no tombstone has hidden
REACT = "\x00react"  # the ReAct trace's collection; never a node id (node ids refuse NUL)


class Records(NamedTuple):
    """Encoded records end to end, and each one's length: a chunk of rows' records read or made
    in bulk, without a bytes object per record."""

    data: bytes
    lengths: np.ndarray  # int64, one per record

    @classmethod
    def of(cls, records: list[bytes]) -> Records:
        return cls(b"".join(records), np.fromiter(map(len, records), np.int64, len(records)))

    def part(self, lo: int, hi: int) -> Records:
        """Records ``lo`` to ``hi`` (not included)."""
        if lo == 0 and hi >= len(self.lengths):
            return self
        ends = np.cumsum(self.lengths)
        start, stop = (int(ends[i - 1]) if i else 0 for i in (lo, hi))
        return Records(self.data[start:stop], self.lengths[lo:hi])

    def split(self) -> list[bytes]:
        """Each record on its own."""
        ends = np.cumsum(self.lengths).tolist()
        return [self.data[a:b] for a, b in zip([0, *ends[:-1]], ends)]


OnDamage = Callable[["DamagedCache"], None]  # what a fold does when its stored rows turn out damaged


class DamagedCache(Exception):
    """Stored rows failed their check when first read (a flipped byte, impossible content)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # how the warning and ``Projector.rebuilt`` say it


QUANT_STEPS = 2047  # a vector's largest component is stored as ±2047: 12-bit codes, -2047..2047
CODE_DTYPE = np.int16  # codes in memory; a snapshot stores them as a high byte and a low nibble (``split``)


def quantise(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int16 codes, float32 scale per row) of float32 rows: each row's components divided by
    its largest magnitude / 2047 and rounded to the nearest integer. A zero row has scale 0."""
    rows = np.asarray(vectors, np.float32)
    if not rows.size:
        return np.empty(rows.shape, CODE_DTYPE), np.empty(len(rows), np.float32)
    scales = (np.max(np.abs(rows), axis=1) / np.float32(QUANT_STEPS)).astype(np.float32)
    divisor = np.where(scales > 0, scales, np.float32(1))
    codes = np.clip(np.rint(rows / divisor[:, None]), -QUANT_STEPS, QUANT_STEPS).astype(CODE_DTYPE)
    return codes, scales


def split(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """12-bit codes as stored: (int8 high bytes [n, dim], uint8 low nibbles two per byte
    [n, ceil(dim / 2)]), 1.5 bytes per component."""
    high = (codes >> 4).astype(np.int8)
    low = (codes & 15).astype(np.uint8)
    if low.shape[1] % 2:
        low = np.pad(low, ((0, 0), (0, 1)))
    return high, low[:, 0::2] | (low[:, 1::2] << 4)


def join(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """The codes ``split`` stored."""
    nibbles = np.empty((len(low), 2 * low.shape[1]), CODE_DTYPE)
    nibbles[:, 0::2] = low & 15
    nibbles[:, 1::2] = low >> 4
    return (high.astype(CODE_DTYPE) << 4) | nibbles[:, : high.shape[1]]


def dequantise(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The float32 rows a search multiplies: code x scale, one product per component (so a
    row's values do not depend on the rows around it, in a snapshot, a cache or memory)."""
    out = codes.astype(np.float32)
    out *= scales[:, None]
    return out


class VectorCache:
    """Dequantised rows of the collections searched last, bounded in bytes (least recently
    used first out): a node's searches, and its siblings', share their ancestors' rows. Kept by
    a collection's name, or by a scope's (collection, rows) pairs for its rows joined."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._rows: OrderedDict[Hashable, np.ndarray] = OrderedDict()

    def find(self, name: Hashable) -> np.ndarray | None:
        """The collection's float32 rows if kept (then used last), else None."""
        found = self._rows.get(name)
        if found is not None:
            self._rows.move_to_end(name)
        return found

    def get(self, name: Hashable, make: Callable[[], np.ndarray]) -> np.ndarray:
        """The collection's float32 rows, from the cache or made now (and kept when they fit)."""
        found = self.find(name)
        return found if found is not None else self.keep(name, make())

    def keep(self, name: Hashable, rows: np.ndarray) -> np.ndarray:
        """Keep a collection's rows when they fit (the least recently used go first); return them."""
        if rows.nbytes <= self.limit:
            while self.size + rows.nbytes > self.limit:
                self.size -= self._rows.popitem(last=False)[1].nbytes
            self._rows[name] = rows
            self.size += rows.nbytes
        return rows


@dataclass(frozen=True)
class Rows:
    """One collection's stored rows, read-only views checked before they were handed out."""

    name: str
    seqs: np.ndarray  # int64[n], increasing
    cleared: np.ndarray  # int64[n], the seq of the tombstone that hid the row, or NEVER
    ids: np.ndarray  # S{w}[n]
    high: np.ndarray  # int8[n, dim], the vectors' codes (``quantise``), their high bytes (``split``)
    low: np.ndarray  # uint8[n, ceil(dim / 2)], and their low nibbles
    scales: np.ndarray  # float32[n], their scales
    offsets: np.ndarray  # int64[n + 1], byte offsets of the records in ``records``
    records: memoryview  # the encoded records (compressed JSON)
    hidden: int  # rows with a tombstone
    cache: VectorCache  # where the dequantised rows are kept
    unpack: Callable[[memoryview], bytes]  # a stored record → its JSON
    unpack_many: Callable[[np.ndarray, np.ndarray], Records]  # records at [starts, ends) → their JSON

    @property
    def n(self) -> int:
        return len(self.seqs)

    @property
    def vectors(self) -> np.ndarray:
        """The rows as float32 (``dequantise``), through the cache."""
        found = self.cache.find(self.name)  # (the hit path, once per collection a search reads)
        if found is None:
            found = self.cache.keep(self.name, dequantise(join(self.high, self.low), self.scales))
        return found

    def vector(self, i: int) -> np.ndarray:
        """One row as float32: the same values as ``vectors[i]``, without the whole collection."""
        return dequantise(join(self.high[i : i + 1], self.low[i : i + 1]), self.scales[i : i + 1])[0]

    def id(self, i: int) -> str:
        return self.ids[i].decode()

    def record(self, i: int) -> bytes:
        """The JSON record of row ``i`` (decompressed alone)."""
        return self.unpack(self.records[self.offsets[i] : self.offsets[i + 1]])

    def stored_record(self, i: int) -> memoryview:
        """Row ``i``'s record as stored (compressed)."""
        return self.records[self.offsets[i] : self.offsets[i + 1]]


class Frozen(Protocol):
    """A fold up to ``cursor`` as stored, read on demand."""

    cursor: int
    names: list[str]  # collections in order of first appearance (the ReAct trace among them)

    def count(self, name: str) -> int:
        """How many rows the collection has (0 when unknown); reads no row."""

    def rows(self, name: str) -> Rows | None:
        """The collection's rows (None when it has none); raises DamagedCache."""

    def locate(self, item_id: str) -> tuple[str, int] | None:
        """(collection, row) of an entry or step id; raises DamagedCache."""

    def check_all(self) -> None:
        """Check every stored row now (before a scan of all of them); raises DamagedCache."""


def effective_cleared(rows: Rows, after: int) -> np.ndarray:
    """The rows' tombstones once a tombstone at seq ``after`` (later than every row) hid the live ones."""
    if after == NEVER:
        return rows.cleared
    return np.where(rows.cleared == NEVER, after, rows.cleared)


def visible_rows(seqs: np.ndarray, cleared: np.ndarray, as_of: int | None) -> np.ndarray:
    """Indices of the rows visible now (``as_of`` None) or as of a seq."""
    if as_of is None:
        return np.flatnonzero(cleared == NEVER)
    return np.flatnonzero((seqs <= as_of) & (cleared > as_of))


F = TypeVar("F", bound=Callable[..., Any])


def heals(method: F) -> F:
    """Run a read; when stored rows turn out damaged, let ``self.on_damage`` rebuild the
    state from the log, then run it again (once). Without a handler the error propagates."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except DamagedCache as exc:
            if self.on_damage is None:
                raise
            self.on_damage(exc)
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
