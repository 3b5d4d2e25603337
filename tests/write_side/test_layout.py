"""The memory's files live in ``{checkpoint}/memory_ledger/``, out of ARI's node work dirs (R37).

ARI's loop copies every top-level file of the checkpoint that ``PathManager.META_FILES`` does
not name into each node's work dir; it never copies a subdirectory. Checkpoints of the old
layout (the same files at the top level) are read where they are and moved by the first
writable open: atomically per file, under a lock, finishing whatever a crash interrupted.
"""

from __future__ import annotations

import multiprocessing
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.layout import (
    OLD_SNAPSHOT_NAME,
    SNAPSHOT_NAME,
    STORE_DIR,
    is_memory_file,
    log_path,
    move_legacy_files,
    store_dir,
)
from ledger.log import LOG_NAME
from projections.api import MemoryBackend
from support.env import FIXTURES, subprocess_env

# What ARI itself names at the checkpoint's top level (its META_FILES, and files it writes itself)
ARI_NAMES = {"memory_access.jsonl", "verified_context.json", "memory_backup.jsonl.gz"}
RUN = FIXTURES / "ari_run" / "experiments" / "run_20261128_stencil"


def top_level_files(ckpt: Path) -> set[str]:
    return {p.name for p in ckpt.iterdir() if p.is_file()}


def write_some(ckpt: Path, n: int = 6) -> list[str]:
    with Ledger.open(ckpt) as ledger:
        for i in range(n):
            ledger.append("root", "memory_added", {"text": f"entry {i}"}, current_node="root")
        return [e.hash for e in ledger.events()]


def old_layout(tmp_path: Path, name: str = "old") -> tuple[Path, list[str], list[str]]:
    """A checkpoint as earlier versions left it: the log, head, index and snapshot at the top."""
    ckpt = tmp_path / name
    backend = MemoryBackend(ckpt)
    for i in range(5):
        backend.add_memory("root", f"RESULT SUMMARY run {i}", {"type": "result_summary"}, current_node="root")
    backend.close()
    (store_dir(ckpt) / "memory_access.jsonl.head").unlink()  # the access log's head came later, in memory_ledger/
    moved = sorted(p.name.replace(SNAPSHOT_NAME, OLD_SNAPSHOT_NAME) for p in store_dir(ckpt).iterdir())
    for file in moved:  # layout 1 named the snapshot .zst
        shutil.move(store_dir(ckpt) / file.replace(OLD_SNAPSHOT_NAME, SNAPSHOT_NAME), ckpt / file)
    store_dir(ckpt).rmdir()
    with Ledger.open_readonly(ckpt) as ledger:
        return ckpt, moved, [e.hash for e in ledger.events()]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "projections", *args], capture_output=True, text=True, env=subprocess_env(), timeout=300
    )


def test_a_checkpoint_written_through_aris_calls_has_no_memory_file_at_its_top_level(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints" / "run_20261128_stencil"
    backend = MemoryBackend(ckpt)
    backend.add_memory(
        "root", "RESULT SUMMARY metrics=[GFlops_per_s=2.41]", {"type": "result_summary"}, current_node="root"
    )
    backend.consolidate_node_memory("root", RUN / "root" / "node_report.json", RUN / "root", current_node="root")
    backend.react_add("ran make", {"node_id": "root"})
    backend.search_memory("stencil", ["root"], 3)
    backend.close()  # saves the snapshot
    assert top_level_files(ckpt) <= ARI_NAMES
    assert {p.name for p in ckpt.iterdir() if p.is_dir()} == {STORE_DIR}
    assert {"memory_ledger.jsonl.gz", "memory_ledger.jsonl.gz.head", SNAPSHOT_NAME} <= {
        p.name for p in store_dir(ckpt).iterdir()
    }
    copy = tmp_path / "copy"
    shutil.copytree(ckpt, copy)  # cp -r carries the subdirectory
    assert cli("verify", str(copy)).returncode == 0


def test_reading_commands_read_an_old_layout_where_it_is(tmp_path: Path) -> None:
    ckpt, moved, _hashes = old_layout(tmp_path)
    before = {name: (ckpt / name).read_bytes() for name in moved}
    for args in (["verify", str(ckpt)], ["status", str(ckpt)], ["log", str(ckpt)], ["tree", str(ckpt)]):
        assert cli(*args).returncode == 0, args
    assert not store_dir(ckpt).exists() and {n: (ckpt / n).read_bytes() for n in moved} == before
    assert log_path(ckpt) == ckpt / LOG_NAME


def test_the_first_writable_open_moves_an_old_layout_and_keeps_every_event(tmp_path: Path) -> None:
    ckpt, moved, hashes = old_layout(tmp_path)
    backend = MemoryBackend(ckpt)
    assert top_level_files(ckpt) <= ARI_NAMES
    assert {p.name for p in store_dir(ckpt).iterdir()} >= {n.replace(OLD_SNAPSHOT_NAME, SNAPSHOT_NAME) for n in moved}
    assert OLD_SNAPSHOT_NAME in moved and backend.session.projector.loaded_from_snapshot  # kept, not rebuilt
    assert [e["text"] for e in backend.get_node_memory("root")["entries"]][-1] == "RESULT SUMMARY run 4"
    backend.add_memory("root", "after the move", {}, current_node="root")
    backend.close()
    with Ledger.open_readonly(ckpt) as ledger:
        assert ledger.verify().ok and [e.hash for e in ledger.events()][: len(hashes)] == hashes
    assert cli("verify", str(ckpt)).returncode == 0


@pytest.mark.parametrize("done", range(5))
def test_a_move_interrupted_after_any_file_leaves_a_checkpoint_that_opens(tmp_path: Path, done: int) -> None:
    """The move renames the log first, then the rest; a crash after any of them leaves each file
    in one of the two places: reads find it, and the next writable open finishes the move."""
    ckpt, moved, hashes = old_layout(tmp_path)
    order = sorted(moved, key=lambda n: (n != LOG_NAME, n))
    assert len(order) >= 4
    store_dir(ckpt).mkdir()
    for name in order[:done]:
        (ckpt / name).rename(store_dir(ckpt) / name.replace(OLD_SNAPSHOT_NAME, SNAPSHOT_NAME))
    verify = cli("verify", str(ckpt))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    with Ledger.open(ckpt) as ledger:
        assert [e.hash for e in ledger.events()] == hashes
        ledger.append("root", "memory_added", {"text": "more"}, current_node="root")
    assert top_level_files(ckpt) <= ARI_NAMES
    assert cli("verify", str(ckpt)).returncode == 0


def test_a_name_taken_in_the_store_is_kept_beside_it_never_written_over(tmp_path: Path) -> None:
    ckpt, _moved, _ = old_layout(tmp_path)
    store_dir(ckpt).mkdir()
    stray = store_dir(ckpt) / SNAPSHOT_NAME
    stray.write_bytes(b"another snapshot")
    lines = move_legacy_files(ckpt)
    assert stray.read_bytes() == b"another snapshot"
    assert any("memory_projection.snapshot.zst.pre-move-" in line for line in lines)
    assert move_legacy_files(ckpt) == []


def _open_and_append(ckpt: str, who: int) -> int:
    with Ledger.open(ckpt) as ledger:
        for i in range(20):
            ledger.append("root", "memory_added", {"text": f"writer {who} entry {i}"}, current_node="root")
        return ledger.last_seq


def test_processes_opening_an_old_layout_at_once_move_it_once_and_lose_nothing(tmp_path: Path) -> None:
    ckpt, _moved, hashes = old_layout(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.starmap(_open_and_append, [(str(ckpt), w) for w in range(4)])
    assert top_level_files(ckpt) <= ARI_NAMES
    assert not [p for p in store_dir(ckpt).iterdir() if ".pre-move-" in p.name]
    verify = cli("verify", str(ckpt))
    assert verify.returncode == 0, verify.stdout
    with Ledger.open_readonly(ckpt) as ledger:
        events = list(ledger.events())
    assert [e.hash for e in events[: len(hashes)]] == hashes
    texts = [e.body["text"] for e in events[len(hashes) :]]
    assert sorted(texts) == sorted(f"writer {w} entry {i}" for w in range(4) for i in range(20))


@pytest.mark.parametrize(
    "path, memory",
    [
        ("memory_ledger.jsonl.gz", True),
        ("memory_ledger.jsonl.gz.head", True),
        ("memory_projection.snapshot", True),
        ("memory_projection.snapshot.zst", True),
        ("memory_backup.jsonl.gz", True),
        ("memory_access.jsonl", True),
        ("memory_access.1764400000.jsonl", True),
        ("verified_context.json", True),
        ("memory_store.jsonl.migrated-1764400000", True),
        ("memory_ledger/anything.bin", True),
        ("src/stencil.c", False),
        ("results/memory_usage.csv", False),
        ("memory.c", False),
    ],
)
def test_memory_files_are_told_by_name(path: str, memory: bool) -> None:
    assert is_memory_file(path) is memory
