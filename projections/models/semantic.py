"""The embedded semantic index: static embeddings per collection, cosine over the scope only.

Vectors are kept per collection (a node's entries, or the ReAct trace), so a search touches
only the ancestors' rows: its cost follows the scope, not the checkpoint. The rows a
snapshot holds are 12-bit codes with a float32 scale per row, read in place from it
(``frozen``); a search multiplies the query by them dequantised to float32, which a small
cache keeps for the collections searched last (a node's searches and its siblings' share
their ancestors; a scope of several stored collections as one joined matrix, one product a
search), and pages of nodes out of scope are never read. A scope's layout (which collections
hold rows, which rows are visible, the joined matrix's key) is kept until the next fold, so a
node's searches between two writes pay only the product and the pick. Rows folded since the
snapshot are kept in memory as the same codes and scales: every vector is quantised once,
when it is embedded, so a row scores the same from the snapshot, the cache or memory, folded
incrementally or replayed. Like the catalog, rows are never
removed; a tombstone stamps them with the seq that hid them, so searches as of any seq are
exact.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Literal, NamedTuple, Protocol, assert_never, cast

import numpy as np

from ledger.events import Event, PerEventType, handlers, is_stub_body
from projections.models.frozen import (
    CODE_DTYPE,
    NEVER,
    REACT,
    Frozen,
    OnDamage,
    Rows,
    dequantise,
    effective_cleared,
    heals,
    join,
    quantise,
    split,
    visible_rows,
)

__all__ = [
    "REACT",
    "VECTOR_DTYPE",
    "Block",
    "Embedder",
    "Hit",
    "ScopeRows",
    "SemanticIndex",
    "dequantise",
    "dots",
    "quantise",
]

# Every vector is quantised when it is embedded (``quantise``: 12-bit codes, a float32 scale
# per row), and scored dequantised (``dequantise``): the same numbers whether folded
# incrementally, replayed or loaded from a snapshot. On disk 1.5 bytes per component (float32's
# 4). Against float16 (format 6) the top 5 differed for 0 of the retrieval set's 12 queries and 7
# of 500 random scoped queries of the projection bench's 100,000 entries (int8 codes: 64).
VECTOR_DTYPE = CODE_DTYPE


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
    high: np.ndarray = field(init=False)  # the codes (``quantise``) as a snapshot stores them (``split``):
    low: np.ndarray = field(init=False)  # 1.5 bytes a component while a cold fold holds every row
    scales: np.ndarray = field(default_factory=lambda: np.empty(0, np.float32))
    hidden: int = 0  # rows with a tombstone: when 0 the visibility mask is skipped

    def __post_init__(self) -> None:
        self.high = np.empty((0, self.dim), np.int8)
        self.low = np.empty((0, (self.dim + 1) // 2), np.uint8)

    @property
    def n(self) -> int:
        return len(self.ids)

    def add(self, ids: list[str], seqs: list[int], vectors: np.ndarray) -> None:
        n, extra = self.n, len(ids)
        if n + extra > len(self.high):  # grow by doubling: amortised O(1) per row
            size = max(2 * len(self.high), n + extra, 8)
            self.high = np.concatenate([self.high[:n], np.empty((size - n, self.dim), np.int8)])
            self.low = np.concatenate([self.low[:n], np.empty((size - n, self.low.shape[1]), np.uint8)])
            self.scales = np.resize(self.scales, size)
            self.seqs = np.resize(self.seqs, size)
            self.cleared = np.resize(self.cleared, size)
        codes, self.scales[n : n + extra] = quantise(vectors)
        self.high[n : n + extra], self.low[n : n + extra] = split(codes)
        self.seqs[n : n + extra] = seqs
        self.cleared[n : n + extra] = NEVER
        self.ids.extend(ids)

    def id(self, i: int) -> str:
        return self.ids[i]

    def clear(self, seq: int) -> None:
        live = self.cleared[: self.n] == NEVER
        self.cleared[: self.n][live] = seq
        self.hidden = self.n

    def codes(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """The rows' codes (``quantise``), of rows [lo, hi)."""
        hi = self.n if hi is None else hi
        return join(self.high[lo:hi], self.low[lo:hi])

    def vectors(self) -> np.ndarray:
        """The rows as float32, as a search scores them."""
        return dequantise(self.codes(), self.scales[: self.n])


class SemanticIndex:
    """Fold of node-scope entries and ReAct steps into per-collection vectors.

    ``on_damage`` (set by the projector) is called when stored rows fail their check; it
    rebuilds the index from the log before the search is retried.
    """

    def __init__(self, embedder: Embedder, base: Frozen | None = None) -> None:
        self.embedder = embedder
        self.on_damage: OnDamage | None = None
        self.epoch = 0  # start-overs so far: rows are only appended between two (``ScopeRows.epoch``)
        self.changes = 0  # folds and start-overs so far: a scope's layout holds until it moves
        self._layouts: dict[tuple[str, ...], _Layout] = {}  # as of now, at ``self._layouts_at``
        self._layouts_at = 0
        self.reset(base)

    def reset(self, base: Frozen | None = None, check: Callable[[], None] | None = None) -> None:
        """Start over on ``base`` (None: empty). ``check`` runs before the first search (it
        compares some stored vectors with a fresh embedding, so it needs the model, which
        reads that never search need not load); it raises DamagedCache."""
        self.base = base
        self.pending_check = check
        self.epoch += 1
        self.changes += 1
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
        self.changes += 1

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
            action = _ACTIONS[event.type]
            # only the text is read: decoding the typed body would copy its metadata for nothing
            if is_stub_body(event.body):
                continue  # redacted: nothing to embed
            match action:
                case "node text":
                    target, text = event.node, event.body["text"]
                case "react text":
                    target, text = REACT, event.body["content"]
                case "tombstone":
                    flush()
                    self._tombstone(event.node, event.seq)
                    continue
                case "purge":
                    flush()
                    for block in self.blocks.values():
                        block.clear(event.seq)
                    if self.base is not None and self._after_purge == NEVER:
                        self._after_purge = event.seq
                    continue
                case "nothing":
                    continue
                case _:
                    assert_never(action)
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
            i = block.ids.index(item_id)
            return dequantise(block.codes(i, i + 1), block.scales[i : i + 1])[0]
        found = self.base.locate(item_id) if self.base is not None else None
        rows = self.base.rows(name) if self.base is not None and found is not None and found[0] == name else None
        return None if rows is None or found is None else rows.vector(found[1])

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
        scope = self._scope(query, collections, as_of)
        return _top(scope.parts, scope.every, scope.sizes, limit)

    @heals
    def scope_rows(self, query: np.ndarray, collections: Iterable[str], as_of: int | None = None) -> ScopeRows:
        """Every visible row of exactly these collections with its cosine, as arrays (what a
        fusion with another channel over the same rows reads; ``search_rows`` picks from it)."""
        return self._scope(query, collections, as_of)

    def _scope(self, query: np.ndarray, collections: Iterable[str], as_of: int | None) -> ScopeRows:
        if self.pending_check is not None:
            check, self.pending_check = self.pending_check, None
            check()
        names = tuple(dict.fromkeys(collections))
        layout = self._layout(names) if as_of is None else self._parts(names, as_of, None)
        every = _scope_dots(layout, np.asarray(query, dtype=np.float32))
        return ScopeRows(layout.parts, every, layout.sizes, self.epoch, layout.key)

    def _layout(self, names: tuple[str, ...]) -> _Layout:
        """The scope's parts as of now, kept until the next fold (a node's searches between
        two writes, and its siblings', skip the per-collection look-ups)."""
        if self._layouts_at != self.changes:
            self._layouts.clear()
            self._layouts_at = self.changes
        found = self._layouts.get(names)
        if found is None:
            found = self._parts(names, None, (names, self.changes, self.epoch))
            if len(self._layouts) >= _LAYOUTS:
                del self._layouts[next(iter(self._layouts))]
            self._layouts[names] = found
        return found

    def _parts(self, names: tuple[str, ...], as_of: int | None, key: tuple[object, ...] | None) -> _Layout:
        parts: list[
            tuple[str, Rows | Block, np.ndarray | None]
        ] = []  # (collection, its rows, visible rows or None: all)
        rows_of = self.base.rows if self.base is not None else _no_rows
        untouched = self._after_purge == NEVER and not self._after_clear  # no tombstone since the base
        for name in names:
            rows = rows_of(name)
            if rows is not None:
                if as_of is None and not rows.hidden and (untouched or self.after(name) == NEVER):
                    parts.append((name, rows, None))
                else:
                    picked = visible_rows(rows.seqs, effective_cleared(rows, self.after(name)), as_of)
                    parts.append((name, rows, picked))
            block = self.blocks.get(name) if self.blocks else None
            if block is not None and block.n:
                n = block.n
                shown = None
                if as_of is not None or block.hidden:
                    shown = visible_rows(block.seqs[:n], block.cleared[:n], as_of)
                parts.append((name, block, shown))
        stored = [r for _, r, _ in parts]
        joined = None
        if len(stored) >= 2 and all(isinstance(r, Rows) for r in stored):
            joined = ("scope", *((r.name, r.n) for r in cast("list[Rows]", stored)))
        sizes = [rows.n if picked is None else len(picked) for _, rows, picked in parts]
        every_shown = all(picked is None for _, _, picked in parts)
        return _Layout(parts, sizes, joined, every_shown, key)


_LAYOUTS = 64  # scopes whose layout is kept between two folds


class _Layout(NamedTuple):
    """A scope's parts (a collection's stored rows, then its fresh ones; which rows are
    visible), the visible rows' count per part, the vector cache's key of the parts' rows
    joined (None: scored part by part), whether every row is visible, and the layout's key
    (None: as of a seq, not kept)."""

    parts: list[tuple[str, Rows | Block, np.ndarray | None]]
    sizes: list[int]
    joined: tuple[object, ...] | None
    every_shown: bool
    key: tuple[object, ...] | None


def _scope_dots(layout: _Layout, query: np.ndarray) -> np.ndarray:
    """Every visible row's cosine, the parts end to end. A scope of several stored collections
    is scored as one matrix, their rows joined once and kept in the vector cache (a row's dot
    product is the same in any matrix: ``dots``); fresh rows are scored per part."""
    parts = layout.parts
    if layout.joined is not None:
        rows = cast("list[Rows]", [r for _, r, _ in parts])
        joined = rows[0].cache.find(layout.joined)
        if joined is None:
            joined = rows[0].cache.keep(
                layout.joined, np.concatenate([dequantise(join(r.high, r.low), r.scales) for r in rows])
            )
        every = dots(joined, query)
        if layout.every_shown:
            return every
        ends = list(accumulate(r.n for r in rows))
        scores = [every[end - r.n : end] for r, end in zip(rows, ends)]
    else:
        scores = [dots(r.vectors() if isinstance(r, Block) else r.vectors, query) for _, r, _ in parts]
    shown = [s if picked is None else s[picked] for s, (_, _, picked) in zip(scores, parts)]
    return np.concatenate(shown) if len(shown) > 1 else shown[0] if shown else np.zeros(0, np.float32)


class ScopeRows(NamedTuple):
    """A scope's visible rows, part by part (a collection's stored rows, then its fresh ones):
    each part's collection, its rows and which of them are visible (None: all); every visible
    row's cosine, the parts end to end, and how many each part shows; ``epoch``: the index's
    start-over count (until it moves, a part's rows are only appended to, so a part of the same
    collection, kind and length holds the same rows); ``key``: the layout's, equal while no
    fold moved it (None: as of a seq)."""

    parts: list[tuple[str, Rows | Block, np.ndarray | None]]
    every: np.ndarray
    sizes: list[int]
    epoch: int
    key: tuple[object, ...] | None = None

    @property
    def cos(self) -> list[np.ndarray]:
        """The visible rows' cosines part by part."""
        ends = list(accumulate(self.sizes))
        return [self.every[end - n : end] for n, end in zip(self.sizes, ends)]

    def part_ids(self, b: int) -> list[str]:
        """Every row's id of part ``b``, visible or not, in row order."""
        rows = self.parts[b][1]
        return [i.decode() for i in rows.ids.tolist()] if isinstance(rows, Rows) else rows.ids[: rows.n]


# What each event type is to the index: a text to embed into a collection, a tombstone, or nothing.
IndexAction = Literal["node text", "react text", "tombstone", "purge", "nothing"]
_ACTIONS: PerEventType[IndexAction] = handlers(
    "SemanticIndex.apply_batch",
    {
        "memory_added": "node text",
        "react_step": "react text",
        "node_cleared": "tombstone",
        "checkpoint_purged": "purge",
        "node_started": "nothing",
        "core_seeded": "nothing",
        "events_redacted": "nothing",  # the projector folds a redaction by rebuilding (local.Projector.apply)
    },
)


def _no_rows(name: str) -> None:
    return None


def best_first(cos: np.ndarray, seqs_of: Callable[[np.ndarray], np.ndarray], limit: int) -> np.ndarray:
    """The positions of the best ``limit`` cosines, best first, ties to the older row (the lower
    seq ``seqs_of`` gives for positions): the one order every search of the index keeps."""
    total = len(cos)
    if limit < total:  # every row scoring at least the limit-th best (ties at the cut go by seq below)
        keep = np.flatnonzero(cos >= np.partition(cos, total - limit)[total - limit])
    else:
        keep = np.arange(total)
    return keep[np.lexsort((seqs_of(keep), -cos[keep]))][:limit]


def _top(
    parts: list[tuple[str, Rows | Block, np.ndarray | None]], all_cos: np.ndarray, sizes: list[int], limit: int
) -> list[Hit]:
    """The best ``limit`` rows of all parts (their cosines end to end, ``sizes`` a part), ties
    by seq (older first)."""
    total = len(all_cos)
    if not total or limit <= 0:
        return []
    starts = list(accumulate(sizes, initial=0))

    def place(i: int) -> tuple[str, Rows | Block, int]:
        b = bisect_right(starts, i) - 1
        name, rows, picked = parts[b]
        return name, rows, i - starts[b] if picked is None else int(picked[i - starts[b]])

    def seqs_of(keep: np.ndarray) -> np.ndarray:
        return np.array([int(rows.seqs[row]) for _, rows, row in map(place, keep.tolist())], np.int64)

    best = best_first(all_cos, seqs_of, limit)
    scores = np.clip((all_cos[best] + 1.0) / 2.0, 0.0, 1.0).tolist()
    hits = []
    for i, score in zip(best.tolist(), scores):
        name, rows, row = place(i)
        hits.append(Hit(rows.id(row), score, name, row if isinstance(rows, Rows) else None))
    return hits
