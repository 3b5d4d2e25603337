"""Does a snapshot hold what the log it claims to fold says? Checks for loads and ``verify``.

A checksum proves a snapshot is the file that was written; these prove the file is a fold of
the log. The catalog and the semantic index are both derived from the events, so:

- ``structure_problem``: every block holds exactly its collection's catalog records, in
  order, with their seqs and tombstones (all rows; no log access, cheap);
- ``sample_problem``: records (all of a small catalog, else a few chosen at random) equal
  the fold of their own event in the log, and their vectors the embedding of their text
  (every load);
- ``catalog_problem``: the whole catalog equals a fresh fold of the log up to the cursor,
  and ``vectors_problem`` many vectors equal a fresh embedding (``verify``).
"""
from __future__ import annotations

import random
from typing import Any

import msgspec
import numpy as np

from ledger import Ledger
from ledger.events import Event

from projections.models.catalog import NEVER, Catalog, CatalogState, Entry, Step
from projections.models.semantic import REACT, VECTOR_DTYPE, Block, Embedder

CHECK_ALL_UP_TO = 32  # a catalog this small is checked against the log whole on every load
SAMPLE_ON_LOAD = 8  # otherwise this many records, chosen at random
VECTORS_ON_VERIFY = 1000  # vectors re-embedded by `verify`


def structure_problem(catalog: Catalog, blocks: dict[str, Block], cursor: int) -> str | None:
    """Why the blocks are not the index of this catalog (ids, seqs, tombstones), or None."""
    expected: dict[str, list[Entry | Step]] = {node: list(entries) for node, entries in catalog.by_node.items() if entries}
    if catalog.steps:
        expected[REACT] = list(catalog.steps)
    if set(blocks) != set(expected):
        return f"index collections {sorted(map(_name, blocks))} differ from the catalog's {sorted(map(_name, expected))}"
    for name, records in expected.items():
        block = blocks[name]
        n = block.n
        ids = [r.entry_id if isinstance(r, Entry) else r.step_id for r in records]
        cleared = [r.cleared_at if isinstance(r, Entry) else NEVER for r in records]
        if block.ids != ids:
            return f"index rows of {_name(name)} are not the catalog's entries"
        if not np.array_equal(block.seqs[:n], [r.seq for r in records]) or not np.array_equal(block.cleared[:n], cleared):
            return f"index seqs or tombstones of {_name(name)} differ from the catalog's"
        if block.hidden != int(np.count_nonzero(block.cleared[:n] != NEVER)):
            return f"index of {_name(name)} counts {block.hidden} hidden rows"
    last = max((r.seq for rs in expected.values() for r in rs), default=0)
    if last > cursor:
        return f"holds seq {last}, beyond its cursor {cursor}"
    return None


def sample_problem(ledger: Ledger, catalog: Catalog, blocks: dict[str, Block], embedder: Embedder) -> str | None:
    """Why some records differ from the fold of their event in the log, or None: all of a
    small catalog's records, else SAMPLE_ON_LOAD chosen at random (each costs a seek)."""
    pool: list[Any] = [*catalog.entries.values(), *catalog.steps, *catalog.nodes.values(), *catalog.seeds]
    picks = pool if len(pool) <= CHECK_ALL_UP_TO else random.sample(pool, SAMPLE_ON_LOAD)
    for record in picks:
        event = ledger.event_at(record.seq)
        if event is None or _normalised(record) != _fold_one(event):
            return f"its record of seq {record.seq} is not the log's event seq {record.seq}"
    return vectors_problem(catalog, blocks, embedder, [r for r in picks if isinstance(r, (Entry, Step))])


def catalog_problem(ledger: Ledger, state: CatalogState, cursor: int) -> str | None:
    """Why the catalog is not the fold of the log's events 1..cursor, or None."""
    fresh = Catalog()
    for event in ledger.events(as_of=cursor):
        fresh.apply(event)
    want = fresh.state()
    for field in ("entries", "nodes", "steps", "seeds"):
        have, should = getattr(state, field), getattr(want, field)
        for mine, theirs in zip(have, should):
            if mine != theirs:
                return f"its {field[:-1]} at seq {mine.seq} differs from the log's fold (seq {theirs.seq})"
        if len(have) != len(should):
            return f"it holds {len(have)} {field}, the log's fold up to seq {cursor} has {len(should)}"
    return None


def vectors_problem(catalog: Catalog, blocks: dict[str, Block], embedder: Embedder, records: list[Entry | Step]) -> str | None:
    """Why the stored vectors of ``records`` are not the embedding of their text, or None."""
    if not records:
        return None
    texts = [r.text if isinstance(r, Entry) else r.content for r in records]
    fresh = embedder.embed(texts).astype(VECTOR_DTYPE)
    for record, vector in zip(records, fresh):
        block = blocks[record.node_id if isinstance(record, Entry) else REACT]
        row = block.ids.index(record.entry_id if isinstance(record, Entry) else record.step_id)
        if not np.array_equal(block.matrix[row], vector):
            return f"its vector of seq {record.seq} is not the embedding of that entry's text"
    return None


def random_rows(catalog: Catalog, count: int = VECTORS_ON_VERIFY) -> list[Entry | Step]:
    pool: list[Entry | Step] = [*catalog.entries.values(), *catalog.steps]
    return random.sample(pool, min(count, len(pool)))


def _fold_one(event: Event) -> Any:
    """The catalog record one event makes on its own (None when it makes none)."""
    fresh = Catalog()
    fresh.apply(event)
    state = fresh.state()
    return next(iter([*state.entries, *state.steps, *state.nodes, *state.seeds]), None)


def _normalised(record: Any) -> Any:
    """A record as its event alone makes it: a later tombstone's stamp removed."""
    return msgspec.structs.replace(record, cleared_at=NEVER) if isinstance(record, Entry) else record


def _name(collection: str) -> str:
    return "the ReAct trace" if collection == REACT else repr(collection)
