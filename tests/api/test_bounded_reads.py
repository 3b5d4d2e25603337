"""Bounded reads (issue 27, item 3): a gzip bomb is one error line, never a MemoryError; a FIFO
or a device where a side file should be never blocks a command; every side file is read the one
way ``ledger.safe_io.read_file`` reads it.

The bombs are small (10 MB of zeros, 10 KB compressed) with the limits lowered through their
environment variables; every command runs under a timeout, so a regression fails instead of
hanging CI."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zlib
from pathlib import Path

import pytest

from ledger import InvalidInput, Ledger, LogCorrupted
from ledger.ari.importer import BACKUP_NAME, read_ari_file
from ledger.layout import store_dir
from ledger.log import LOG_NAME, compress_member
from ledger.safe_io import MEMBER_ENV, UnsafeFile, inflate, read_file
from support.env import ari_ledger, subprocess_env

ZEROS = 10 * 1024 * 1024  # what the bombs inflate to
LOW = "1"  # MiB: the limits the tests lower the defaults to


def cli(*args: object, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "projections", *map(str, args)],
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=60,  # a FIFO that blocks fails the test, it does not hang CI
    )


def one_error_line(run: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert run.stderr.startswith("error: ") and len(run.stderr.splitlines()) == 1, run.stderr
    assert "Traceback" not in run.stderr and "MemoryError" not in run.stderr
    for needle in needles:
        assert needle in run.stderr, run.stderr


def bomb() -> bytes:
    """One gzip member of 10 MB of zeros (about 10 KB)."""
    return gzip.compress(bytes(ZEROS), 9, mtime=0)  # the same bytes at every call: gzip writes the time


def tar_of(files: dict[str, bytes], mode: str = "w") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def bundle_of(log: bytes) -> dict[str, bytes]:
    manifest = {
        "format": "ari-memory-ledger-bundle/1",
        "ckpt": None,
        "events": 0,
        "last_hash": "",
        "log_sha256": hashlib.sha256(log).hexdigest(),
    }
    return {LOG_NAME: log, "manifest.json": json.dumps(manifest).encode()}


def mkfifo(path: Path) -> Path:
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


# gzip bombs ---------------------------------------------------------------------------------


def test_a_gzip_bomb_as_aris_backup_is_one_error_line(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / BACKUP_NAME).write_bytes(bomb())
    run = cli("import-ari", ckpt, ARI_LEDGER_MAX_INFLATE_MB=LOW)  # before issue 27: a MemoryError (3 GB)
    one_error_line(run, f"error: {BACKUP_NAME}: inflates to more than 1048576 bytes", "ARI_LEDGER_MAX_INFLATE_MB")
    assert sorted(p.name for p in ckpt.iterdir()) == [BACKUP_NAME]  # nothing written


def test_a_bundle_whose_log_is_a_gzip_bomb_is_one_error_line(tmp_path: Path) -> None:
    bundle = tmp_path / "bomb.tar"
    bundle.write_bytes(tar_of(bundle_of(bomb())))
    run = cli("import", bundle, tmp_path / "ckpt", ARI_LEDGER_MAX_MEMBER_MB=LOW)
    one_error_line(run, "error: bundle:", "inflates to more than 1048576 bytes", MEMBER_ENV)
    assert not (store_dir(tmp_path / "ckpt") / LOG_NAME).exists()


def test_a_compressed_bundle_that_is_a_bomb_is_one_error_line(tmp_path: Path) -> None:
    bundle = tmp_path / "bomb.tar.gz"
    bundle.write_bytes(tar_of({**bundle_of(b""), "padding": bytes(ZEROS)}, "w:gz"))
    run = cli("import", bundle, tmp_path / "ckpt", ARI_LEDGER_MAX_INFLATE_MB=LOW)
    one_error_line(run, "error: bundle:", "inflates to more than 1048576 bytes", "ARI_LEDGER_MAX_INFLATE_MB")
    assert not (store_dir(tmp_path / "ckpt") / LOG_NAME).exists()


def test_a_gzip_member_beyond_the_limit_in_a_log_is_damage_never_read_whole(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": "before"}, current_node="root")
    log = store_dir(ckpt) / LOG_NAME
    good = log.read_bytes()
    with open(log, "ab") as f:
        f.write(bomb())
    monkeypatch.setenv(MEMBER_ENV, LOW)
    with pytest.raises(LogCorrupted, match=r"inflates to more than 1048576 bytes") as exc:
        Ledger.open(ckpt)
    assert exc.value.offset == len(good)
    report = Ledger.open_readonly(ckpt).verify()
    assert not report.ok and "inflates to more than" in (report.reason or "")
    assert log.read_bytes() == good + bomb() and list(store_dir(ckpt).glob("*.torn-*")) == []  # never cut


def test_a_torn_tail_before_a_bomb_inflates_nothing_beyond_the_limit(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telling a torn tail from damage looks for a complete member after it: that look is bounded too."""
    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": "before"}, current_node="root")
    log = store_dir(ckpt) / LOG_NAME
    good = log.read_bytes()
    with open(log, "ab") as f:
        f.write(b"\x1f\x8b\x08 garbage" + bomb())
    monkeypatch.setenv(MEMBER_ENV, LOW)
    with pytest.raises(LogCorrupted, match="a complete member follows it"):
        Ledger.open(ckpt)
    assert log.read_bytes().startswith(good)


def test_the_writer_never_writes_a_member_its_readers_refuse(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMBER_ENV, LOW)
    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": "small"}, current_node="root")
        before = ledger.path.read_bytes()
        refused = pytest.raises(InvalidInput, match=r"a member holds at most 1048576 bytes .* smaller batches")
        with refused, ledger.batch() as batch:
            for i in range(8):
                batch.append("root", "memory_added", {"text": f"{i}" * 200_000}, current_node="root")
        assert ledger.path.read_bytes() == before and ledger.last_seq == 1
        ledger.append("root", "memory_added", {"text": "after"}, current_node="root")
        assert ledger.verify().ok
    with pytest.raises(InvalidInput):
        compress_member(bytes(2 << 20))


def test_inflate_holds_no_more_than_its_limit() -> None:
    data = gzip.compress(b"x" * 1000) + b"\x00\x00" + gzip.compress(b"y" * 1000)
    assert inflate(data, 2000) == b"x" * 1000 + b"y" * 1000  # members and padding, as gzip.decompress
    with pytest.raises(ValueError, match="inflates to more than 1999 bytes"):
        inflate(data, 1999)
    with pytest.raises(EOFError):
        inflate(data[:-3], 10_000)
    with pytest.raises(zlib.error):
        inflate(b"\x1f\x8bnot gzip", 10_000)


# FIFOs and devices where a side file should be ----------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "run"
    run = ari_ledger("demo", out)
    assert run.returncode == 0, run.stderr
    return out


@pytest.fixture
def run_copy(demo: Path, tmp_path: Path) -> Path:
    shutil.copytree(demo, tmp_path / "run", symlinks=True)
    return tmp_path / "run"


def test_a_fifo_as_verified_context_blocks_no_command(run_copy: Path) -> None:
    ckpt = run_copy / "checkpoint"
    mkfifo(ckpt / "verified_context.json")
    problem = "verified_context.json is a FIFO, not a regular file"
    started = time.monotonic()
    status = cli("status", ckpt)  # before issue 27: each of these hung forever
    assert status.returncode == 0 and status.stdout.count(problem) == 1, status.stdout + status.stderr
    verify = cli("verify", ckpt)
    assert verify.returncode == 1 and verify.stdout.count(problem) == 1, verify.stdout + verify.stderr
    one_error_line(cli("prove", ckpt), "error: --context:", problem)
    one_error_line(cli("prove", ckpt, "--context", ckpt / "verified_context.json"), problem)
    assert time.monotonic() - started < 55


def test_a_fifo_as_a_node_report_blocks_no_audit(run_copy: Path) -> None:
    ckpt = run_copy / "checkpoint"
    (work,) = run_copy.glob("experiments/*/node_A2")
    mkfifo(work / "node_report.json")
    audit = cli("audit", ckpt, "--json")  # before issue 27: hung forever (and the MCP server's thread)
    assert audit.returncode in (0, 1), audit.stderr
    unreadable = [v for v in json.loads(audit.stdout)["values"] if v["node_id"] == "node_A2"]
    assert unreadable and all(
        v["verdict"] == "unchecked" and "no readable node_report.json" in v["why"] for v in unreadable
    )


def test_a_fifo_as_an_ari_file_or_a_bundle_is_one_error_line(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    fifo = mkfifo(ckpt / BACKUP_NAME)
    one_error_line(cli("import-ari", ckpt, "--source", fifo), f"error: {BACKUP_NAME}: cannot read", "is a FIFO")
    one_error_line(cli("import", mkfifo(tmp_path / "bundle.tar"), tmp_path / "other"), "error: bundle:", "is a FIFO")


def test_every_side_file_is_read_the_one_safe_way(tmp_path: Path) -> None:
    fifo = mkfifo(tmp_path / "fifo.json")
    done: list[BaseException] = []

    def read() -> None:
        try:
            read_file(fifo)
        except BaseException as exc:
            done.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert done and isinstance(done[0], UnsafeFile) and "is a FIFO" in str(done[0])
    with pytest.raises(UnsafeFile, match="is a device"):
        read_file(Path("/dev/zero"))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 101)
    with pytest.raises(UnsafeFile, match="is 101 bytes; the limit is 100 bytes"):
        read_file(big, 100)
    link = tmp_path / "link.json"
    link.symlink_to(big)
    with pytest.raises(UnsafeFile, match="is a symbolic link"):
        read_file(link)
    with pytest.raises(InvalidInput, match="is a FIFO"):
        read_ari_file(fifo)
