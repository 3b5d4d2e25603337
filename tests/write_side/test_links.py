"""No write through a link (issue 27, item 2): a link or a file planted in a checkpoint is never
written through, a file that is not a log is never "recovered" by cutting it, a replaced file
keeps its mode, files set aside are private, temporary files are never prepared by others.

Each test writes down what must hold first (the victim's bytes and mode), then does what a
person or ARI does, then checks the victim."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import InvalidInput, Ledger, LogCorrupted
from ledger.anchor import Anchor, HeadFile
from ledger.layout import SNAPSHOT_NAME, STORE_DIR, store_dir
from ledger.log import LOG_NAME, compress_member
from ledger.maintenance.repair import repair
from ledger.maintenance.rollback import accept_rollback
from ledger.output import replace_file, write_output
from ledger.safe_io import UnsafeFile
from support.env import FIXTURES, subprocess_env

SECRET = b"the victim's own bytes: a paper draft, a key, anything the user can write\n"


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "projections", *map(str, args)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,  # a regression hangs no CI
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the checkpoint that someone points a link at: 0640, bytes of its own."""
    path = tmp_path / "victim.txt"
    path.write_bytes(SECRET)
    path.chmod(0o640)
    return path


def untouched(victim: Path) -> bool:
    return victim.read_bytes() == SECRET and mode(victim) == 0o640


def with_events(ckpt: Path, n: int = 3) -> None:
    with Ledger.open(ckpt) as ledger:
        for i in range(n):
            ledger.append("root", "memory_added", {"text": f"event {i}"}, current_node="root")


def one_error_line(run: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert run.stderr.startswith("error: ") and len(run.stderr.splitlines()) == 1, run.stderr
    for needle in needles:
        assert needle in run.stderr, run.stderr


# the log and its folder ------------------------------------------------------------------


def test_a_log_that_is_a_link_is_refused_and_its_target_is_left_as_it_was(ckpt: Path, victim: Path) -> None:
    store_dir(ckpt).mkdir()
    (store_dir(ckpt) / LOG_NAME).symlink_to(victim)
    with pytest.raises(UnsafeFile, match=r"memory_ledger\.jsonl\.gz is a symbolic link"):
        Ledger.open(ckpt)  # before issue 27: the target taken for a torn tail and cut to 0 bytes
    with pytest.raises(UnsafeFile, match="is a symbolic link"):
        Ledger.open_readonly(ckpt)
    for command in (("status", ckpt), ("verify", ckpt), ("repair", ckpt), ("verify", "--accept-rollback", ckpt)):
        one_error_line(cli(*command), "is a symbolic link", str(store_dir(ckpt) / LOG_NAME))
    assert untouched(victim)
    assert sorted(p.name for p in store_dir(ckpt).iterdir()) == [LOG_NAME]  # no .torn-*, no .idx


def test_a_memory_ledger_folder_that_is_a_link_is_refused(ckpt: Path, tmp_path: Path, victim: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ckpt / STORE_DIR).symlink_to(elsewhere)
    with pytest.raises(InvalidInput, match=r"memory_ledger is a symbolic link"):
        Ledger.open(ckpt)
    one_error_line(cli("status", ckpt), "memory_ledger is a symbolic link")
    one_error_line(
        cli("import-ari", ckpt, "--source", FIXTURES / "ari_files" / "memory_store.jsonl"), "is a symbolic link"
    )
    assert list(elsewhere.iterdir()) == []  # nothing written into the link's target


def test_a_file_that_is_not_a_log_is_refused_never_cut(ckpt: Path, victim: Path) -> None:
    log = store_dir(ckpt) / LOG_NAME
    store_dir(ckpt).mkdir()
    log.write_bytes(SECRET)
    with pytest.raises(LogCorrupted, match=r"has no valid gzip member at its start, so it is not a log"):
        Ledger.open(ckpt)  # before issue 27: "recovered", the whole file moved to .torn-* and cut to 0
    with pytest.raises(LogCorrupted, match="not a log"):
        accept_rollback(ckpt)  # not even when a person accepts a rollback
    one_error_line(cli("status", ckpt), "has no valid gzip member at its start")
    assert log.read_bytes() == SECRET and sorted(p.name for p in store_dir(ckpt).iterdir()) == [LOG_NAME]
    report = repair(ckpt)  # a person may still set the bytes aside, explicitly
    aside = report.set_aside
    assert aside is not None and aside.read_bytes() == SECRET and mode(aside) == 0o600
    assert log.read_bytes() == b""


def test_a_torn_first_append_is_still_recovered(ckpt: Path) -> None:
    """What a crash in the very first append leaves (a prefix of a member) is a torn tail, as before."""
    store_dir(ckpt).mkdir()
    member = compress_member(b'{"the first event": "being written"}\n')
    (store_dir(ckpt) / LOG_NAME).write_bytes(member[:20])
    with Ledger.open(ckpt) as ledger:
        assert ledger.last_seq == 0 and len(ledger.recovered) == 1
    (torn,) = store_dir(ckpt).glob(LOG_NAME + ".torn-*")
    assert torn.read_bytes() == member[:20] and mode(torn) == 0o600


# the files beside the log -------------------------------------------------------------------


def test_a_head_file_that_is_a_link_is_refused_and_never_written_through(ckpt: Path, victim: Path) -> None:
    with_events(ckpt)
    head = store_dir(ckpt) / (LOG_NAME + ".head")
    head.unlink()
    head.symlink_to(victim)
    with pytest.raises(UnsafeFile, match=r"\.head is a symbolic link"):
        Ledger.open(ckpt)  # before issue 27: "re-anchoring", written through the link
    with pytest.raises(UnsafeFile):
        HeadFile(store_dir(ckpt) / LOG_NAME).write("c", 1, "h", both=True)
    one_error_line(cli("verify", ckpt), ".head is a symbolic link")
    assert untouched(victim)


def test_a_dangling_link_as_the_head_file_is_not_created_through(ckpt: Path, tmp_path: Path) -> None:
    with_events(ckpt)
    head = store_dir(ckpt) / (LOG_NAME + ".head")
    head.unlink()
    head.symlink_to(tmp_path / "created-through-the-link")
    with pytest.raises(UnsafeFile):
        HeadFile(store_dir(ckpt) / LOG_NAME).write("c", 1, "h", both=True)
    assert not (tmp_path / "created-through-the-link").exists()


def test_a_side_index_that_is_a_link_is_replaced_not_written_through(ckpt: Path, tmp_path: Path) -> None:
    with_events(ckpt)
    idx = store_dir(ckpt) / (LOG_NAME + ".idx")
    victim = tmp_path / "looks-like-an-index"
    victim.write_bytes(idx.read_bytes())  # a valid index: before issue 27, records were appended to it
    victim.chmod(0o640)
    before = victim.read_bytes()
    idx.unlink()
    idx.symlink_to(victim)
    with Ledger.open(ckpt) as ledger:
        for i in range(4):  # past the index stride (256 KiB): a record is added
            ledger.append("root", "memory_added", {"text": f"{i}" * 100_000}, current_node="root")
        assert ledger.verify().ok
    assert victim.read_bytes() == before and mode(victim) == 0o640
    assert not idx.is_symlink() and len(idx.read_bytes()) > len(before)  # the index rebuilt in its place


def test_the_access_log_and_its_head_are_not_written_through_links(ckpt: Path, victim: Path, tmp_path: Path) -> None:
    from projections.access.log import ACCESS_LOG_NAME, AccessLog

    store_dir(ckpt).mkdir()
    (ckpt / ACCESS_LOG_NAME).symlink_to(victim)
    log = AccessLog(ckpt)
    log.write("node_scope", "e1", "text", {}, tool="add_memory")
    assert log.flush()
    assert untouched(victim) and any("is a symbolic link" in p for p in log.problems)

    other = tmp_path / "other"
    store_dir(other).mkdir(parents=True)
    second = tmp_path / "second-victim.txt"
    second.write_bytes(SECRET)
    second.chmod(0o640)
    (store_dir(other) / (ACCESS_LOG_NAME + ".head")).symlink_to(second)
    log = AccessLog(other)
    log.write("node_scope", "e1", "text", {}, tool="add_memory")
    assert log.flush()
    assert untouched(second) and any("is a symbolic link" in p for p in log.problems)


# replacing files ---------------------------------------------------------------------------


def test_a_replaced_file_keeps_its_mode(ckpt: Path, tmp_path: Path) -> None:
    from projections.api import MemoryBackend

    with_events(ckpt)
    context = ckpt / "verified_context.json"
    context.write_text("{}")
    context.chmod(0o640)
    backend = MemoryBackend(ckpt)
    try:
        backend.export_verified_context(["root"], context)  # replace_file, as the writer uses it
        backend.session.projector.save()
    finally:
        backend.close()
    assert mode(context) == 0o640  # before issue 27: back as 0644
    assert b'"anchor"' in context.read_bytes()

    snapshot = store_dir(ckpt) / SNAPSHOT_NAME
    snapshot.chmod(0o600)
    backend = MemoryBackend(ckpt)
    try:
        backend.add_memory("root", "one more", {}, current_node="root")
        backend.session.projector.save()
    finally:
        backend.close()
    assert mode(snapshot) == 0o600

    out = tmp_path / "export.tar"
    out.write_bytes(b"old")
    out.chmod(0o600)
    write_output(out, lambda raw: raw.write(b"new"))
    assert out.read_bytes() == b"new" and mode(out) == 0o600


def test_temporary_files_are_never_prepared_by_someone_else(ckpt: Path, victim: Path) -> None:
    """Links at every name a writer used to use for its temporary file: none is followed."""
    with_events(ckpt)
    store = store_dir(ckpt)
    context = ckpt / "verified_context.json"
    planted = [
        context.with_name(context.name + ".tmp"),  # replace_file's old name
        store / (LOG_NAME + ".idx.tmp"),  # the index's
        store / f"{SNAPSHOT_NAME}.{os.getpid()}.tmp",  # the snapshot's
        ckpt / f".verified_context.json.tmp-{os.getpid()}",  # write_output's
    ]
    for link in planted:
        link.symlink_to(victim)
    replace_file(context, b"{}\n")
    write_output(context, lambda raw: raw.write(b"{}\n"))
    with Ledger.open(ckpt) as ledger:
        ledger.file.write_index([(0, 1)])
    from projections.api import MemoryBackend

    backend = MemoryBackend(ckpt)
    try:
        backend.add_memory("root", "saved", {}, current_node="root")
        backend.session.projector.save()
    finally:
        backend.close()
    assert untouched(victim)
    assert all(link.is_symlink() for link in planted if link.name != f"{SNAPSHOT_NAME}.{os.getpid()}.tmp")


# set aside: readable by the owner only --------------------------------------------------------


def test_files_set_aside_are_private(ckpt: Path) -> None:
    with_events(ckpt)
    log = store_dir(ckpt) / LOG_NAME
    log.chmod(0o644)
    with open(log, "ab") as f:  # a crash mid-append
        f.write(compress_member(b'{"torn": "line"}\n')[:15])
    with Ledger.open(ckpt):
        pass
    (torn,) = store_dir(ckpt).glob(LOG_NAME + ".torn-*")
    assert mode(torn) == 0o600

    context = ckpt / "verified_context.json"
    context.write_text('{"anchor": {"seq": 99, "hash": "f00"}}')
    context.chmod(0o644)
    accepted = accept_rollback(ckpt, [(context, Anchor(context.name, "f00", 99))])
    assert accepted
    (rolled,) = ckpt.glob("verified_context.json.rolled-back-*")
    assert mode(rolled) == 0o600

    raw = bytearray(log.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # damage inside the log
    log.write_bytes(bytes(raw))
    report = repair(ckpt)
    assert report.set_aside is not None and mode(report.set_aside) == 0o600


def test_a_full_disk_is_still_a_problem_of_the_access_log_not_an_exception(tmp_path: Path) -> None:
    """What ``tests/access/test_access_log.py::test_a_full_disk_is_a_problem_not_an_exception`` shows
    through a link to ``/dev/full`` (a link the access log now refuses), on a file system that
    is really full."""
    from projections.access.log import KEEP_PROBLEMS, AccessLog

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "fs"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        ckpt = where / "ckpt"
        ckpt.mkdir()
        filler = os.open(where / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(filler, bytes(4096)):
                pass
        except OSError:  # full
            pass
        finally:
            os.close(filler)
        log = AccessLog(ckpt)
        for i in range(KEEP_PROBLEMS + 5):
            log.write("node_scope", f"e{i}", "t", {}, tool="add_memory")
            log.flush()
        assert len(log.problems) == KEEP_PROBLEMS
        assert all("No space left on device" in p for p in log.problems), log.problems
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
