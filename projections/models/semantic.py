"""The embedded semantic index: static embeddings per node, cosine over the scope only.

Vectors are kept per node in one growing matrix each, so a search touches only the
ancestors' rows: its cost follows the scope, not the checkpoint. Like the catalog, rows
are never removed; a tombstone stamps them with the seq that hid them, so searches as of
any seq are exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Protocol, Sequence

import msgspec
import numpy as np

from ledger.events import Event

from projections.models.catalog import NEVER

# Vectors are stored as float16: half the memory and snapshot size of float32, and the
# same numbers whether folded incrementally, replayed or loaded from a snapshot (scores
# are computed in float32 from them).
VECTOR_DTYPE = np.float16


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class Block:
    """The rows of one collection (a node's entries, or the ReAct trace)."""

    dim: int
    ids: list[str] = field(default_factory=list)
    seqs: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    cleared: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    matrix: np.ndarray | None = None
    hidden: int = 0  # rows with a tombstone: when 0 the visibility mask is skipped

    def __post_init__(self) -> None:
        if self.matrix is None:
            self.matrix = np.empty((0, self.dim), VECTOR_DTYPE)

    @property
    def n(self) -> int:
        return len(self.ids)

    def add(self, ids: list[str], seqs: list[int], vectors: np.ndarray) -> None:
        n, extra = self.n, len(ids)
        if n + extra > len(self.matrix):  # grow by doubling: amortised O(1) per row
            grown = np.empty((max(2 * len(self.matrix), n + extra, 8), self.dim), VECTOR_DTYPE)
            grown[:n] = self.matrix[:n]
            self.matrix = grown
            self.seqs = np.resize(self.seqs, len(grown))
            self.cleared = np.resize(self.cleared, len(grown))
        self.matrix[n : n + extra] = vectors
        self.seqs[n : n + extra] = seqs
        self.cleared[n : n + extra] = NEVER
        self.ids.extend(ids)

    def clear(self, seq: int) -> None:
        live = self.cleared[: self.n] == NEVER
        self.cleared[: self.n][live] = seq
        self.hidden = self.n

    def scores(self, query: np.ndarray, as_of: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(row indices, cosine) of the rows visible as of ``as_of``."""
        n = self.n
        cos = self.matrix[:n].astype(np.float32) @ query
        if as_of is None and not self.hidden:
            return np.arange(n), cos
        if as_of is None:
            mask = self.cleared[:n] == NEVER
        else:
            mask = (self.seqs[:n] <= as_of) & (self.cleared[:n] > as_of)
        rows = np.flatnonzero(mask)
        return rows, cos[rows]


class BlockMeta(msgspec.Struct, array_like=True):
    """A block's small fields, as stored in the snapshot header (its arrays follow it raw)."""

    name: str
    ids: list[str]
    hidden: int


REACT = "\x00react"  # the ReAct trace's block; never a node id (node ids refuse NUL)


class SemanticIndex:
    """Fold of node-scope entries and ReAct steps into per-collection vector blocks."""

    def __init__(self, embedder: Embedder, blocks: dict[str, Block] | None = None) -> None:
        self.embedder = embedder
        self.blocks: dict[str, Block] = blocks or {}

    def apply_batch(self, events: Iterable[Event]) -> None:
        """Embed new entries in batches; apply tombstones in order."""
        pending: dict[str, tuple[list[str], list[int], list[str]]] = {}

        def flush() -> None:
            texts = [t for _ids, _seqs, ts in pending.values() for t in ts]
            if not texts:
                return
            vectors = self.embedder.embed(texts)
            at = 0
            for name, (ids, seqs, ts) in pending.items():
                block = self.blocks.setdefault(name, Block(self.embedder.dim))
                block.add(ids, seqs, vectors[at : at + len(ts)])
                at += len(ts)
            pending.clear()

        for event in events:
            if event.type == "memory_added":
                target, text = event.node, event.body["text"]
            elif event.type == "react_step":
                target, text = REACT, event.body["content"]
            elif event.type == "node_cleared":
                flush()
                if event.node in self.blocks:
                    self.blocks[event.node].clear(event.seq)
                continue
            elif event.type == "checkpoint_purged":
                flush()
                for block in self.blocks.values():
                    block.clear(event.seq)
                continue
            else:
                continue
            ids, seqs, texts = pending.setdefault(target, ([], [], []))
            ids.append(event.id)
            seqs.append(event.seq)
            texts.append(text)
        flush()

    def search(
        self, query: np.ndarray, collections: Iterable[str], limit: int, as_of: int | None = None
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (id, score in [0, 1]) over exactly these collections, best first.

        Only the winners are turned back into ids: the scope's rows stay numpy arrays.
        """
        found: list[tuple[Block, np.ndarray]] = []
        seqs: list[np.ndarray] = []
        cos: list[np.ndarray] = []
        for name in dict.fromkeys(collections):
            block = self.blocks.get(name)
            if block is None or not block.n:
                continue
            rows, scores = block.scores(query, as_of)
            found.append((block, rows))
            seqs.append(block.seqs[rows])
            cos.append(scores)
        total = sum(len(rows) for _block, rows in found)
        if not total or limit <= 0:
            return []
        all_cos = np.concatenate(cos)
        all_seq = np.concatenate(seqs)
        if limit < total:
            keep = np.argpartition(-all_cos, limit - 1)[:limit]
            # ties at the cut are resolved below by seq, so include every tied row
            cut = all_cos[keep].min()
            keep = np.flatnonzero(all_cos >= cut)
        else:
            keep = np.arange(total)
        order = keep[np.lexsort((all_seq[keep], -all_cos[keep]))][:limit]
        starts = np.cumsum([0] + [len(rows) for _block, rows in found])
        which = np.searchsorted(starts, order, side="right") - 1
        return [
            (found[b][0].ids[found[b][1][i - starts[b]]], float(np.clip((all_cos[i] + 1.0) / 2.0, 0.0, 1.0)))
            for i, b in zip(order.tolist(), which.tolist())
        ]
