"""A whole-snapshot read, done in bulk (issue 30, verify at a million entries): ``unpack_many``
decompresses a chunk of records in one call and gives what ``unpack`` gives record by record
(the same bytes, the same SnapshotDamaged), and ``check_all`` checks every collection's
structure at once with the verdicts, and messages, of the check of one collection at a time.

Damage is forged in the file's bytes, its checksums made again: content a bug or an edit wrote."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ledger.layout import store_dir
from projections.api import MemoryBackend
from projections.engines import snapshot as snapshot_module
from projections.engines import snapshot_writer
from projections.engines.snapshot import SNAPSHOT_NAME, SnapshotDamaged, SnapshotView, open_snapshot
from projections.models.catalog import Catalog
from projections.models.frozen import NEVER, REACT


def _checkpoint(ckpt: Path, entries: int = 30) -> Path:
    """Entries in two nodes (node_A cleared once, then written again), ReAct steps, a seed;
    records short enough that each frame says its size in one byte."""
    backend = MemoryBackend(ckpt)
    backend.start_node("root", current_node="root")
    backend.start_node("node_A", "root", ["root"], current_node="node_A")
    for i in range(entries):
        node = "root" if i % 3 else "node_A"
        backend.add_memory(node, f"entry {i}: tile {i * 8} halo {i % 7}", {"i": i}, current_node=node)
        if i == entries // 2:
            backend.clear_node_memory("node_A", current_node="node_A")
    backend.react_add("Thought: compile with -O3")
    backend.react_add("Action: run the benchmark")
    backend.seed_core_memory("persona", "human", {"goal": "fast stencil"})
    backend.close()
    return store_dir(ckpt) / SNAPSHOT_NAME


@pytest.fixture(params=["raw", "dictionary"])
def snapshot(request: pytest.FixtureRequest, ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A snapshot whose records are stored raw (few rows), or compressed with a dictionary."""
    if request.param == "dictionary":
        monkeypatch.setattr(snapshot_writer, "DICTIONARY_FROM", 10)
    path = _checkpoint(ckpt, 300 if request.param == "dictionary" else 30)
    assert bool(open_snapshot(path).dictionary()) == (request.param == "dictionary")
    return path


def _resign(path: Path, data: bytearray) -> None:
    """Write ``data`` as the snapshot, its chunk checksums and header checksum made again."""
    at, length, _digest, magic = snapshot_module._TRAILER.unpack(data[-snapshot_module._TRAILER.size :])
    chunks = -(-at // snapshot_module.CHUNK)
    digests = b"".join(
        hashlib.sha256(data[c * snapshot_module.CHUNK : min((c + 1) * snapshot_module.CHUNK, at)]).digest()
        for c in range(chunks)
    )
    header = bytes(data[at : at + length - len(digests)]) + digests
    trailer = snapshot_module._TRAILER.pack(
        at, length, hashlib.sha256(snapshot_module.PROLOGUE + header).digest(), magic
    )
    path.write_bytes(bytes(data[:at]) + header + trailer)


def _spans(view: SnapshotView) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(view._offsets[:-1]), np.asarray(view._offsets[1:])


def _outcome(call: Callable[[], object]) -> object:
    """What a call returns, or the SnapshotDamaged it raises (as its message)."""
    try:
        return call()
    except SnapshotDamaged as damage:
        return ("SnapshotDamaged", str(damage))


def test_bulk_unpack_gives_every_record_as_unpack_does(snapshot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    view = open_snapshot(snapshot, check=True)
    starts, ends = _spans(view)
    order = np.random.default_rng(7).permutation(len(starts))  # any order, as a scan in seq order reads them
    one = [view.unpack(view._records[a:b]) for a, b in zip(starts[order].tolist(), ends[order].tolist())]
    with monkeypatch.context() as patch:
        if view.dictionary():  # every header read as zstandard reads it, and the records decompressed in one call
            sizes = snapshot_module._content_sizes(view._heads, starts, ends)
            assert sizes is not None and sizes.tolist() == [len(one[k]) for k in np.argsort(order)]
            patch.setattr(view, "unpack", lambda record: pytest.fail("a record was decompressed alone"))
        many = view.unpack_many(starts[order], ends[order])
    assert many.split() == one and many.lengths.tolist() == [len(r) for r in one]
    assert view.unpack_many(starts[:0], ends[:0]).split() == []
    for lo, hi in ((0, 1), (3, 4), (0, len(starts))):
        assert view.unpack_many(starts[lo:hi], ends[lo:hi]).split() == [
            view.unpack(view._records[a:b]) for a, b in zip(starts[lo:hi].tolist(), ends[lo:hi].tolist())
        ]


@pytest.mark.parametrize("steps", [False, True])
@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_scan_columns_gives_the_rows_scan_rows_gives(snapshot: Path, steps: bool, chunk: int) -> None:
    view = open_snapshot(snapshot, check=False)
    catalog = Catalog(view, view.tables)
    rows = list(catalog.scan_rows(steps))
    columns = [
        (name, item_id, seq, record)
        for names, ids, seqs, records in catalog.scan_columns(steps, chunk)
        for name, item_id, seq, record in zip(names, ids, seqs, records.split(), strict=True)
    ]
    assert columns == [(name, item_id, seq, record) for name, item_id, seq, _cleared, record in rows]
    assert rows and all(type(record) is bytes for *_, record in columns)


def test_the_dictionary_s_chunks_are_checked_before_a_bulk_read(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_writer, "DICTIONARY_FROM", 10)
    path = _checkpoint(ckpt, 300)
    data = bytearray(path.read_bytes())
    view = open_snapshot(path, check=False)
    offset, size = view._sections["dictionary"]
    starts, ends = _spans(view)
    del view
    data[offset + size // 2] ^= 0x01
    path.write_bytes(bytes(data))  # (checksums not made again: bit rot)
    for read in ("unpack", "unpack_many"):
        view = open_snapshot(path, check=False)
        with pytest.raises(SnapshotDamaged, match=r"^unreadable \(checksum mismatch in bytes \d+-\d+"):
            if read == "unpack":
                view.unpack(view._records[int(starts[0]) : int(ends[0])])
            else:
                view.unpack_many(starts, ends)


def _frame_sizes_one_byte(view: SnapshotView, row: int) -> int:
    """Where, in the file, row ``row``'s record says its size (a one-byte field, checked)."""
    record = bytes(view._records[int(view._offsets[row]) : int(view._offsets[row + 1])])
    assert record[:4] == b"\x28\xb5\x2f\xfd" and record[4] >> 5 & 1 and record[4] >> 6 == 0 and not record[4] & 3
    return view._sections["records"][0] + int(view._offsets[row]) + 5


FORGERIES: dict[str, Callable[[bytearray, int, int], None]] = {
    "a larger size": lambda data, start, at: data.__setitem__(at, data[at] + 1),
    "a smaller size": lambda data, start, at: data.__setitem__(at, data[at] - 1),
    "size zero": lambda data, start, at: data.__setitem__(at, 0),
    "no zstd magic": lambda data, start, at: data.__setitem__(start, 0x29),
    "a skippable frame": lambda data, start, at: data.__setitem__(slice(start, start + 4), b"\x50\x2a\x4d\x18"),
    "a reserved bit": lambda data, start, at: data.__setitem__(start + 4, data[start + 4] | 8),
    "a body byte flipped": lambda data, start, at: data.__setitem__(at + 3, data[at + 3] ^ 0xFF),
}


@pytest.mark.parametrize("where", ["first", "middle"])
@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_damaged_record_reads_in_bulk_as_it_reads_alone(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch, forgery: str, where: str
) -> None:
    """The same bytes or the same SnapshotDamaged, whatever the damage and wherever it is in
    the batch (a first frame of size zero once made zstandard's batch call free memory twice)."""
    monkeypatch.setattr(snapshot_writer, "DICTIONARY_FROM", 10)
    path = _checkpoint(ckpt, 300)
    view = open_snapshot(path, check=True)
    row = 0 if where == "first" else view.rows_total // 2
    at = _frame_sizes_one_byte(view, row)
    start = view._sections["records"][0] + int(view._offsets[row])
    del view
    data = bytearray(path.read_bytes())
    FORGERIES[forgery](data, start, at)
    _resign(path, data)
    view = open_snapshot(path, check=True)  # the structure is sound: only the record is not
    starts, ends = _spans(view)

    def unpack(a: int, b: int) -> object:
        return _outcome(lambda: view.unpack(view._records[a:b]))

    alone = [unpack(a, b) for a, b in zip(starts.tolist(), ends.tolist())]
    damaged = alone[row]
    if isinstance(damaged, tuple):
        assert damaged[1].startswith("its content disagrees with the log: a record does not decompress (")
    bulk = _outcome(lambda: view.unpack_many(starts, ends).split())
    first_damage = next((o for o in alone if isinstance(o, tuple)), None)
    assert bulk == (first_damage if first_damage is not None else alone)
    if first_damage is not None:  # so the scan of the rows stops there too, with that message
        catalog = Catalog(view, view.tables)
        with pytest.raises(SnapshotDamaged) as raised:
            for steps in (False, True):
                list(catalog.scan_columns(steps, 64))
        assert str(raised.value) == first_damage[1]


# -- check_all: every collection at once ------------------------------------------------


def _put(data: bytearray, view: SnapshotView, section: str, row: int, value: int) -> None:
    struct.pack_into("<q", data, view._sections[section][0] + 8 * row, value)


def _put_all(data: bytearray, view: SnapshotView, puts: list[tuple[str, int, int]]) -> None:
    for section, row, value in puts:
        _put(data, view, section, row, value)


def _get(view: SnapshotView, section: str, row: int) -> int:
    return int({"seqs": view._seqs, "cleared": view._cleared, "offsets": view._offsets}[section][row])


def _row(view: SnapshotView, name: str, i: int) -> int:
    start, count = view._collections[name]
    return start + (i % count)


def _one_at_a_time(path: Path) -> str | None:
    """The verdict of the check before it was done at once: every chunk, then each collection's
    ``_load`` in order."""
    view = open_snapshot(path, check=False)
    try:
        view._check_bytes(0, view._data_end)
        for name in view.names:
            view.rows(name)
    except SnapshotDamaged as damage:
        return str(damage)
    return None


def _damage(edit: Callable[[bytearray, SnapshotView], None], path: Path) -> None:
    view = open_snapshot(path, check=True)
    data = bytearray(path.read_bytes())
    edit(data, view)
    del view
    _resign(path, data)


CURSOR = "{cursor}"
DAMAGE: dict[str, tuple[str, Callable[[bytearray, SnapshotView], None]]] = {
    "offsets out of order": (
        "record offsets of 'root' are out of order or out of range",
        lambda d, v: _put(d, v, "offsets", _row(v, "root", 2), _get(v, "offsets", _row(v, "root", 3)) + 1),
    ),
    "the last offset beyond the records": (
        "record offsets of the ReAct trace are out of order or out of range",
        lambda d, v: _put(d, v, "offsets", v.rows_total, len(v._records) + 1),
    ),
    "a negative first offset": (
        "record offsets of 'node_A' are out of order or out of range",
        lambda d, v: _put(d, v, "offsets", 0, -1),
    ),
    "seqs out of order": (
        f"seqs of 'node_A' are not increasing within 1..{CURSOR}",
        lambda d, v: _put(d, v, "seqs", _row(v, "node_A", 1), _get(v, "seqs", _row(v, "node_A", 0))),
    ),
    "a seq beyond the cursor": (
        f"seqs of the ReAct trace are not increasing within 1..{CURSOR}",
        lambda d, v: _put(d, v, "seqs", _row(v, REACT, -1), v.cursor + 1),
    ),
    "a seq of zero": (
        f"seqs of 'root' are not increasing within 1..{CURSOR}",
        lambda d, v: _put(d, v, "seqs", _row(v, "root", 0), 0),
    ),
    "none (seqs interleave across collections)": ("", lambda d, v: None),
    "a tombstone where none was": (
        "tombstones of 'root' are not those its node_cleared and checkpoint_purged events make",
        lambda d, v: _put(d, v, "cleared", _row(v, "root", 1), v.cursor),
    ),
    "a tombstone forgotten where node_cleared made one": (
        "tombstones of 'node_A' are not those its node_cleared and checkpoint_purged events make",
        lambda d, v: _put(d, v, "cleared", _row(v, "node_A", 0), NEVER),
    ),
    "node_cleared's tombstone stamped on a later row": (
        "tombstones of 'node_A' are not those its node_cleared and checkpoint_purged events make",
        lambda d, v: _put(d, v, "cleared", _row(v, "node_A", -1), _get(v, "cleared", _row(v, "node_A", 0))),
    ),
    "a ReAct step hidden": (
        "tombstones of the ReAct trace are not those its node_cleared and checkpoint_purged events make",
        lambda d, v: _put(d, v, "cleared", _row(v, REACT, 0), v.cursor),
    ),
    "two collections wrong, one with node_cleared tombstones: the first is named": (
        f"seqs of 'node_A' are not increasing within 1..{CURSOR}",
        lambda d, v: _put_all(
            d, v, [("cleared", _row(v, "root", 1), v.cursor), ("seqs", _row(v, "node_A", -1), v.cursor + 1)]
        ),
    ),
    "two collections wrong: the first is named": (
        "tombstones of 'root' are not those its node_cleared and checkpoint_purged events make",
        lambda d, v: _put_all(
            d, v, [("seqs", _row(v, REACT, -1), v.cursor + 1), ("cleared", _row(v, "root", 1), v.cursor)]
        ),
    ),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_check_all_finds_structural_damage_and_names_it_as_before(snapshot: Path, case: str) -> None:
    expected, edit = DAMAGE[case]
    view = open_snapshot(snapshot, check=True)
    assert view.names == ["node_A", "root", REACT]  # (the order the messages above assume)
    expected = expected.replace(CURSOR, str(view.cursor))
    del view
    _damage(edit, snapshot)
    message = f"its content disagrees with the log: {expected}" if expected else None
    assert _one_at_a_time(snapshot) == message  # as the check of one collection at a time says
    view = open_snapshot(snapshot, check=False)
    if message is None:
        view.check_all()
        return
    with pytest.raises(SnapshotDamaged) as raised:
        view.check_all()
    assert str(raised.value) == message


def test_check_all_builds_the_rows_the_check_of_one_collection_builds(snapshot: Path) -> None:
    at_once = open_snapshot(snapshot, check=False)
    assert at_once._sound() == [name != "node_A" for name in at_once.names]  # node_A's own tombstones: alone
    at_once.check_all()
    alone = open_snapshot(snapshot, check=False)
    alone._check_bytes(0, alone._data_end)
    for name in alone.names:
        a, b = at_once._rows[name], alone.rows(name)
        assert b is not None and (a.name, a.n, a.hidden) == (b.name, b.n, b.hidden)
        for column in ("seqs", "cleared", "ids", "high", "low", "scales", "offsets"):
            assert np.array_equal(getattr(a, column), getattr(b, column)), (name, column)
        assert [a.record(i) for i in range(a.n)] == [b.record(i) for i in range(b.n)]
    assert any(at_once._rows[name].hidden for name in at_once.names)
