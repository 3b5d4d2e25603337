"""The Letta agent's passages as the local fold knows them: what a read plan is made from.

The agent holds one passage per node-scope entry and per ReAct step since the last purge
(a purge deletes the agent), cleared or not. The local index holds the same rows with the
same embedder, so their cosines to a query are known here before Letta is asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from projections.engines.letta.plan import time_us
from projections.engines.local import Projector
from projections.models.catalog import NEVER, REACT, Entry, Step


@dataclass
class AgentRows:
    """One row per passage, grouped by collection (a node, or the ReAct trace) in the local
    index's row order; ``kept[name]`` picks the index rows the agent holds."""

    cursor: int
    names: list[str]
    kept: dict[str, np.ndarray]
    ids: list[str]
    collection: np.ndarray  # the index of each row's collection in ``names``
    seq: np.ndarray
    cleared: np.ndarray  # the seq of the tombstone that hid the row, or NEVER
    at_us: np.ndarray  # the row's created_at in Letta (see ``plan.letta_time``)
    _positions: dict[str, int] | None = None

    @classmethod
    def of(cls, projector: Projector) -> AgentRows:
        catalog, index = projector.catalog, projector.index
        purged = max(catalog.purges, default=0)
        names: list[str] = []
        kept: dict[str, np.ndarray] = {}
        ids: list[str] = []
        collection: list[int] = []
        seq: list[int] = []
        cleared: list[int] = []
        at: list[int] = []
        for name in catalog.collections():
            records: list[Entry] | list[Step] = catalog.every_step() if name == REACT else catalog.entries_of(name)
            by_id = {_id_of(r): r for r in records}
            row_ids = index.ids(name)
            keep = np.fromiter(
                (row_id in by_id and by_id[row_id].seq > purged for row_id in row_ids), bool, len(row_ids)
            )
            kept[name] = keep
            names.append(name)
            for row_id in (i for i, k in zip(row_ids, keep.tolist()) if k):
                record = by_id[row_id]
                ids.append(row_id)
                collection.append(len(names) - 1)
                seq.append(record.seq)
                cleared.append(record.cleared_at)
                at.append(time_us(record.ts))
        return cls(
            projector.cursor,
            names,
            kept,
            ids,
            np.array(collection, np.int64),
            np.array(seq, np.int64),
            np.array(cleared, np.int64),
            np.array(at, np.int64),
        )

    def cosine(self, projector: Projector, query: np.ndarray) -> np.ndarray:
        """Every row's cosine to the query vector, from the local index's vectors."""
        index = projector.index
        parts = [index.vectors(name)[self.kept[name]] @ query for name in self.names]
        return np.concatenate(parts).astype(np.float32) if parts else np.empty(0, np.float32)

    def in_scope(self, names: Iterable[str]) -> np.ndarray:
        wanted = [i for i, name in enumerate(self.names) if name in set(names)]
        return np.isin(self.collection, wanted)

    def visible(self, as_of: int | None) -> np.ndarray:
        if as_of is None:
            return self.cleared == NEVER
        return (self.seq <= as_of) & (as_of < self.cleared)

    def positions(self) -> dict[str, int]:
        """Row index by passage id (built on first use)."""
        if self._positions is None:
            self._positions = {row_id: i for i, row_id in enumerate(self.ids)}
        return self._positions


def _id_of(record: Entry | Step) -> str:
    return record.step_id if isinstance(record, Step) else record.entry_id
