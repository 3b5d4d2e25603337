"""No output path writes over a file of a checkpoint's memory (issue 39).

``report``, ``export``, ``prove`` and ``export-ari`` write the file ``-o`` names. Tried against
every file of a checkpoint's memory (everything in ``memory_ledger/``, the access log, the
verified context), written plainly, relative with ``..``, and through a symbolic link: each is
refused with one ``error: --output:`` line and exit 2, and every file of the checkpoint keeps
its bytes. ``-o -`` is standard output: the file goes there, the command's own line to stderr,
and no file named ``-`` appears.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.env import subprocess_env

COMMANDS = ("report", "export", "prove", "export-ari")


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "projections", *args],
        capture_output=True,
        env=subprocess_env(),
        cwd=cwd,
        timeout=300,
    )


def fingerprint(checkpoint: Path) -> dict[str, str]:
    return {
        str(p.relative_to(checkpoint)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(checkpoint.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("outputs") / "run"
    made = cli("demo", str(out))
    assert made.returncode == 0, made.stderr
    return out / "checkpoint"


def memory_files(checkpoint: Path) -> list[Path]:
    files = [p for p in (checkpoint / "memory_ledger").iterdir() if p.is_file()]
    files += [checkpoint / "verified_context.json", checkpoint / "memory_access.jsonl"]
    assert all(p.is_file() for p in files) and len(files) >= 6, files
    return files


def spellings(checkpoint: Path, target: Path, links: Path) -> list[tuple[str, Path | None]]:
    """The target as a path given from the checkpoint's parent: absolute, relative through ``..``,
    and a symbolic link to it elsewhere."""
    link = links / f"link-to-{target.name}"
    if not link.is_symlink():
        link.symlink_to(target)
    relative = os.path.relpath(target, checkpoint.parent)
    detour = Path(checkpoint.name) / ".." / relative
    return [(str(target), None), (str(detour), checkpoint.parent), (str(link), None)]


@pytest.mark.parametrize("command", COMMANDS)
def test_no_output_path_overwrites_a_memory_file(command: str, checkpoint: Path, tmp_path: Path) -> None:
    before = fingerprint(checkpoint)
    tried = 0
    for target in memory_files(checkpoint):
        for spelled, cwd in spellings(checkpoint, target, tmp_path):
            ckpt = str(checkpoint) if cwd is None else checkpoint.name
            run = cli(command, ckpt, "-o", spelled, cwd=cwd)
            err = run.stderr.decode()
            assert run.returncode == 2, (command, spelled, run.returncode, err)
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: --output: "), (command, spelled, err)
            assert "name a file outside it" in lines[0]
            tried += 1
    assert fingerprint(checkpoint) == before, "a refused output path changed a file of the checkpoint"
    assert tried >= 18


@pytest.mark.parametrize("command", COMMANDS)
def test_dash_is_standard_output(command: str, checkpoint: Path, tmp_path: Path) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    copy = tmp_path / "ckpt"
    shutil.copytree(checkpoint, copy)
    run = cli(command, str(copy), "-o", "-", cwd=work)
    # prove's verdict on a copy is its own (its anchors are the original's): the report is written either way
    assert run.returncode in ((0, 1) if command == "prove" else (0,)), run.stderr
    assert not (work / "-").exists() and not (copy / "-").exists()
    if command in ("report", "prove"):
        assert run.stdout.startswith(b"<!DOCTYPE html>")
    elif command == "export":
        assert run.stdout[:4] == b"\x28\xb5\x2f\xfd"  # a zstandard frame: the bundle itself
    else:
        first = gzip.decompress(run.stdout).splitlines()[0]
        assert first.startswith(b'{"kind": ')
    assert b"standard output" in run.stderr or command == "prove"


def test_a_file_named_like_a_memory_file_outside_any_checkpoint_is_fine(checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "verified_context.json"  # a folder that is no checkpoint
    run = cli("report", str(checkpoint), "-o", str(out))
    assert run.returncode == 0, run.stderr
    assert out.read_bytes().startswith(b"<!DOCTYPE html>")
