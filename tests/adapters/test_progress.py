"""Progress on stderr and what Ctrl-C kept (issue 28, item 2), through the real CLI.

A command that can take more than a second or two draws a bar on stderr when stderr is a
terminal (a pseudo-terminal here) and nothing at all when it is a pipe or ``--json`` was given;
Ctrl-C is exit 130 and one line on what was kept, and the log verifies after it. The reporter
itself (``projections.adapters.cli.progress``) is tested in-process: tty or not, ``--json``,
its note, and Ctrl-C at a safe point.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from ledger import Ledger
from ledger.layout import SNAPSHOT_NAME, store_dir
from ledger.log import LOG_NAME
from ledger.maintenance.bundle import import_bundle
from ledger.progress import Interrupted
from projections.adapters.cli import progress
from support.env import subprocess_env

ENTRIES = 15_000  # an import of this many takes seconds: far longer than a bar waits to appear
EVENTS = 40_000  # a first fold of this many takes seconds (embedding them): the same
CHECKED = 320_000  # verify checks this many in 2-3 s, a log of 40,000 in a fraction of one: too near the wait
BAR = "━"  # what rich draws a bar with
ESCAPE = "\x1b["  # any terminal control sequence
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|9[0-7])(?:;[0-9;]*)?m")  # a foreground colour


def write_backup(path: Path, n: int = ENTRIES) -> Path:
    """ARI's ``memory_backup.jsonl.gz`` with ``n`` distinct node_scope entries over 30 nodes."""
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(n):
            entry = {
                "kind": "node_scope",
                "node_id": f"node_{i % 30}",
                "text": f"entry {i}: {i * 0.37:.2f} GFlops/s on a grid of {i % 97}",
                "metadata": {"type": "note"},
                "ts": 1764399000.0 + i,
            }
            f.write(json.dumps(entry) + "\n")
    return path


def write_log(ckpt: Path, n: int = EVENTS) -> Path:
    """A checkpoint whose log holds ``n`` entries over 30 nodes and no snapshot (written through
    the write side alone: nothing folded them yet)."""
    with Ledger.open(ckpt) as ledger:
        for start in range(0, n, 5000):
            with ledger.batch() as batch:
                for i in range(start, min(n, start + 5000)):
                    node = f"node_{i % 30}"
                    batch.append(
                        node, "memory_added", {"text": f"entry {i}: {i * 0.37:.2f} GFlops/s"}, current_node=node
                    )
    return ckpt


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    """``ari-ledger ARGS`` with stdout and stderr both pipes."""
    return subprocess.run(
        [sys.executable, "-m", "projections", *map(str, args)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=600,
    )


def in_terminal(*args: object, interrupt_at: str | None = None, timeout: float = 600) -> tuple[int, str, str]:
    """``ari-ledger ARGS`` with stderr on a pseudo-terminal (120 columns) and stdout a pipe;
    with ``interrupt_at``, SIGINT once stderr has shown that text. Returns (exit code, what
    the terminal received, stdout)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "projections", *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=subprocess_env(TERM="xterm-256color"),
        # as at a terminal: Ctrl-C's default, even when the suite runs in the background (where a
        # shell starts it with SIGINT ignored, and a signal before the handler is lost)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    os.close(slave)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else b""))
    reader.start()
    seen, sent, deadline = bytearray(), False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's end is closed
                break
            if not chunk:
                break
            seen += chunk
            if interrupt_at is not None and not sent and interrupt_at.encode() in seen:
                proc.send_signal(signal.SIGINT)
                sent = True
        else:
            proc.kill()
            pytest.fail(f"ari-ledger {args} did not end in {timeout} s")
        code = proc.wait(timeout=60)
    finally:
        os.close(master)
        reader.join(timeout=60)
    if interrupt_at is not None:
        assert sent, f"{interrupt_at!r} never appeared on stderr: {seen.decode(errors='replace')[-2000:]}"
    return code, seen.decode("utf-8", errors="replace"), b"".join(out).decode()


def last_line(terminal: str) -> str:
    """The last line a terminal shows (a bar redraws its line with \\r, and erases itself)."""
    lines = [line for line in re.split(r"[\r\n]", terminal) if line.strip()]
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", lines[-1]).strip()


def events_in(ckpt: Path) -> int:
    run = cli("status", ckpt, "--json")
    assert run.returncode == 0, run.stderr
    return int(json.loads(run.stdout)["events"])


@pytest.fixture(scope="module")
def backup(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_backup(tmp_path_factory.mktemp("ari") / "memory_backup.jsonl.gz")


@pytest.fixture(scope="module")
def unfolded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_log(tmp_path_factory.mktemp("log") / "ckpt")


@pytest.fixture
def big(unfolded: Path, tmp_path: Path) -> Path:
    """A fresh copy of a checkpoint of EVENTS entries without a snapshot."""
    shutil.copytree(unfolded, tmp_path / "ckpt")
    return tmp_path / "ckpt"


@pytest.fixture(scope="module")
def folded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint of CHECKED entries and its snapshot: verify checks both, for seconds."""
    ckpt = write_log(tmp_path_factory.mktemp("folded") / "ckpt", CHECKED)
    assert cli("rebuild", ckpt).returncode in (0, 1)  # 1: saved, but no verified context (no claims)
    assert (store_dir(ckpt) / SNAPSHOT_NAME).exists()
    return ckpt


@pytest.fixture(scope="module")
def imported(backup: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str, str]:
    """The backup imported with stderr on a terminal: (checkpoint, exit code, terminal, stdout)."""
    ckpt = tmp_path_factory.mktemp("tty") / "ckpt"
    code, terminal, stdout = in_terminal("import-ari", ckpt, "--source", backup)
    return ckpt, code, terminal, stdout


# ---------------------------------------------------------------------------- bars


def test_a_long_import_draws_a_bar_on_a_terminal_and_only_the_result_on_stdout(
    imported: tuple[Path, int, str, str],
) -> None:
    ckpt, code, terminal, stdout = imported
    assert code == 0, terminal
    assert "importing" in terminal and BAR in terminal and f"/{ENTRIES:,} entries" in terminal
    assert stdout.strip().endswith(f"node_scope {ENTRIES} imported, 0 already there")
    assert ESCAPE not in stdout and BAR not in stdout  # the bar never reaches the result
    assert BAR not in terminal[terminal.rindex("\x1b[2K") :]  # the last thing drawn erases it
    assert events_in(ckpt) == ENTRIES


def test_with_stderr_a_pipe_the_same_import_prints_nothing_but_its_result(backup: Path, tmp_path: Path) -> None:
    run = cli("import-ari", tmp_path / "ckpt", "--source", backup)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert run.stdout.strip().endswith(f"node_scope {ENTRIES} imported, 0 already there")


def test_a_first_fold_draws_a_bar_on_a_terminal_but_not_with_json(big: Path) -> None:
    code, terminal, stdout = in_terminal("search", big, "--as", "node_3", "GFlops")
    assert code == 0, terminal
    assert f"folding {EVENTS:,} events from scratch" in terminal  # the one-line note stays
    assert "folding the log" in terminal and BAR in terminal and f"/{EVENTS:,} events" in terminal
    assert ESCAPE not in stdout and "node_3" in stdout

    code, terminal, stdout = in_terminal("search", big, "--as", "node_3", "GFlops", "--json")
    assert code == 0, terminal
    assert [line for line in terminal.splitlines() if line.strip()] == [
        f"WARNING: folding {EVENTS:,} events from scratch (no snapshot); `ari-ledger rebuild {big}` saves one"
    ]  # the note, and not a byte of a bar
    assert ESCAPE not in terminal and json.loads(stdout)
    assert not (store_dir(big) / SNAPSHOT_NAME).exists()  # a reading command writes nothing


def test_verify_draws_a_bar_on_a_terminal_and_nothing_on_a_pipe(folded: Path) -> None:
    code, terminal, stdout = in_terminal("verify", folded)

    assert code == 0, terminal
    assert "verifying" in terminal and BAR in terminal
    assert stdout == f"ok: {CHECKED:,} events, chain intact, last seq {CHECKED}\n"
    run = cli("verify", folded)
    assert (run.returncode, run.stdout, run.stderr) == (0, stdout, "")


def test_a_bundle_import_reports_the_events_it_checked_and_ctrl_c_leaves_no_ledger(
    unfolded: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle.tar"
    assert cli("export", unfolded, "-o", bundle).returncode == 0
    calls: list[tuple[int, int]] = []
    manifest = import_bundle(bundle, tmp_path / "whole", progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (EVENTS, EVENTS) and all(total == EVENTS for _, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls) and manifest["events"] == EVENTS

    def stop(done: int, total: int) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the staged log is checked

    with pytest.raises(KeyboardInterrupt):
        import_bundle(bundle, tmp_path / "cut", progress=stop)
    assert not (store_dir(tmp_path / "cut") / LOG_NAME).exists()
    assert list(store_dir(tmp_path / "cut").iterdir()) == []  # the staging directory went too
    assert import_bundle(bundle, tmp_path / "cut")["events"] == EVENTS  # and the same command again imports it


# ---------------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_during_import_ari_keeps_whole_batches_and_running_it_again_finishes(
    backup: Path, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    code, terminal, stdout = in_terminal("import-ari", ckpt, "--source", backup, interrupt_at="importing")
    assert code == 130, terminal
    said = last_line(terminal)
    found = re.fullmatch(
        rf"interrupted: ([\d,]+) of {ENTRIES:,} entries imported and kept \(the log verifies\); "
        r"run the same command again to import the rest",
        said,
    )
    assert found, said
    kept = int(found.group(1).replace(",", ""))
    assert 0 < kept < ENTRIES and kept % 1000 == 0  # whole batches (bulk_import writes 1,000 at a time)
    assert stdout == ""  # no result: it did not finish

    verified = cli("verify", ckpt)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert events_in(ckpt) == kept

    again = cli("import-ari", ckpt, "--source", backup)
    assert again.returncode == 0, again.stderr
    assert f"node_scope {ENTRIES - kept} imported, {kept} already there" in again.stdout
    assert events_in(ckpt) == ENTRIES  # complete, nothing doubled
    third = cli("import-ari", ckpt, "--source", backup, "--json")
    assert json.loads(third.stdout)[0]["kinds"]["node_scope"] == {
        "imported": 0,
        "kind": "node_scope",
        "skipped": ENTRIES,
    }
    assert cli("verify", ckpt).returncode == 0


def test_ctrl_c_during_a_first_fold_says_nothing_is_lost(big: Path) -> None:
    log = (store_dir(big) / LOG_NAME).read_bytes()
    code, terminal, stdout = in_terminal("search", big, "--as", "node_3", "GFlops", interrupt_at="folding the log")
    assert code == 130, terminal
    said = last_line(terminal)
    assert re.fullmatch(
        rf"interrupted: folded [\d,]+ of {EVENTS:,} events when stopped; nothing is lost: the log is the truth "
        rf"and this command writes nothing \(`ari-ledger rebuild {re.escape(str(big))}` folds it once and keeps it\)",
        said,
    ), said
    assert stdout == ""
    assert (store_dir(big) / LOG_NAME).read_bytes() == log
    assert not (store_dir(big) / SNAPSHOT_NAME).exists()
    assert cli("verify", big).returncode == 0


def test_ctrl_c_during_rebuild_saves_what_was_folded_and_rebuild_folds_the_rest(big: Path) -> None:
    code, terminal, _ = in_terminal("rebuild", big, interrupt_at="folding the log")
    assert code == 130, terminal
    said = last_line(terminal)
    found = re.fullmatch(
        rf"interrupted: ([\d,]+) of {EVENTS:,} events folded and saved as the snapshot; the log is unchanged "
        r"\(it is the truth\) and verified_context\.json was not rewritten; run the same command again to fold the rest",
        said,
    )
    assert found, said
    folded = int(found.group(1).replace(",", ""))
    assert 0 < folded < EVENTS
    status = json.loads(cli("status", big, "--json").stdout)
    assert status["projections"]["snapshot"]["cursor"] == folded  # kept: a fold of the log up to there
    verified = cli("verify", big)  # the log, and the snapshot checked against it
    assert verified.returncode == 0, verified.stdout + verified.stderr

    again = cli("rebuild", big)
    assert f"at seq {EVENTS} (folded {EVENTS - folded:,} events after the snapshot)" in again.stdout, again.stdout


# ---------------------------------------------------------------------------- the reporter


class Terminal:
    """A pseudo-terminal: ``stream`` writes to it, :meth:`received` returns what it got."""

    def __init__(self) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.stream = os.fdopen(slave, "w", encoding="utf-8")

    def received(self) -> str:
        """What it received: the pty passes it on asynchronously, so wait for it (up to 2 s for
        the first byte, then until it is quiet)."""
        self.stream.flush()
        data, wait = bytearray(), 2.0
        while select.select([self.master], [], [], wait)[0]:
            data += os.read(self.master, 65536)
            wait = 0.3
        return data.decode("utf-8", errors="replace")


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[Terminal]:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setattr(progress, "SHOW_AFTER_S", 0.0)  # draw at once: the test is short
    tty = Terminal()
    yield tty
    tty.stream.close()
    os.close(tty.master)


def work_with_stderr_on(stream: IO[str], json: bool = False) -> None:
    """A command (``--json`` or not) whose library call reports five steps, one redraw interval
    apart, with sys.stderr on ``stream`` (set here, in the test's body: pytest's capture sets
    its own again between a fixture and the test)."""
    saved, sys.stderr = sys.stderr, stream
    try:
        with progress.running(argparse.Namespace(json=json)):
            reporter = progress.Reporter("folding the log")
            for i in range(1, 6):
                time.sleep(progress.REDRAW_S * 1.5)
                reporter(i * 10_000, 50_000)
    finally:
        sys.stderr = saved


def test_wanted_only_on_a_terminal_and_never_with_json(terminal: Terminal) -> None:
    read, write = os.pipe()
    with os.fdopen(write, "w") as pipe:
        assert progress.wanted(stream=terminal.stream)
        assert not progress.wanted(json=True, stream=terminal.stream)
        assert not progress.wanted(stream=pipe)
    os.close(read)


def test_the_reporter_draws_on_a_terminal_and_goes_when_the_work_ends(terminal: Terminal) -> None:
    work_with_stderr_on(terminal.stream)
    shown = terminal.received()
    assert "folding the log" in shown and BAR in shown and "40,000/50,000 events" in shown
    assert BAR not in shown[shown.rindex("\x1b[2K") :]  # erased at the end: the result is all that stays


def test_the_reporter_draws_nothing_with_json_or_when_stderr_is_not_a_terminal(terminal: Terminal) -> None:
    work_with_stderr_on(terminal.stream, json=True)
    assert terminal.received() == ""

    read, write = os.pipe()
    with os.fdopen(write, "w") as pipe:
        work_with_stderr_on(pipe)
    with os.fdopen(read) as got:
        assert got.read() == ""


def test_no_color_draws_the_bar_without_colour(terminal: Terminal, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    work_with_stderr_on(terminal.stream)
    shown = terminal.received()
    assert BAR in shown and not COLOUR.search(shown)

    monkeypatch.delenv("NO_COLOR")
    work_with_stderr_on(terminal.stream)
    assert COLOUR.search(terminal.received())  # (there is colour without it)


def test_what_ctrl_c_prints() -> None:
    with progress.running(argparse.Namespace(json=True)):
        assert progress.interrupted(KeyboardInterrupt()) == "interrupted"
        done = progress.Reporter("a", note=lambda d, t: f"{d:,} of {t:,} kept")
        done(10, 10)  # finished: its note is not what was interrupted
        assert progress.interrupted(KeyboardInterrupt()) == "interrupted"
        running = progress.Reporter("b", note=lambda d, t: f"{d:,} of {t:,} kept")
        running(1200, 5000)
        assert progress.interrupted(KeyboardInterrupt()) == "interrupted: 1,200 of 5,000 kept"
        assert progress.interrupted(Interrupted("exactly this")) == "interrupted: exactly this"
        try:  # a second Ctrl-C while the first one's work was closing (a snapshot save)
            try:
                raise Interrupted("what the first one kept")
            except Interrupted:
                raise KeyboardInterrupt from None
        except KeyboardInterrupt as second:
            assert progress.interrupted(second) == "interrupted: what the first one kept"


@pytest.fixture
def ctrl_c_as_at_a_terminal() -> Iterator[None]:
    """Python's own SIGINT handler, as a terminal user has it, even when the suite runs in the
    background with SIGINT ignored."""
    inherited = signal.getsignal(signal.SIGINT)
    if inherited is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)


@pytest.mark.usefixtures("ctrl_c_as_at_a_terminal")
def test_inside_safe_points_ctrl_c_stops_at_the_next_progress_call_and_a_second_at_once() -> None:
    before = signal.getsignal(signal.SIGINT)
    with progress.running(argparse.Namespace(json=True)):
        reporter = progress.Reporter("importing", "entries")
        with progress.safe_points():
            reporter(1000, 5000)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler ran: nothing was raised in the middle of a step
            with pytest.raises(KeyboardInterrupt):
                reporter(2000, 5000)
            assert reporter.done == 2000  # the step it reported is counted
            reporter(3000, 5000)  # acted on once
        with progress.safe_points():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            with pytest.raises(KeyboardInterrupt):  # the second Ctrl-C of one block stops at once
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)
        assert signal.getsignal(signal.SIGINT) is before
