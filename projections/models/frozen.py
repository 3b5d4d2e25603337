"""A fold stored on disk and read on demand: what the catalog and the index sit on.

A snapshot holds every collection's rows (a node's entries, or the ReAct trace) as columns:
seqs, tombstones, ids, float32 vectors and encoded records. The catalog and the semantic
index read them through :class:`Frozen` without materialising them, so memory follows what
a read touches, not the checkpoint; events folded after the snapshot live beside it in
memory. A stored row that turns out damaged when first read raises :class:`DamagedCache`,
and whoever owns the fold rebuilds it from the log (``heals``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

NEVER = 2**62  # cleared_at of a row no tombstone has hidden
REACT = "\x00react"  # the ReAct trace's collection; never a node id (node ids refuse NUL)


OnDamage = Callable[["DamagedCache"], None]  # what a fold does when its stored rows turn out damaged


class DamagedCache(Exception):
    """Stored rows failed their check when first read (a flipped byte, impossible content)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # how the warning and ``Projector.rebuilt`` say it


@dataclass(frozen=True)
class Rows:
    """One collection's stored rows, read-only views checked before they were handed out."""

    seqs: np.ndarray  # int64[n], increasing
    cleared: np.ndarray  # int64[n], the seq of the tombstone that hid the row, or NEVER
    ids: np.ndarray  # S{w}[n]
    vectors: np.ndarray  # float32[n, dim]
    offsets: np.ndarray  # int64[n + 1], byte offsets of the records in ``records``
    records: memoryview  # the encoded records (JSON)
    hidden: int  # rows with a tombstone

    @property
    def n(self) -> int:
        return len(self.seqs)

    def id(self, i: int) -> str:
        return self.ids[i].decode()

    def record(self, i: int) -> memoryview:
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
