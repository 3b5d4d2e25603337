"""The embedded semantic index: static embeddings per collection, cosine over the scope only.

Vectors are kept per collection (a node's entries, or the ReAct trace), so a search touches
only the ancestors' rows: its cost follows the scope, not the checkpoint. The rows a
snapshot holds are float32 and read in place from it (``frozen``): a search multiplies them
by the query without converting or copying them, and pages of nodes out of scope are never
read. Rows folded since the snapshot are kept in memory as float16 (the same numbers: every
vector is rounded to float16 once, when it is embedded). Like the catalog, rows are never
removed; a tombstone stamps them with the seq that hid them, so searches as of any seq are
exact.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Callable, Iterable, NamedTuple, Protocol, Sequence

import numpy as np

from ledger.events import Event

from projections.models.frozen import NEVER, REACT, Frozen, effective_cleared, heals, visible_rows

__all__ = ["REACT", "VECTOR_DTYPE", "Block", "Embedder", "Hit", "SemanticIndex", "dots"]

# Every vector is rounded to float16 when it is embedded: the same numbers whether folded
# incrementally, replayed or loaded from a snapshot. Fresh rows are stored as float16 (half
# the memory while folding), stored rows as the same values in float32 (no widening per search).
VECTOR_DTYPE = np.float16


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def dots(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's dot product with the query, computed the same way whatever the row's
    neighbours. (BLAS's matrix-vector product sums the last rows of a matrix in another
    order than the others, so a row's score would depend on how many rows share its block,
    and equal texts in two nodes could tie or not.)"""
    return np.vecdot(matrix, query)


class Hit(NamedTuple):
    """A search result, and where its row is (``row`` None: a fresh row, in memory)."""

    id: str
    score: float
    collection: str
    row: int | None


@dataclass
class Block:
    """The fresh rows of one collection (folded since the snapshot), in memory."""

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

    def vectors(self) -> np.ndarray:
        return self.matrix[: self.n].astype(np.float32)


class SemanticIndex:
    """Fold of node-scope entries and ReAct steps into per-collection vectors.

    ``on_damage`` (set by the projector) is called when stored rows fail their check; it
    rebuilds the index from the log before the search is retried.
    """

    def __init__(self, embedder: Embedder, base: Frozen | None = None) -> None:
        self.embedder = embedder
        self.on_damage = None
        self.reset(base)

    def reset(self, base: Frozen | None = None, check: Callable[[], None] | None = None) -> None:
        """Start over on ``base`` (None: empty). ``check`` runs before the first search (it
        compares some stored vectors with a fresh embedding, so it needs the model, which
        reads that never search need not load); it raises DamagedCache."""
        self.base = base
        self.pending_check = check
        self.blocks: dict[str, Block] = {}  # fresh rows per collection
        self._after_clear: dict[str, int] = {}
        self._after_purge = NEVER

    def after(self, name: str) -> int:
        """The first tombstone after the base that hides the collection's stored rows (or NEVER)."""
        clear = NEVER if name == REACT else self._after_clear.get(name, NEVER)
        return min(clear, self._after_purge)

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
                self._tombstone(event.node, event.seq)
                continue
            elif event.type == "checkpoint_purged":
                flush()
                for block in self.blocks.values():
                    block.clear(event.seq)
                if self.base is not None and self._after_purge == NEVER:
                    self._after_purge = event.seq
                continue
            else:
                continue
            ids, seqs, texts = pending.setdefault(target, ([], [], []))
            ids.append(event.id)
            seqs.append(event.seq)
            texts.append(text)
        flush()

    def _tombstone(self, node: str, seq: int) -> None:
        if node in self.blocks:
            self.blocks[node].clear(seq)
        if self.base is not None and self.base.count(node):
            self._after_clear.setdefault(node, seq)

    def ids(self, name: str) -> list[str]:
        """Every row's id of a collection, stored then fresh."""
        rows = self.base.rows(name) if self.base is not None else None
        stored = [i.decode() for i in rows.ids] if rows is not None else []
        return stored + (self.blocks[name].ids if name in self.blocks else [])

    def vectors(self, name: str) -> np.ndarray:
        """Every row's vector of a collection, stored then fresh, as float32."""
        parts = []
        rows = self.base.rows(name) if self.base is not None else None
        if rows is not None:
            parts.append(np.asarray(rows.vectors))
        if name in self.blocks:
            parts.append(self.blocks[name].vectors())
        return np.concatenate(parts) if parts else np.empty((0, self.embedder.dim), np.float32)

    def vector_of(self, name: str, item_id: str) -> np.ndarray | None:
        """The vector of one row of a collection (for checks), or None."""
        block = self.blocks.get(name)
        if block is not None and item_id in block.ids:
            return block.matrix[block.ids.index(item_id)].astype(np.float32)
        found = self.base.locate(item_id) if self.base is not None else None
        if found is None or found[0] != name:
            return None
        return np.asarray(self.base.rows(name).vectors[found[1]])

    def search(
        self, query: np.ndarray, collections: Iterable[str], limit: int, as_of: int | None = None
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (id, score in [0, 1]) over exactly these collections, best first;
        ties go to the older row (lower seq)."""
        return [(hit.id, hit.score) for hit in self.search_rows(query, collections, limit, as_of)]

    @heals
    def search_rows(
        self, query: np.ndarray, collections: Iterable[str], limit: int, as_of: int | None = None
    ) -> list[Hit]:
        """``search`` with where each winner's row is. Only the winners are turned back
        into ids: the scope's rows stay numpy arrays."""
        if self.pending_check is not None:
            check, self.pending_check = self.pending_check, None
            check()
        query = np.asarray(query, dtype=np.float32)
        parts: list[tuple[str, Callable[[int], str], np.ndarray | None, bool]] = []
        seqs: list[np.ndarray] = []
        cos: list[np.ndarray] = []
        base, blocks = self.base, self.blocks
        untouched = self._after_purge == NEVER and not self._after_clear  # no tombstone since the base
        for name in dict.fromkeys(collections):
            rows = base.rows(name) if base is not None else None
            if rows is not None:
                scores = dots(rows.vectors, query)
                if as_of is None and not rows.hidden and (untouched or self.after(name) == NEVER):
                    parts.append((name, rows.id, None, True))
                    seqs.append(rows.seqs)
                else:
                    picked = visible_rows(rows.seqs, effective_cleared(rows, self.after(name)), as_of)
                    scores = scores[picked]
                    parts.append((name, rows.id, picked, True))
                    seqs.append(rows.seqs[picked])
                cos.append(scores)
            block = blocks.get(name) if blocks else None
            if block is not None and block.n:
                n = block.n
                scores, picked = dots(block.matrix[:n].astype(np.float32), query), None
                if as_of is not None or block.hidden:
                    picked = visible_rows(block.seqs[:n], block.cleared[:n], as_of)
                    scores = scores[picked]
                parts.append((name, block.ids.__getitem__, picked, False))
                seqs.append(block.seqs[:n] if picked is None else block.seqs[picked])
                cos.append(scores)
        return _top(parts, seqs, cos, limit)


def _top(
    parts: list[tuple[str, Callable[[int], str], np.ndarray | None, bool]], seqs: list[np.ndarray], cos: list[np.ndarray], limit: int
) -> list[Hit]:
    """The best ``limit`` rows of all parts (ties by seq)."""
    sizes = [len(c) for c in cos]
    total = sum(sizes)
    if not total or limit <= 0:
        return []
    all_cos = np.concatenate(cos) if len(cos) > 1 else cos[0]
    all_seq = np.concatenate(seqs) if len(seqs) > 1 else seqs[0]
    if limit < total:
        keep = np.argpartition(all_cos, total - limit)[total - limit :]
        # ties at the cut are resolved below by seq, so include every tied row
        keep = np.flatnonzero(all_cos >= all_cos[keep].min())
    else:
        keep = np.arange(total)
    order = keep[np.lexsort((all_seq[keep], -all_cos[keep]))][:limit]
    scores = np.clip((all_cos[order] + 1.0) / 2.0, 0.0, 1.0).tolist()
    starts = list(accumulate(sizes, initial=0))
    hits = []
    for i, score in zip(order.tolist(), scores):
        b = bisect_right(starts, i) - 1
        name, id_of, picked, stored = parts[b]
        k = i - starts[b]
        row = k if picked is None else int(picked[k])
        hits.append(Hit(id_of(row), score, name, row if stored else None))
    return hits
