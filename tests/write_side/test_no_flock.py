"""A file system without ``flock`` (Lustre mounted without ``-o flock`` answers ENOSYS): reads
work, every write fails with one typed error that says why and what to do (issue 17, item 6).

The fault cannot be produced on this machine's file systems, so ``fcntl.flock`` is replaced in
a subprocess by one that answers as Lustre does; everything else is real.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from projections.api import MemoryBackend
from support.env import subprocess_env

NO_FLOCK = r"""
import errno, fcntl, json, os, sys
def no_flock(fd, op):
    raise OSError(int(sys.argv[2]), os.strerror(int(sys.argv[2])))
fcntl.flock = no_flock
from ledger import Ledger
from ledger.errors import LedgerReadOnly, LockUnavailable
from projections.api import MemoryBackend
out = {}
try:
    Ledger.open(sys.argv[1]).close()
except LockUnavailable as exc:
    out["open"] = str(exc)
backend = MemoryBackend(sys.argv[1])
out["read"] = [e["text"] for e in backend.get_node_memory("root")["entries"]]
out["search"] = len(backend.search_memory("seeded", ["root"])["results"])
for name, call in (("add", lambda: backend.add_memory("root", "x", current_node="root")),
                   ("import", lambda: backend.bulk_import([{"node_id": "root", "text": "y"}], "node_scope"))):
    try:
        call()
    except LedgerReadOnly as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
backend.close()
print(json.dumps(out))
"""


@pytest.mark.parametrize("errno_name", ["ENOSYS", "EOPNOTSUPP", "ENOLCK"])
def test_without_flock_reads_work_and_writes_say_why(errno_name: str, tmp_path: Path) -> None:
    import errno

    ckpt = tmp_path / "ckpt"
    seeded = MemoryBackend(ckpt)
    seeded.add_memory("root", "seeded before the mount lost flock", current_node="root")
    seeded.close()
    before = sorted((p.name, p.read_bytes()) for p in (ckpt / "memory_ledger").iterdir() if ".idx" not in p.name)
    run = subprocess.run(
        [sys.executable, "-c", NO_FLOCK, str(ckpt), str(getattr(errno, errno_name))],
        capture_output=True,
        text=True,
        env=subprocess_env(ARI_CURRENT_NODE_ID="root"),
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    import json

    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["read"] == ["seeded before the mount lost flock"] and out["search"] == 1
    for what in ("open", "add", "import"):
        assert "cannot lock files" in out[what] and "-o flock" in out[what] and "local directory" in out[what]
    assert out["add"].startswith("LockUnavailable") or out["add"].startswith("LedgerReadOnly")
    assert "Errno" not in run.stderr and "Traceback" not in run.stderr
    after = sorted((p.name, p.read_bytes()) for p in (ckpt / "memory_ledger").iterdir() if ".idx" not in p.name)
    assert after == before  # nothing was written


def test_a_new_checkpoint_without_flock_opens_read_only(tmp_path: Path) -> None:
    ckpt = tmp_path / "new"
    run = subprocess.run(
        [sys.executable, "-c", NO_FLOCK, str(ckpt), "38"],
        capture_output=True,
        text=True,
        env=subprocess_env(ARI_CURRENT_NODE_ID="root"),
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert '"read": []' in run.stdout and "-o flock" in run.stdout
