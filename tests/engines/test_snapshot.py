"""The projection snapshot is a checked cache (issue 10 items 1, 3, 8): bit rot and content
that disagrees with the log are rebuilt from the log and said so, never served; whatever
the log accepts can be saved; saving never raises and leaves no temporary file behind."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest

from ledger import Ledger
from ledger.layout import store_dir
from projections.api import MemoryBackend
from projections.engines import local as projector_module
from projections.engines.local import Projector, check_snapshot
from projections.engines.snapshot import SNAPSHOT_FORMAT, SNAPSHOT_NAME, SnapshotPreamble, open_snapshot
from projections.models.catalog import EntryRecord
from projections.models.embedder import get_embedder
from projections.models.frozen import split
from support.env import subprocess_env

TEXTS = [f"entry {i}: temporal blocking with tile {i * 8}" for i in range(12)]


def make_checkpoint(ckpt: Path) -> bytes:
    """12 entries, a tombstone, two ReAct steps and a seed, folded and snapshotted."""
    backend = MemoryBackend(ckpt)
    backend.start_node("root", current_node="root")
    for i, text in enumerate(TEXTS):
        node = "root" if i < 6 else "node_A"
        if i == 6:
            backend.start_node("node_A", "root", ["root"], current_node="node_A")
        backend.add_memory(node, text, {"i": i}, current_node=node)
    backend.clear_node_memory("node_A", current_node="node_A")
    backend.add_memory("node_A", "after the tombstone", current_node="node_A")
    backend.react_add("Thought: compile with -O3")
    backend.react_add("Action: run the benchmark")
    backend.seed_core_memory("persona", "human", {"goal": "fast stencil"})
    backend.close()
    return (store_dir(ckpt) / SNAPSHOT_NAME).read_bytes()


def served(ckpt: Path) -> tuple[bool, dict[str, list[str]]]:
    """Whether the snapshot was loaded, and every text a fresh projector serves per node."""
    with Ledger.open(ckpt) as ledger:
        p = Projector(ledger, get_embedder())
        loaded = p.loaded_from_snapshot
        p.catch_up()
        texts = {node: [e.text for e in p.catalog.node_entries(node)] for node in p.catalog.by_node}
        texts["react"] = [s.content for s in p.catalog.steps]
    return loaded, texts


def test_every_flipped_byte_of_the_snapshot_is_rebuilt_never_served(
    ckpt: Path, caplog: pytest.LogCaptureFixture
) -> None:
    original = make_checkpoint(ckpt)
    loaded, truth = served(ckpt)
    assert loaded
    positions = sorted(
        {0, 5, len(original) // 2, len(original) - 1, *range(9, len(original), max(1, len(original) // 24))}
    )
    for pos in positions:
        rotten = bytearray(original)
        rotten[pos] ^= 0x10
        (store_dir(ckpt) / SNAPSHOT_NAME).write_bytes(bytes(rotten))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="projections"):
            loaded, texts = served(ckpt)
        assert not loaded, f"flipped byte {pos} of {len(original)} was loaded"
        assert texts == truth
        assert "not used: unreadable" in caplog.text and "rebuilding from the log" in caplog.text
        check = check_snapshot(Ledger.open_readonly(ckpt))
        assert check.problem and check.problem.startswith("memory_projection.snapshot: unreadable")
    assert len(positions) >= 20


def test_a_rebuild_is_recorded_for_status(ckpt: Path) -> None:
    original = make_checkpoint(ckpt)
    (store_dir(ckpt) / SNAPSHOT_NAME).write_bytes(original[:-10])
    status = subprocess.run(
        [sys.executable, "-m", "projections", "status", str(ckpt), "--json"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
    )
    assert "unreadable (cut short" in json.loads(status.stdout)["projections"]["snapshot"]["problem"]
    backend = MemoryBackend(ckpt)
    assert backend.session.projector.rebuilt.startswith("unreadable")
    backend.health()  # a read folds the log, so close() saves the rebuilt state
    backend.close()
    status = subprocess.run(
        [sys.executable, "-m", "projections", "status", str(ckpt), "--json"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
    )
    snapshot = json.loads(status.stdout)["projections"]["snapshot"]
    assert status.returncode == 0 and "unreadable" in snapshot["rebuilt"] and snapshot["lag"] == 0


def _forge(ckpt: Path, edit) -> None:
    """A snapshot with valid checksums whose content was changed (a bug, or an edit): the
    log folded afresh, edited in memory, saved."""
    with Ledger.open(ckpt) as ledger:
        p = Projector(ledger, get_embedder(), use_snapshot=False)
        p.catch_up()
        edit(p.catalog.fresh("root"), p.index.blocks["root"])
        assert p.save()


@pytest.mark.parametrize("what", ["text", "vector", "tombstone", "missing-entry"])
def test_a_snapshot_that_disagrees_with_the_log_is_rebuilt(ckpt: Path, what: str) -> None:
    make_checkpoint(ckpt)
    _, truth = served(ckpt)

    def edit(rows, block) -> None:
        if what == "text":
            rows.records[3] = msgspec.json.encode(EntryRecord(0.0, {"text": "a text that is not in the log"}, None))
        elif what == "vector":
            block.high[2:3], block.low[2:3] = split(-block.codes(2, 3))
        elif what == "tombstone":
            rows.cleared[1] = block.cleared[1] = 7
        else:
            for column in (rows.ids, rows.seqs, rows.cleared, rows.records):
                del column[3]
            block.ids.pop(3)
            block.seqs = np.delete(block.seqs, 3)
            block.cleared = np.delete(block.cleared, 3)
            block.high, block.low = np.delete(block.high, 3, axis=0), np.delete(block.low, 3, axis=0)
            block.scales = np.delete(block.scales, 3)

    _forge(ckpt, edit)
    check = check_snapshot(Ledger.open_readonly(ckpt))
    assert check.problem and "disagrees with the log" in check.problem, check
    verify = subprocess.run(
        [sys.executable, "-m", "projections", "verify", str(ckpt)], capture_output=True, text=True, env=subprocess_env()
    )
    assert (
        verify.returncode == 1
        and "problem: memory_projection.snapshot: its content disagrees with the log" in verify.stdout
    )
    loaded, texts = served(ckpt)
    assert texts == truth
    if what != "vector":
        assert not loaded
        return
    # Vectors are checked before the first search: reads that never search never load the model.
    assert loaded
    backend = MemoryBackend(ckpt)
    assert backend.session.projector.loaded_from_snapshot
    assert [r["text"] for r in backend.search_memory(TEXTS[2], ["root"], 1)["results"]] == [TEXTS[2]]
    assert backend.session.projector.rebuilt.startswith("its content disagrees with the log: its vector of seq")
    assert not backend.session.projector.loaded_from_snapshot
    backend.close()


@pytest.mark.parametrize(
    ("change", "sound"),
    [
        ("keys-reordered", True),  # the same record in other bytes: what it says is compared
        ("whitespace", True),
        ("ts", False),
        ("kind", False),
        ("metadata", False),
        ("text-in-other-key-order", False),
    ],
)
def test_a_record_is_compared_by_what_it_says_not_by_its_bytes(ckpt: Path, change: str, sound: bool) -> None:
    make_checkpoint(ckpt)

    def edit(rows, block) -> None:
        ts, body, kind = msgspec.json.decode(rows.records[3])
        if change == "ts":
            ts += 1.0
        elif change == "kind":
            kind = "experiment_result"
        elif change == "metadata":
            body = {**body, "metadata": {"i": 4}}
        elif change == "text-in-other-key-order":
            body = {**body, "text": body["text"] + "!"}
        reordered = dict(reversed(list(body.items())))
        separators = (", ", ": ") if change == "whitespace" else (",", ":")
        rows.records[3] = json.dumps([ts, reordered, kind], separators=separators).encode()
        assert rows.records[3] != msgspec.json.encode(EntryRecord(ts, body, kind))  # other bytes, always

    _forge(ckpt, edit)
    check = check_snapshot(Ledger.open_readonly(ckpt))
    assert (check.problem is None) == sound, check
    if not sound:
        assert "its entry at seq" in check.problem and "differs from the log's fold" in check.problem


@pytest.mark.parametrize("column", ["id", "seq"])
def test_a_record_under_another_id_or_seq_is_not_the_log_s(ckpt: Path, column: str) -> None:
    """The same bytes under another id or seq: the record says the same, the row does not."""
    make_checkpoint(ckpt)

    def edit(rows, block) -> None:
        if column == "id":
            rows.ids[3] = block.ids[3] = "01a234eb-0000-7000-8000-000000000000"
        else:
            rows.seqs[3] += 1

    _forge(ckpt, edit)
    check = check_snapshot(Ledger.open_readonly(ckpt))
    assert check.problem and "disagrees with the log" in check.problem, check


def test_an_older_format_snapshot_is_rebuilt(ckpt: Path, caplog: pytest.LogCaptureFixture) -> None:
    make_checkpoint(ckpt)
    (store_dir(ckpt) / SNAPSHOT_NAME).write_bytes(bytes.fromhex("28b52ffd") + b"format 4 bytes")
    with caplog.at_level(logging.WARNING, logger="projections"):
        loaded, _ = served(ckpt)
    assert not loaded and "unreadable" in caplog.text


def test_whatever_the_log_accepts_the_snapshot_saves(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 10.3: an integer beyond 2**64-1 broke every later save (msgpack); JSON holds it."""
    monkeypatch.setattr(projector_module, "SNAPSHOT_EVERY", 20)
    huge = {"big": 2**70, "negative": -(2**80), "float": 0.1 + 0.2, "nested": [[2**64]]}
    backend = MemoryBackend(ckpt)
    assert backend.add_memory("root", "huge numbers", huge, current_node="root")["ok"]
    for i in range(45):  # automatic saves every 20 events still work, and no add raises after writing
        assert backend.add_memory("root", f"later {i}", current_node="root")["ok"]
    assert backend.session.projector._unsaved < 20
    backend.close()
    reopened = MemoryBackend(ckpt)
    assert reopened.session.projector.loaded_from_snapshot
    assert reopened.get_node_memory("root")["entries"][0]["metadata"] == huge
    reopened.close()


def test_a_killed_save_leaves_its_temporary_file_only_until_the_next_save(ckpt: Path) -> None:
    """(Disk full during a save is tested on a real full filesystem in test_torture.)"""
    make_checkpoint(ckpt)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = store_dir(ckpt) / f"{SNAPSHOT_NAME}.{dead.stdout.strip()}.tmp"
    stale.write_bytes(b"left by a killed save")
    with Ledger.open(ckpt) as ledger:
        p = Projector(ledger, get_embedder())
        assert p.save() == store_dir(ckpt) / SNAPSHOT_NAME
        assert not stale.exists()
    with Ledger.open(ckpt, readonly=True) as ledger:
        p = Projector(ledger, get_embedder())
        assert p.loaded_from_snapshot and p.save() is None


def test_snapshot_preamble_keeps_its_fields(ckpt: Path) -> None:
    make_checkpoint(ckpt)
    preamble = open_snapshot(store_dir(ckpt) / SNAPSHOT_NAME).preamble
    assert isinstance(preamble, SnapshotPreamble) and preamble.format == SNAPSHOT_FORMAT == 7
    assert preamble.cursor == 19 and preamble.rebuilt is None


@pytest.mark.parametrize("section", ["vectors", "records", "sorted"])
def test_a_large_snapshot_is_checked_a_collection_at_a_time_as_it_is_read(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, section: str
) -> None:
    """A snapshot over CHECK_WHOLE_UP_TO is mapped, not read: a flipped byte is found when
    the rows holding it are first read (never before, for pages out of scope), and that read
    is answered from a rebuild."""
    from projections.engines import snapshot as snapshot_module
    from projections.engines import snapshot_check

    monkeypatch.setattr(snapshot_module, "CHECK_WHOLE_UP_TO", 0)
    monkeypatch.setattr(snapshot_check, "SAMPLE_ON_LOAD", 0)  # no random sample: only reads find it
    monkeypatch.setattr(snapshot_check, "TABLES_ON_LOAD", 0)
    backend = MemoryBackend(ckpt)
    for node, count in (("root", 10), ("node_A", 10), ("node_B", 2000)):  # node_B spans many 64 KiB chunks
        backend.start_node(
            node, None if node == "root" else "root", [] if node == "root" else ["root"], current_node=node
        )
        backend.bulk_import(
            [
                {"node_id": node, "text": f"{node} note {i}: tiling {i * 3} halo exchange " + "x" * 100}
                for i in range(count)
            ],
            "node_scope",
        )
    b_ids = [e["entry_id"] for e in backend.get_node_memory("node_B")["entries"]]
    truth = backend.search_memory("tiling halo", ["root", "node_B"], 5)["results"]
    b_entries = backend.get_node_memory("node_B")["entries"]
    backend.close()
    path = store_dir(ckpt) / SNAPSHOT_NAME
    view = open_snapshot(path, check=False)
    if section == "sorted":  # the sorted id of the entry looked up below
        lo = view._sections["sorted"][0] + 36 * [i.decode() for i in view._sorted].index(b_ids[7])
        hi = lo + 36
    else:
        lo, hi = view.span("node_B", section)
    del view
    rotten = bytearray(path.read_bytes())
    rotten[(lo + hi) // 2] ^= 0x04
    path.write_bytes(bytes(rotten))

    reader = MemoryBackend(ckpt)
    projector = reader.session.projector
    assert projector.loaded_from_snapshot
    assert [r["node_id"] for r in reader.search_memory("tiling halo", ["root", "node_A"], 5)["results"]]
    assert projector.rebuilt is None, "a page out of scope was read"
    with caplog.at_level(logging.WARNING, logger="projections"):
        if section == "vectors":
            assert reader.search_memory("tiling halo", ["root", "node_B"], 5)["results"] == truth
        elif section == "records":
            assert reader.get_node_memory("node_B")["entries"] == b_entries
        else:
            assert projector.catalog.get(b_ids[7]).entry_id == b_ids[7]
    assert projector.rebuilt.startswith("unreadable (checksum mismatch in bytes")
    assert "rebuilding from the log" in caplog.text and not projector.loaded_from_snapshot
    assert reader.get_node_memory("node_B")["entries"] == b_entries
    reader.close()  # the rebuilt state is saved, whole
    assert check_snapshot(Ledger.open_readonly(ckpt)).problem is None


def test_a_cached_backend_left_open_saves_its_snapshot_at_exit(ckpt: Path) -> None:
    """A process that ends with a cached backend still open (ARI's hooks never close theirs)
    saves its snapshot at exit, copying the rows of the snapshot it has mapped. The mapped file's
    descriptor stays open until then: closed first by the view's finalizer, the save read from
    a closed (or reused) descriptor and was lost with a warning."""
    make_checkpoint(ckpt)
    cursor = open_snapshot(store_dir(ckpt) / SNAPSHOT_NAME).preamble.cursor
    child = (
        "import sys\n"
        "from projections.api.backend import get_backend\n"
        "backend = get_backend(sys.argv[1])\n"
        "assert backend.search_memory('tile', ['root'], 3)['results']\n"  # reads the mapped rows
        "for i in range(3):\n"
        "    backend.add_memory('root', f'written at the end {i}', current_node='root')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", child, str(ckpt)], capture_output=True, text=True, env=subprocess_env(), timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert "could not save" not in run.stderr
    saved = open_snapshot(store_dir(ckpt) / SNAPSHOT_NAME, check=True)
    assert saved.preamble.cursor == cursor + 3
    loaded, texts = served(ckpt)
    assert loaded and texts["root"][-3:] == [f"written at the end {i}" for i in range(3)]


def test_a_scope_of_stored_collections_scores_each_row_as_its_collection_alone(ckpt: Path) -> None:
    """The stored rows of several collections are scored as one joined matrix (kept in the
    vector cache); each row's cosine is bit for bit the one its collection alone gives, the
    tombstoned rows of node_A included, and the second search reads the kept matrix."""
    from projections.models.semantic import dots

    make_checkpoint(ckpt)
    with Ledger.open(ckpt) as ledger:
        p = Projector(ledger, get_embedder())
        assert p.loaded_from_snapshot
        query = get_embedder().embed(["temporal blocking tile 40"])[0]
        for _ in range(2):
            scope = p.index.scope_rows(query, ["root", "node_A"])
            stored = [(name, rows) for name, rows, _ in scope.parts if not hasattr(rows, "codes")]
            assert [name for name, _ in stored] == ["root", "node_A"]
            for (name, rows, picked), cos in zip(scope.parts, scope.cos):
                alone = dots(rows.vectors, query)
                assert np.array_equal(cos, alone if picked is None else alone[picked]), name
