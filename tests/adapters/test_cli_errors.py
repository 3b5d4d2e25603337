"""Every door of the command line, the MCP server and the embeddings server refuses what it
cannot serve with one line and exit 2, and leaves nothing behind (issue 26 items 2 and 4).

- every command given ``CKPT/memory_ledger`` (the ledger's own folder) names ``CKPT`` and moves
  nothing; ``redact --dry-run`` moves nothing, also on a checkpoint of the old layout;
- (the MCP server answers every tool call on an ``ARI_CHECKPOINT_DIR`` that is not a checkpoint with
  one line naming it, and starts: ``test_mcp_bad_input.py``);
- ``embed-server --port 99999`` and ``demo`` into a directory it cannot write are one line, and a
  failed demo leaves no half of one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.layout import OLD_SNAPSHOT_NAME, SNAPSHOT_NAME, STORE_DIR, store_dir
from ledger.log import LOG_NAME
from projections.adapters.cli import build_parser, main
from projections.adapters.cli.framework import COMMANDS
from projections.api import MemoryBackend
from support.env import subprocess_env

REFUSED = "error: checkpoint: CKPT/memory_ledger is the ledger's own folder inside checkpoint CKPT; pass CKPT"

# Each command that takes a checkpoint, as a person would type it with CKPT/memory_ledger.
WITH_CHECKPOINT: dict[str, list[str]] = {
    "verify": ["verify", "C"],
    "verify --accept-rollback": ["verify", "C", "--accept-rollback"],
    "status": ["status", "C"],
    "rebuild": ["rebuild", "C"],
    "log": ["log", "C"],
    "repair": ["repair", "C"],
    "redact": ["redact", "C", "--match", "run", "--reason", "leak"],
    "redact --dry-run": ["redact", "C", "--match", "run", "--reason", "leak", "--dry-run"],
    "search": ["search", "C", "run", "--as", "root"],
    "context": ["context", "C", "--as", "root"],
    "verified": ["verified", "C", "--as", "root"],
    "audit": ["audit", "C"],
    "tree": ["tree", "C"],
    "report": ["report", "C", "-o", "OUT/report.html"],
    "export": ["export", "C", "-o", "OUT/bundle.tar"],
    "import": ["import", "OUT/bundle.tar", "C"],
    "import-ari": ["import-ari", "C"],
    "export-ari": ["export-ari", "C", "-o", "OUT/backup.jsonl.gz"],
    "reads": ["reads", "C"],
    "prove": ["prove", "C"],
    "restore": ["restore", "C"],
}
# The commands that take no checkpoint argument: the demo's is a directory of its own (below),
# the MCP server's is ARI_CHECKPOINT_DIR (below); the others touch no checkpoint.
WITHOUT_CHECKPOINT = {"demo", "mcp", "bench", "embed-server", "letta", "ari-skill", "completion"}


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


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def checkpoint(path: Path) -> Path:
    backend = MemoryBackend(path)
    for i in range(3):
        backend.add_memory("root", f"RESULT SUMMARY run {i}", {"type": "result_summary"}, current_node="root")
    backend.close()
    return path


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``CKPT`` (a checkpoint) and ``OUT`` in the current directory, as a person types them."""
    monkeypatch.chdir(tmp_path)
    checkpoint(tmp_path / "CKPT")
    (tmp_path / "OUT").mkdir()
    assert main(["export", "CKPT", "-o", "OUT/bundle.tar"]) == 0
    return tmp_path


def test_every_command_is_covered() -> None:
    """A new command must be added above: with a checkpoint argument, or without one."""
    parser = build_parser()
    choices = next(a for a in parser._subparsers._group_actions).choices  # type: ignore[union-attr]
    with_checkpoint = {
        name
        for name, sub in choices.items()
        if any(a.dest == "checkpoint" for a in sub._actions)  # the positional every command names CKPT
    }
    assert with_checkpoint == {args[0] for args in WITH_CHECKPOINT.values()}
    assert set(COMMANDS) == with_checkpoint | WITHOUT_CHECKPOINT


@pytest.mark.parametrize("command", list(WITH_CHECKPOINT))
def test_every_command_refuses_the_ledgers_own_folder_with_one_line_and_moves_nothing(
    capsys: pytest.CaptureFixture, work: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LETTA_BASE_URL", "http://127.0.0.1:9")  # restore would otherwise stop at its absence
    before = files_of(work)
    args = ["CKPT/memory_ledger" if a == "C" else a for a in WITH_CHECKPOINT[command]]
    code, out, err = run(capsys, *args)
    assert (code, err) == (2, REFUSED + "\n"), (command, code, out, err)
    assert files_of(work) == before, command


def test_the_command_line_itself_says_one_line(work: Path) -> None:
    """As typed in a shell: the line on stderr, exit 2, no traceback."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "projections",
            "redact",
            "CKPT/memory_ledger",
            "--match",
            "x",
            "--reason",
            "y",
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        cwd=work,
        timeout=120,
    )
    assert (done.returncode, done.stderr, done.stdout) == (2, REFUSED + "\n", "")


def test_a_demo_inside_a_checkpoint_is_refused(capsys: pytest.CaptureFixture, work: Path) -> None:
    before = files_of(work)
    code, _out, err = run(capsys, "demo", "CKPT/memory_ledger")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: checkpoint: CKPT/memory_ledger/checkpoint lies inside checkpoint CKPT"), err
    assert files_of(work) == before


def test_help_names_the_checkpoint_not_the_file() -> None:
    choices = next(a for a in build_parser()._subparsers._group_actions).choices  # type: ignore[union-attr]
    for name, sub in choices.items():
        for action in sub._actions:
            if action.dest == "checkpoint":
                assert "memory_ledger.jsonl.gz" not in (action.help or ""), name
                assert "the folder that holds memory_ledger/" in (action.help or ""), name


# -- a dry run moves nothing, also on the old layout ------------------------------------------------------


def test_redact_dry_run_on_an_old_layout_moves_nothing(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    old = checkpoint(tmp_path / "old")
    (store_dir(old) / "memory_access.jsonl.head").unlink()
    for file in store_dir(old).iterdir():  # layout 1: the log and its files at the top, the snapshot .zst
        shutil.move(file, old / file.name.replace(SNAPSHOT_NAME, OLD_SNAPSHOT_NAME))
    store_dir(old).rmdir()
    before = files_of(old)
    code, out, err = run(capsys, "redact", str(old), "--match", "run 1", "--reason", "leak", "--dry-run")
    assert code == 0, err
    assert out.startswith("would redact 1 event(s)") and "seq 2  memory_added" in out
    assert files_of(old) == before and not store_dir(old).exists()
    code, out, err = run(capsys, "redact", str(old), "--match", "run 1", "--reason", "leak")  # the real one moves
    assert code == 0, err
    assert (store_dir(old) / LOG_NAME).exists() and not (old / LOG_NAME).exists()


# -- embed-server --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_embed_server_refuses_a_number_that_is_not_a_port(capsys: pytest.CaptureFixture, port: str) -> None:
    code, out, err = run(capsys, "embed-server", "--port", port)
    assert (code, out, err) == (2, "", f"error: --port: {port} is not a port (1–65535)\n")


# -- demo into a directory it cannot write --------------------------------------------------------------------


def test_demo_into_a_path_that_is_not_utf8_leaves_nothing(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    bad = tmp_path / os.fsdecode(b"run-\xff")
    code, _out, err = run(capsys, "demo", str(bad))
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: dir: ") and "run-\\xff is not a UTF-8 path" in err
    assert list(tmp_path.iterdir()) == []
    code, _out, err = run(capsys, "demo", str(bad))  # the next run says the same, not "already holds a demo"
    assert code == 2 and "is not a UTF-8 path" in err


def test_demo_into_a_file_leaves_it_as_it_was(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    file = tmp_path / "taken"
    file.write_text("mine")
    code, _out, err = run(capsys, "demo", str(file))
    assert (code, err) == (2, f"error: dir: {file} is a file, not a directory; pass a new directory\n")
    assert file.read_text() == "mine" and [p.name for p in tmp_path.iterdir()] == ["taken"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_demo_under_a_read_only_parent_leaves_nothing(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir(mode=0o555)
    try:
        code, _out, err = run(capsys, "demo", str(parent / "a" / "demo"))
        assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: Permission denied"), err
        assert list(parent.iterdir()) == []
    finally:
        parent.chmod(0o755)


def test_demo_where_no_directory_can_be_made_leaves_nothing(capsys: pytest.CaptureFixture) -> None:
    code, _out, err = run(capsys, "demo", "/proc/ari-demo/run")
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert not os.path.exists("/proc/ari-demo")


@pytest.mark.parametrize("existing", [False, True], ids=["new directory", "existing directory"])
def test_a_demo_failing_half_way_leaves_nothing_it_wrote(
    capsys: pytest.CaptureFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    """A fault after the run was copied and the checkpoint created (the disk fills up: faked,
    as it cannot be produced here): everything the demo wrote goes, what was there stays."""
    import projections.adapters.demo as demo

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device", "report.html")

    monkeypatch.setattr(demo, "replay_run", disk_full)
    out = tmp_path / "d" / "run"
    if existing:
        out.mkdir(parents=True)
        (out / "notes.txt").write_text("kept")
    before = files_of(tmp_path)
    code, _out, err = run(capsys, "demo", str(out))
    assert (code, err) == (2, "error: report.html: no space left on device\n")
    assert files_of(tmp_path) == before
    monkeypatch.undo()
    code, _out, err = run(capsys, "demo", str(out), "--json")  # and the next run is not refused
    assert code == 0, err
    assert (out / "checkpoint" / STORE_DIR / LOG_NAME).exists()
