"""Snapshot format 7 (issue 30 item 2): vectors stored as 12-bit codes with a scale per row,
records compressed alone with a dictionary per snapshot, the header's tables compressed; a
row scores the same from the snapshot, the cache and memory; an older format is rebuilt."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ledger import Ledger
from ledger.layout import store_dir
from projections.api import MemoryBackend
from projections.engines import snapshot_writer
from projections.engines.local import Projector
from projections.engines.snapshot import SNAPSHOT_FORMAT, SNAPSHOT_NAME, open_snapshot
from projections.engines.snapshot_check import vectors_problem
from projections.models.embedder import get_embedder
from projections.models.frozen import QUANT_STEPS, VectorCache, dequantise, join, quantise, split
from projections.models.semantic import SemanticIndex


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        np.float32,
        st.tuples(st.integers(1, 8), st.integers(1, 64)),
        elements=st.floats(-1, 1, width=32, allow_subnormal=False),
    )
)
def test_a_quantised_row_is_within_half_a_step_of_its_vector(rows: np.ndarray) -> None:
    codes, scales = quantise(rows)
    assert codes.dtype == np.int16 and scales.dtype == np.float32 and codes.shape == rows.shape
    assert np.all(np.abs(codes) <= QUANT_STEPS)
    high, low = split(codes)
    assert high.dtype == np.int8 and low.dtype == np.uint8 and low.shape == (len(rows), (rows.shape[1] + 1) // 2)
    assert np.array_equal(join(high, low), codes)  # stored in 1.5 bytes a component, exactly
    back = dequantise(codes, scales)
    step = np.max(np.abs(rows), axis=1, keepdims=True) / QUANT_STEPS
    assert np.all(np.abs(back - rows) <= step * 0.5001 + 1e-12)
    assert np.array_equal(dequantise(codes[1:], scales[1:]), back[1:])  # a row's values ignore its neighbours


def test_a_zero_row_stays_zero() -> None:
    codes, scales = quantise(np.zeros((2, 4), np.float32))
    assert not codes.any() and not scales.any() and not dequantise(codes, scales).any()


def test_the_vector_cache_is_bounded_in_bytes() -> None:
    cache = VectorCache(limit=3 * 4 * 8 * 4)  # three collections of 4 rows of 8
    codes, scales = quantise(np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32))

    def make() -> np.ndarray:
        return dequantise(codes, scales)

    first = cache.get("a", make)
    assert cache.get("a", make) is first  # kept
    for name in "bcd":
        cache.get(name, make)
    assert cache.size <= cache.limit and cache.get("a", make) is not first  # "a" went first
    big = np.repeat(make(), 4, axis=0)
    assert cache.get("big", lambda: big) is big and cache.size <= cache.limit  # too large to keep
    assert "big" not in cache._rows


def _fill(backend: MemoryBackend, node: str, count: int, start: int = 0) -> None:
    backend.bulk_import(
        [{"node_id": node, "text": f"{node} result {i}: stencil tiling {i * 7} halo"} for i in range(start, count)],
        "node_scope",
    )


def test_a_row_scores_the_same_from_memory_the_snapshot_and_the_cache(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_writer, "DICTIONARY_FROM", 10)
    backend = MemoryBackend(ckpt)
    backend.start_node("root", current_node="root")
    _fill(backend, "root", 40)
    backend.close()
    with Ledger.open(ckpt) as ledger:
        cold = Projector(ledger, get_embedder(), use_snapshot=False)
        cold.catch_up()
        in_memory = cold.index.vectors("root")
        assert cold.index.blocks["root"].n == 40
        assert cold.save()
        rows = cold.index.base.rows("root") if cold.index.base is not None else None
        assert rows is not None and not cold.index.blocks
        assert np.array_equal(rows.vectors, in_memory)  # the snapshot (dequantised, cached)
        assert rows.vectors is rows.vectors  # then from the cache
        assert all(np.array_equal(rows.vector(i), in_memory[i]) for i in range(rows.n))
        query = get_embedder().embed_one("stencil tiling 35")
        stored = cold.index.search(query, ["root"], 5)
    reopened = MemoryBackend(ckpt)
    index = reopened.session.projector.index
    assert reopened.session.projector.loaded_from_snapshot
    assert index.search(query, ["root"], 5) == stored
    reopened.close()


def test_records_are_compressed_alone_with_a_dictionary_kept_until_the_rows_double(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_writer, "DICTIONARY_FROM", 50)
    path = store_dir(ckpt) / SNAPSHOT_NAME
    backend = MemoryBackend(ckpt)
    backend.start_node("root", current_node="root")
    _fill(backend, "root", 40)
    backend.close()
    assert open_snapshot(path).dictionary() == b""  # too few records: stored raw

    backend = MemoryBackend(ckpt)
    _fill(backend, "root", 100, start=40)
    backend.close()
    view = open_snapshot(path)
    first = view.dictionary()
    rows = view.rows("root")
    assert first and rows is not None and rows.n == 100
    raw = sum(len(rows.record(i)) for i in range(rows.n))
    assert rows.offsets[-1] - rows.offsets[0] < raw / 2  # each record decodes alone, and is smaller
    del view, rows

    backend = MemoryBackend(ckpt)
    _fill(backend, "root", 150, start=100)
    backend.close()
    assert open_snapshot(path).dictionary() == first  # kept: the old rows are at least half

    backend = MemoryBackend(ckpt)
    _fill(backend, "root", 400, start=150)
    texts = [e["text"] for e in backend.get_node_memory("root")["entries"]]
    backend.close()
    view = open_snapshot(path, check=True)
    assert view.dictionary() not in (b"", first)  # trained again once the rows more than doubled
    del view
    reopened = MemoryBackend(ckpt)
    assert reopened.session.projector.loaded_from_snapshot
    assert [e["text"] for e in reopened.get_node_memory("root")["entries"]] == texts
    assert texts == [f"root result {i}: stencil tiling {i * 7} halo" for i in range(400)]
    reopened.close()


def test_a_format_6_snapshot_is_refused_and_rebuilt(ckpt: Path, caplog: pytest.LogCaptureFixture) -> None:
    backend = MemoryBackend(ckpt)
    backend.start_node("root", current_node="root")
    _fill(backend, "root", 5)
    backend.close()
    path = store_dir(ckpt) / SNAPSHOT_NAME
    old = bytearray(path.read_bytes())
    assert struct.unpack("<I", old[8:12])[0] == SNAPSHOT_FORMAT == 7
    old[8:12] = struct.pack("<I", 6)
    path.write_bytes(bytes(old))
    with caplog.at_level(logging.WARNING, logger="projections"):
        reopened = MemoryBackend(ckpt)
        projector = reopened.session.projector
        assert not projector.loaded_from_snapshot
        assert projector.rebuilt == "unreadable (format 6, expected 7)"
        assert [e["text"] for e in reopened.get_node_memory("root")["entries"]][
            -1
        ] == "root result 4: stencil tiling 28 halo"
        reopened.close()
    assert "not used: unreadable (format 6, expected 7); rebuilding from the log" in caplog.text
    assert open_snapshot(path).preamble.format == 7  # saved again in the new format


# What the snapshot's vector check says of a stored vector, changed thus from what was stored
# (``fresh`` is the text's embedding now, ``step`` one 12-bit step of it): True = accepted.
TOLERANCE_VERDICTS = {
    "as stored": True,
    "one component 0.9 step from the embedding": True,
    "every component 0.9 step from the embedding": True,
    "one component 3 steps from the embedding": False,
    "another row's vector": False,
    "no vector": False,
}
_CHANGES = {
    "as stored": lambda stored, fresh, other, step: stored,
    "one component 0.9 step from the embedding": lambda stored, fresh, other, step: _moved(stored, fresh, 0.9 * step),
    "every component 0.9 step from the embedding": lambda stored, fresh, other, step: (
        fresh + np.float32(0.9 * step) * np.where(np.arange(len(fresh)) % 2, 1, -1).astype(np.float32)
    ),
    "one component 3 steps from the embedding": lambda stored, fresh, other, step: _moved(stored, fresh, 3 * step),
    "another row's vector": lambda stored, fresh, other, step: other,
    "no vector": lambda stored, fresh, other, step: None,
}


def _moved(stored: np.ndarray, fresh: np.ndarray, by: float) -> np.ndarray:
    """``stored`` with its component 7 set ``by`` above the embedding's."""
    out = stored.copy()
    out[7] = fresh[7] + np.float32(by)
    return out


class _Changed:
    """A semantic index whose row ``item_id`` reads as ``vector`` (the others as stored)."""

    def __init__(self, index: SemanticIndex, item_id: str, vector: np.ndarray | None) -> None:
        self.index, self.item_id, self.vector = index, item_id, vector

    def vector_of(self, name: str, item_id: str) -> np.ndarray | None:
        return self.vector if item_id == self.item_id else self.index.vector_of(name, item_id)


def test_the_vector_check_allows_one_12_bit_step_and_no_more(ckpt: Path) -> None:
    backend = MemoryBackend(ckpt)
    backend.start_node("root", current_node="root")
    _fill(backend, "root", 6)
    backend.close()
    reopened = MemoryBackend(ckpt)
    projector = reopened.session.projector
    assert projector.loaded_from_snapshot  # the vectors are the snapshot's 12-bit codes
    items = projector.catalog.entries_of("root")
    embedder = get_embedder()
    fresh = embedder.embed([item.text for item in items])
    target = items[2]
    stored = projector.index.vector_of("root", target.entry_id)
    assert stored is not None and not np.array_equal(stored, fresh[2])  # quantised, not the float32 vector
    step = float(np.max(np.abs(fresh[2]))) / QUANT_STEPS
    other = projector.index.vector_of("root", items[4].entry_id)
    verdicts = {}
    for case, change in _CHANGES.items():
        index = _Changed(projector.index, target.entry_id, change(stored, fresh[2], other, step))
        problem = vectors_problem(index, embedder, items)  # type: ignore[arg-type]
        assert problem in (None, f"its vector of seq {target.seq} is not the embedding of that entry's text")
        verdicts[case] = problem is None
    reopened.close()
    assert verdicts == TOLERANCE_VERDICTS
