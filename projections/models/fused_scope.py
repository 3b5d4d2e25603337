"""Both channels over one scope's rows, fused as arrays (the embedded engine's search).

The semantic index scores the scope's rows part by part (a collection's stored rows, then its
fresh ones); the lexical index numbers the same entries in its own order. Each part's rows are
mapped once to the lexical index's row numbers (kept with that index: a part of the same
collection, kind and length in the same epoch holds the same rows), so a search picks the
semantic pool, the lexical pool and their fusion with numpy and turns only the winners into
ids. The ranking is :func:`projections.models.fusion.fuse_keys`, the rule every engine's
results go through: the same entries and scores as ``fuse`` over the two channels' lists.
"""

from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np

from projections.models.fusion import POOL, fuse_keys
from projections.models.lexical import Ranked, ScopeIndex
from projections.models.semantic import Block, ScopeRows, best_first


class Winner(NamedTuple):
    """A fused result: its id and score, and where the semantic index keeps its row
    (``row`` None: a fresh row, in memory) for the look-up that follows."""

    id: str
    score: float
    collection: str
    row: int | None


def fuse_scope(query: str, scope: ScopeRows, ranked: Ranked, parent: str | None, limit: int) -> list[Winner] | None:
    """The ``limit`` best rows of the scope by both channels, best first; None when a row of
    the semantic index is not one of the lexical index's (then the caller fuses by id)."""
    index = ranked.scope_index
    plan = _plan(scope, index)
    if plan is None:
        return None
    maps, layout, rows = plan
    cos = scope.every
    pool = max(limit, POOL)
    best = best_first(cos, lambda keep: index.seqs[rows[keep]], pool)
    # the engine's score, as ``semantic._top`` gives it (np.clip's values; its call costs 10 µs)
    semantic = np.minimum(np.maximum((cos[best] + 1.0) / 2.0, 0.0), 1.0).astype(np.float64)
    facts = _row_facts(index)
    parent_at = facts.node_of_name.get(parent, -1) if parent is not None else -1

    def told(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return facts.node[keys] == parent_at, facts.failed[keys]

    keys, scores = fuse_keys(
        query,
        rows[best],
        semantic,
        ranked.rows,
        ranked.scores,
        facts.id_order[ranked.rows],
        told,
        limit,
        ranked.coverage,
    )
    part, row = _places(index, maps, layout)
    out = []
    for k, score in zip(keys.tolist(), scores.tolist()):
        if part[k] < 0:  # in no part (a redacted entry has no vector): nothing to tell the look-up
            out.append(Winner(index.ids[k], score, "", None))
            continue
        name, rows, _ = scope.parts[part[k]]
        out.append(Winner(index.ids[k], score, name, None if isinstance(rows, Block) else int(row[k])))
    return out


def _plan(scope: ScopeRows, index: ScopeIndex) -> tuple[list[np.ndarray], tuple[object, ...], np.ndarray] | None:
    """The parts' maps, their layout and the visible rows' lexical row numbers; the last
    layout's kept with the index (the same until a fold moves ``scope.key``)."""
    kept = cast("tuple[object, tuple[list[np.ndarray], tuple[object, ...], np.ndarray]] | None", index.memo.get("plan"))
    if scope.key is not None and kept is not None and kept[0] == scope.key and index.memo.get("epoch") == scope.epoch:
        return kept[1]
    mapped = _part_maps(scope, index)
    if mapped is None:
        return None
    maps, layout = mapped
    plan = (maps, layout, _visible_rows(scope, index, maps, layout))
    if scope.key is not None:
        index.memo["plan"] = (scope.key, plan)
    return plan


def _visible_rows(
    scope: ScopeRows, index: ScopeIndex, maps: list[np.ndarray], layout: tuple[object, ...]
) -> np.ndarray:
    """The lexical index's row of each visible semantic row, in the parts' order (kept for the
    layout when every row is visible: a search as of now with nothing hidden)."""
    if all(picked is None for _, _, picked in scope.parts):
        key = ("visible", layout)
        found = cast("np.ndarray | None", index.memo.get(key))
        if found is None:
            found = index.memo[key] = np.concatenate(maps) if maps else np.zeros(0, np.int64)
        return found
    shown = [m if picked is None else m[picked] for m, (_, _, picked) in zip(maps, scope.parts)]
    return np.concatenate(shown) if shown else np.zeros(0, np.int64)


def _part_maps(scope: ScopeRows, index: ScopeIndex) -> tuple[list[np.ndarray], tuple[object, ...]] | None:
    """Each part's rows (visible or not) as the lexical index's row numbers, kept with it; and
    the parts' keys (their layout)."""
    memo = index.memo
    if memo.get("epoch") != scope.epoch:
        memo.clear()
        memo["epoch"] = scope.epoch
    maps, keys = [], []
    for b, (name, rows, _) in enumerate(scope.parts):
        key = ("part", name, isinstance(rows, Block), rows.n)
        found = cast("np.ndarray | None", memo.get(key))
        if found is None:
            where = index.where
            at = [where.get(i, -1) for i in scope.part_ids(b)]
            if -1 in at:
                return None
            found = memo[key] = np.array(at, np.int64)
        maps.append(found)
        keys.append(key)
    return maps, tuple(keys)


def _places(index: ScopeIndex, maps: list[np.ndarray], keys: tuple[object, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Where each of the lexical index's rows sits among the semantic parts: the part (-1:
    none) and the row in it; once per layout of the parts."""
    key = ("places", keys)
    found = index.memo.get(key)
    if found is None:
        part, row = np.full(len(index.ids), -1, np.int64), np.full(len(index.ids), -1, np.int64)
        for b, at in enumerate(maps):
            part[at], row[at] = b, np.arange(len(at))
        found = index.memo[key] = (part, row)
    return found  # type: ignore[return-value]


class _Facts(NamedTuple):
    """What the fusion asks of each of a scope index's rows, as arrays."""

    node: np.ndarray  # the row's node, as its place in ``node_of_name``
    node_of_name: dict[str, int]
    failed: np.ndarray  # the row tells of a failure
    id_order: np.ndarray  # the row's id's place among the scope's ids (the lexical pool's tie-break)


def _row_facts(index: ScopeIndex) -> _Facts:
    found = index.memo.get("facts")
    if found is None:
        names: dict[str, int] = {}
        node = np.array([names.setdefault(n, len(names)) for n in index.row_node], np.int64)
        order = np.empty(len(index.ids), np.int64)
        order[sorted(range(len(index.ids)), key=index.ids.__getitem__)] = np.arange(len(index.ids))
        found = _Facts(node, names, np.array(index.row_failed, bool), order)
        index.memo["facts"] = found
    return found  # type: ignore[return-value]
