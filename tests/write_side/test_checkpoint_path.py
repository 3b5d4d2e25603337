"""One unmistakable checkpoint path (issue 26 items 2 and 4).

``CKPT/memory_ledger`` (the ledger's own folder) looked like a checkpoint of the old layout: a
writable open moved its log one level deeper, out of sight, and the next open of ``CKPT``
created an empty log that the rollback hint then offered to accept. Now every door refuses a
path that is not a checkpoint (``ledger.layout.check_checkpoint_dir``, run by every resolution
of the store directory) and names the checkpoint to pass; a dry run and a read-only open move
nothing; and a log that holds nothing while an anchor records events is called missing or
moved, with where it was expected, never offered for acceptance.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger import InvalidInput, Ledger, LedgerNotFound, layout
from ledger.errors import RollbackDetected
from ledger.layout import OLD_SNAPSHOT_NAME, SNAPSHOT_NAME, STORE_DIR, check_checkpoint_dir, store_dir
from ledger.log import LOG_NAME
from ledger.maintenance.bundle import export_bundle, import_bundle
from ledger.maintenance.redact import Selector, redact
from ledger.maintenance.repair import repair
from ledger.maintenance.rollback import accept_rollback
from projections.api import MemoryBackend, clear_backend_cache, get_backend
from projections.tools import checkpoint as state


def files_of(root: Path) -> dict[str, str]:
    """Every file and directory under ``root``: its path and, for a file, a digest of its bytes."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), root) + "/"] = "dir"
        for name in filenames:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return found


def checkpoint(path: Path, n: int = 3) -> Path:
    """A checkpoint written through ARI's calls: log, head, index, snapshot, access log."""
    backend = MemoryBackend(path)
    for i in range(n):
        backend.add_memory("root", f"RESULT SUMMARY run {i}", {"type": "result_summary"}, current_node="root")
    backend.close()
    return path


def old_layout(path: Path) -> Path:
    """A checkpoint as layout 1 left it: the log and the files named after it at its top."""
    checkpoint(path)
    (store_dir(path) / "memory_access.jsonl.head").unlink()
    for file in store_dir(path).iterdir():
        shutil.move(file, path / file.name.replace(SNAPSHOT_NAME, OLD_SNAPSHOT_NAME))
    store_dir(path).rmdir()
    return path


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    return checkpoint(tmp_path / "CKPT")


# -- the rule ------------------------------------------------------------------------------------------


def test_the_ledgers_own_folder_is_refused_naming_the_checkpoint(ckpt: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput) as info:
        check_checkpoint_dir("CKPT/memory_ledger")
    assert (
        str(info.value) == "checkpoint: CKPT/memory_ledger is the ledger's own folder inside checkpoint CKPT; pass CKPT"
    )
    with pytest.raises(InvalidInput, match=r"CKPT/memory_ledger is the ledger's own folder .*; pass CKPT$"):
        check_checkpoint_dir("CKPT/memory_ledger/")
    with pytest.raises(InvalidInput, match=rf"inside checkpoint {ckpt}; pass {ckpt}$"):
        check_checkpoint_dir(ckpt / STORE_DIR)


@pytest.mark.parametrize(
    "make, refused",
    [
        (
            lambda ckpt: ckpt / "experiments" / "run_1",
            r"lies inside checkpoint .*/CKPT .*; pass .*/CKPT, or a directory",
        ),
        (lambda ckpt: ckpt / STORE_DIR / "elsewhere", r"lies inside checkpoint .*/CKPT "),
        (lambda ckpt: ckpt.parent / "new" / STORE_DIR, r"is named memory_ledger, the name of the ledger's own folder"),
        (lambda ckpt: ckpt / STORE_DIR / LOG_NAME, r"is a file, not a checkpoint: a checkpoint is a directory"),
    ],
    ids=["a folder inside a checkpoint", "a folder inside its store", "a new folder named memory_ledger", "a file"],
)
def test_what_cannot_be_a_checkpoint_is_refused(ckpt: Path, make: Callable[[Path], Path], refused: str) -> None:
    with pytest.raises(InvalidInput, match=refused):
        check_checkpoint_dir(make(ckpt))


def test_a_folder_named_memory_ledger_holding_a_log_is_a_store_wherever_it_lies(ckpt: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copied" / STORE_DIR
    shutil.copytree(store_dir(ckpt), copy)
    with pytest.raises(InvalidInput, match=rf"is the ledger's own folder inside checkpoint {copy.parent}; pass"):
        check_checkpoint_dir(copy)


def test_a_link_to_the_ledgers_own_folder_is_refused(ckpt: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(store_dir(ckpt))
    with pytest.raises(InvalidInput, match=rf"{link} \(a link to {store_dir(ckpt)}\) is the ledger's own folder"):
        check_checkpoint_dir(link)


def test_checkpoints_are_accepted(ckpt: Path, tmp_path: Path) -> None:
    old = old_layout(tmp_path / "old")
    for path in (ckpt, old, tmp_path / "fresh", tmp_path / "a" / "b", str(ckpt) + "/"):
        check_checkpoint_dir(path)
    assert layout.log_path(old) == old / LOG_NAME


# -- every door refuses it, and moves nothing ---------------------------------------------------------------


def _doors(tmp_path: Path) -> dict[str, Callable[[Path], object]]:
    bundle = tmp_path / "bundle.tar"
    return {
        "Ledger.open": lambda p: Ledger.open(p),
        "Ledger.open create=False": lambda p: Ledger.open(p, create=False),
        "Ledger.open readonly": lambda p: Ledger.open(p, readonly=True),
        "Ledger.open_readonly": Ledger.open_readonly,
        "accept_rollback": accept_rollback,
        "accept_rollback (the CLI's)": state.accept_rollback,
        "repair": repair,
        "redact": lambda p: redact(p, Selector(text="run"), reason="leak", by="me"),
        "redact dry run": lambda p: redact(p, Selector(text="run"), reason="leak", by="me", dry_run=True),
        "export_bundle": lambda p: export_bundle(p, tmp_path / "out.tar"),
        "import_bundle": lambda p: import_bundle(bundle, p),
        "status": state.status,
        "verify": state.verify,
        "MemoryBackend": MemoryBackend,
        "MemoryBackend readonly": lambda p: MemoryBackend(p, readonly=True),
        "get_backend": get_backend,
    }


@pytest.mark.parametrize("door", list(_doors(Path("/"))))
def test_every_door_refuses_the_ledgers_own_folder_and_moves_nothing(ckpt: Path, tmp_path: Path, door: str) -> None:
    export_bundle(ckpt, tmp_path / "bundle.tar")
    before = files_of(tmp_path)
    try:
        with pytest.raises(
            InvalidInput, match=rf"memory_ledger is the ledger's own folder inside checkpoint {ckpt}; pass"
        ):
            _doors(tmp_path)[door](ckpt / STORE_DIR)
    finally:
        clear_backend_cache()
    assert files_of(tmp_path) == before
    assert Ledger.open_readonly(ckpt).verify().ok


def test_get_backend_names_the_checkpoint_from_ari_checkpoint_dir(ckpt: Path, monkeypatch) -> None:
    monkeypatch.setenv("ARI_CHECKPOINT_DIR", str(ckpt / STORE_DIR))
    before = files_of(ckpt)
    with pytest.raises(InvalidInput, match=rf"pass {ckpt}$"):
        get_backend()
    assert files_of(ckpt) == before


def test_a_file_is_refused_not_a_traceback_of_the_layout_move(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("not a checkpoint")
    for door in (Ledger.open, MemoryBackend):
        with pytest.raises(InvalidInput, match=r"notes.txt is a file, not a checkpoint"):
            door(file)
    assert file.read_text() == "not a checkpoint" and [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


# -- an old layout: moved by a writable open only, never by a dry run or a read-only one ------------------------


def test_a_dry_run_and_read_only_opens_move_nothing_the_next_writer_moves_it(tmp_path: Path) -> None:
    old = old_layout(tmp_path / "old")
    before = files_of(old)
    with layout.moves_suspended():  # what `ari-ledger redact --dry-run` runs under
        report = redact(old, Selector(text="run 1"), reason="leak", by="me", dry_run=True)
        with Ledger.open(old) as ledger:
            assert ledger.path == old / LOG_NAME and ledger.last_seq == 3
    assert [e.seq for e in report.chosen] == [2]
    with Ledger.open(old, readonly=True) as ledger, Ledger.open_readonly(old):
        assert ledger.last_seq == 3
    backend = MemoryBackend(old, readonly=True)
    assert backend.search_memory("run 2", ["root"], 1)["results"][0]["text"] == "RESULT SUMMARY run 2"
    backend.close()
    assert files_of(old) == before
    with Ledger.open(old) as ledger:  # a writer moves it, as before
        assert ledger.path == store_dir(old) / LOG_NAME and ledger.last_seq == 3
    assert not (old / LOG_NAME).exists()


def test_the_librarys_dry_run_redaction_moves_nothing(tmp_path: Path) -> None:
    old = old_layout(tmp_path / "old")
    before = files_of(old)
    redact(old, Selector(text="run 1"), reason="leak", by="me", dry_run=True)
    assert files_of(old) == before


# -- a log that holds nothing while an anchor records events: missing or moved, not accepted --------------------


def _no_accept(message: str, expected: Path) -> None:
    assert "the log looks missing or moved" in message and f"expected at {expected}" in message, message
    assert "accept-rollback" not in message and "accept the log" not in message, message


def test_a_log_deleted_with_its_head_is_called_missing_and_none_is_created(ckpt: Path) -> None:
    log = store_dir(ckpt) / LOG_NAME
    log.unlink()
    (store_dir(ckpt) / (LOG_NAME + ".head")).unlink()
    before = files_of(ckpt)
    for readonly in (False, True):
        with pytest.raises(
            RollbackDetected, match=r"the log ends at seq 0, but memory_projection.snapshot records seq 3"
        ) as info:
            MemoryBackend(ckpt, readonly=readonly)
        _no_accept(str(info.value), log)
    assert files_of(ckpt) == before and not log.exists()  # no empty log in its place


def test_a_log_removed_under_its_head_file_names_where_it_was_expected(ckpt: Path) -> None:
    log = store_dir(ckpt) / LOG_NAME
    log.unlink()
    with pytest.raises(
        RollbackDetected, match=r"memory_ledger.jsonl.gz is missing, but memory_ledger.jsonl.gz.head records seq 3"
    ) as info:
        Ledger.open(ckpt)
    _no_accept(str(info.value), log)
    assert not log.exists()


def test_an_empty_log_under_a_head_that_records_events_is_not_offered_for_acceptance(ckpt: Path) -> None:
    log = store_dir(ckpt) / LOG_NAME
    log.write_bytes(b"")  # what an earlier version's open created in place of a moved log
    (store_dir(ckpt) / (LOG_NAME + ".idx")).unlink()
    for door in (Ledger.open, MemoryBackend, lambda p: MemoryBackend(p, readonly=True)):
        with pytest.raises(
            RollbackDetected, match=r"the log ends at seq 0, but memory_ledger.jsonl.gz.head records seq 3"
        ) as info:
            door(ckpt)
        _no_accept(str(info.value), log)
    (store_dir(ckpt) / (LOG_NAME + ".head")).unlink()
    with pytest.raises(
        RollbackDetected, match=r"the log ends at seq 0, but memory_projection.snapshot records seq 3"
    ) as info:
        MemoryBackend(ckpt)
    _no_accept(str(info.value), log)


def test_a_verified_context_anchor_over_a_missing_log_is_missing_or_moved(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "verified_context.json").write_text(json.dumps({"anchor": {"seq": 7, "hash": "ab" * 32}}))
    with pytest.raises(
        RollbackDetected, match=r"the log ends at seq 0, but verified_context.json records seq 7"
    ) as info:
        MemoryBackend(ckpt)
    _no_accept(str(info.value), store_dir(ckpt) / LOG_NAME)
    assert not store_dir(ckpt).exists()


def test_a_log_an_earlier_version_moved_one_level_too_deep_is_found_and_named(ckpt: Path) -> None:
    """The damage the issue describes: the log, head and index in ``memory_ledger/memory_ledger/``."""
    store = store_dir(ckpt)
    deeper = store / STORE_DIR
    deeper.mkdir()
    for name in (LOG_NAME, LOG_NAME + ".head", LOG_NAME + ".idx"):
        (store / name).rename(deeper / name)
    before = files_of(ckpt)
    hint = f"a log lies at {deeper / LOG_NAME} (moved one level too deep"
    for door, error in (
        (Ledger.open, LedgerNotFound),
        (Ledger.open_readonly, LedgerNotFound),
        (accept_rollback, LedgerNotFound),
        (state.accept_rollback, LedgerNotFound),
        (MemoryBackend, RollbackDetected),
    ):
        with pytest.raises(error) as info:
            door(ckpt)
        assert hint in str(info.value) and f"move the files of {deeper} back into {store}" in str(info.value)
        _no_accept(str(info.value), store / LOG_NAME)
    assert files_of(ckpt) == before  # nothing created, accepted or moved
    for name in (LOG_NAME, LOG_NAME + ".head", LOG_NAME + ".idx"):  # the move the message asks for
        (deeper / name).rename(store / name)
    deeper.rmdir()
    with Ledger.open(ckpt) as ledger:
        assert ledger.last_seq == 3 and ledger.verify().ok
