"""Real processes appending to one checkpoint at once, and a writer killed mid-run (R5)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ledger import Ledger
from ledger.layout import store_dir
from support.env import subprocess_env

WRITER = r"""
import sys
from ledger import Ledger
ckpt, node, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Ledger.open(ckpt) as ledger:
    for i in range(count):
        ledger.append(node, "memory_added", {"text": f"{node} {i}"})
"""


def test_four_processes_append_500_each(ckpt: Path) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(ckpt), f"worker_{w}", "500"],
            env=subprocess_env(ARI_CURRENT_NODE_ID=f"worker_{w}"),
        )
        for w in range(4)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0, 0]
    with Ledger.open(ckpt) as ledger:
        events = list(ledger.events())
        assert [e.seq for e in events] == list(range(1, 2001))
        assert ledger.verify().ok
        anchor = ledger.head_anchor()  # each writer anchors after its own fdatasync, in any order
        assert anchor is not None and (anchor.seq, anchor.hash) == (2000, events[-1].hash)
    texts = [e.body["text"] for e in events]
    assert len(set(texts)) == 2000
    for w in range(4):  # each writer's own order is preserved
        mine = [int(t.split()[1]) for t in texts if t.startswith(f"worker_{w} ")]
        assert mine == list(range(500))


def test_threads_sync_outside_the_lock_and_the_head_file_ends_at_the_last_event(ckpt: Path) -> None:
    """Eight threads of one process append at once: their fdatasyncs overlap (each after the
    lock is released), the chain stays gapless, and the head file, advanced by each thread after
    its own sync in whatever order they finish, is never moved back: it ends at the last event."""
    import threading

    with Ledger.open(ckpt) as ledger:

        def write(t: int) -> None:
            for i in range(150):
                ledger.append("root", "memory_added", {"text": f"thread {t} entry {i}"}, current_node="root")

        threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        anchor = ledger.head_anchor()
        assert anchor is not None and (anchor.seq, anchor.hash) == (1200, ledger.last_hash)
    with Ledger.open_readonly(ckpt) as reader:
        assert reader.verify().ok
        texts = [e.body["text"] for e in reader.events()]
    assert len(texts) == len(set(texts)) == 1200


def test_a_failed_fdatasync_is_reported_unconfirmed_and_the_chain_goes_on(ckpt: Path, monkeypatch) -> None:
    """An I/O error from fdatasync (a failing disk: faked, it cannot be produced here) comes after
    the lock is released, when others may have appended behind the member: the append is not
    acknowledged (WriteUnconfirmed names its seq and id, and the head file does not anchor it),
    the member stays, and the next append chains after it."""
    import errno

    from ledger.errors import WriteUnconfirmed

    real = os.fdatasync

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with Ledger.open(ckpt) as ledger:
        ledger.append("root", "memory_added", {"text": "acknowledged"}, current_node="root")
        monkeypatch.setattr(os, "fdatasync", failing)
        try:
            ledger.append("root", "memory_added", {"text": "unconfirmed"}, current_node="root")
        except WriteUnconfirmed as exc:
            assert exc.errno == errno.EIO and "seq 2 " in str(exc) and "not acknowledged" in str(exc)
        else:
            raise AssertionError("a failed fdatasync was acknowledged")
        anchor = ledger.head_anchor()
        assert anchor is not None and anchor.seq == 1
        monkeypatch.setattr(os, "fdatasync", real)
        assert ledger.append("root", "memory_added", {"text": "after"}, current_node="root").seq == 3
    with Ledger.open_readonly(ckpt) as reader:
        assert reader.verify().ok
        assert [e.body["text"] for e in reader.events()] == ["acknowledged", "unconfirmed", "after"]


KILLED = r"""
import sys
from ledger import Ledger
ckpt = sys.argv[1]
with Ledger.open(ckpt) as ledger:
    i = 0
    while True:
        if i % 3 == 0:
            with ledger.batch() as batch:
                ids = [batch.append("root", "memory_added", {"text": f"b{i}-{j}" + "x" * 2000}).id for j in range(20)]
        else:
            ids = [ledger.append("root", "memory_added", {"text": f"s{i}"}).id]
        print(" ".join(ids), flush=True)
        i += 1
"""


def test_sigkill_mid_run_keeps_every_acknowledged_append(ckpt: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(ckpt)],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(ARI_CURRENT_NODE_ID="root"),
    )
    acked: list[str] = []
    deadline = time.monotonic() + 60
    while len(acked) < 300 and time.monotonic() < deadline:
        acked.extend(proc.stdout.readline().split())
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate()
    acked.extend(rest.split())  # printed before the kill: acknowledged too
    assert len(acked) >= 300
    with Ledger.open(ckpt) as ledger:
        stored = [e.id for e in ledger.events()]
        assert ledger.verify().ok
    assert set(acked) <= set(stored)
    assert stored[: len(acked)] == acked


def test_a_member_a_writer_finishes_while_a_reader_reads_it_is_not_damage(ckpt: Path, monkeypatch) -> None:
    """An unlocked reader sees member 3 half written, then the head file that the writer
    updated once it was complete: a write in flight, not damage (the interleaving is forced
    by doing the writer's part inside the reader's check)."""
    from ledger.anchor import HEAD_SUFFIX
    from ledger.log import LOG_NAME

    with Ledger.open(ckpt) as ledger:
        for i in range(3):
            ledger.append("root", "memory_added", {"text": f"entry {i}"}, current_node="root")
        with open(ledger.path, "rb") as f:
            from ledger.log import scan_members

            third = list(scan_members(f))[-1]
    full, head = (store_dir(ckpt) / LOG_NAME).read_bytes(), (store_dir(ckpt) / (LOG_NAME + HEAD_SUFFIX)).read_bytes()
    (store_dir(ckpt) / LOG_NAME).write_bytes(full[: third.offset + 10])  # the writer is inside its write()
    real = Ledger.acknowledged

    def writer_finishes(self: Ledger) -> int:
        (store_dir(ckpt) / LOG_NAME).write_bytes(full)
        (store_dir(ckpt) / (LOG_NAME + HEAD_SUFFIX)).write_bytes(head)
        return real(self)

    monkeypatch.setattr(Ledger, "acknowledged", writer_finishes)
    with Ledger.open_readonly(ckpt) as reader:
        assert reader.damage is None and reader.torn_tail is None and reader.last_seq == 2
        assert reader.refresh() == 3 and [e.body["text"] for e in reader.events()] == ["entry 0", "entry 1", "entry 2"]


def test_an_unfinished_member_is_in_flight_while_a_writer_holds_the_lock(ckpt: Path) -> None:
    """A writer is inside its write(): part of a member at the end of the log, the lock held (on
    a description of its own, as another process's). An unlocked reader must not take it for a
    torn tail; once nobody holds the lock and it is still unfinished, it is one."""
    import fcntl

    from ledger.log import LOG_NAME, compress_member

    with Ledger.open(ckpt) as ledger:
        for i in range(3):
            ledger.append("root", "memory_added", {"text": f"entry {i}"}, current_node="root")
    path = store_dir(ckpt) / LOG_NAME
    writer = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        fcntl.flock(writer, fcntl.LOCK_EX)
        os.write(writer, compress_member(b'{"half": "written"}\n' * 50)[:40])
        with Ledger.open_readonly(ckpt) as reader:
            assert reader.torn_tail is None and reader.last_seq == 3
            assert reader.refresh() == 3 and len(list(reader.events())) == 3 and reader.torn_tail is None
            assert reader.verify().ok
        fcntl.flock(writer, fcntl.LOCK_UN)
        with Ledger.open_readonly(ckpt) as reader:  # nobody is writing it: a torn tail
            assert reader.torn_tail is not None and reader.last_seq == 3
    finally:
        os.close(writer)
