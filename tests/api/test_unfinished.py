"""What a crash interrupted is finished by the next process that opens the checkpoint (issue 39).

An interrupted ``repair`` used to leave a checkpoint that ARI's open refused as a rollback (and
``verify`` advised ``--accept-rollback``, which would lose the events the repair was about to
re-append); an interrupted ``redact`` left the secret in the derived files, and a writable open
served from them. Each state is made here by stopping the operation where a crash would, then
opened by fresh processes: read-only (``ari-ledger search``, ``ari-ledger verify``), which name
the unfinished operation and the one command that finishes it, and as ARI opens it (a writable
``MemoryBackend``), which finishes it before answering. The crash states of every system call
are in ``tests/write_side/test_crash_states.py`` (the workloads "… opened as ARI opens it").
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ledger import Ledger, layout
from ledger.layout import SNAPSHOT_NAME, VERIFIED_CONTEXT_NAME, store_dir
from ledger.log import LOG_NAME, scan_members
from ledger.maintenance.redact import Selector, redact
from ledger.maintenance.repair import repair
from projections.api import MemoryBackend
from support.env import ari_ledger, subprocess_env
from support.leaks import every_file_bytes

SECRET = "ghp_UNFINISHED0123456789abcdef"

ARI_OPENS = textwrap.dedent(
    """
    import sys
    from projections.api import MemoryBackend

    memory = MemoryBackend(sys.argv[1])
    print("finished:", *memory.finished, sep="\\n")
    print("hits", len(memory.search_memory(sys.argv[2], ["root"], 5)["results"]))
    memory.close()
    """
)


def ari_opens(ckpt: Path, query: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ARI_OPENS, str(ckpt), query], capture_output=True, text=True, env=subprocess_env()
    )


def written(ckpt: Path, secret: str | None = None) -> None:
    """A checkpoint as ARI leaves it: entries (one quoting ``secret``), a search, the verified
    context and the snapshot, each anchored at the log's end."""
    backend = MemoryBackend(ckpt)
    try:
        for i in range(12):
            text = f"entry {i} on halo exchange" + (f" export TOKEN={secret}" if secret and i == 4 else "")
            backend.add_memory("root", text, {}, current_node="root")
        backend.search_memory(secret or "halo", ["root"], 3)
        backend.export_verified_context(["root"], ckpt)
        backend.session.projector.save()
    finally:
        backend.close()


def read_only_answers(ckpt: Path, operation: str) -> None:
    for args in (("search", ckpt, "halo", "--as", "root"), ("verify", ckpt)):
        run = ari_ledger(*args)
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert len(lines) == 1 and f"a {operation} of" in lines[0] and "is not finished" in lines[0], lines
        assert f"`ari-ledger repair {ckpt}` finishes it" in lines[0]
        assert "rollback" not in run.stderr and "removed" not in run.stderr and SECRET not in run.stdout


def test_an_interrupted_redaction_is_finished_by_aris_next_open(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    written(ckpt, SECRET)
    first = redact(ckpt, Selector(text=SECRET), reason="leak", by="t", keep_intent=True)  # killed after the rename
    assert first.event is not None and layout.unfinished(ckpt) == ["redaction"]
    assert SECRET.encode() in every_file_bytes(ckpt)  # the derived files still hold it
    read_only_answers(ckpt, "redaction")
    opened = ari_opens(ckpt, "export TOKEN")  # a search for the secret itself would record it anew
    assert opened.returncode == 0, opened.stderr
    assert "resumed: an interrupted redaction" in opened.stdout and "hits" in opened.stdout
    assert layout.unfinished(ckpt) == []
    assert SECRET.encode() not in every_file_bytes(ckpt)
    assert ari_ledger("verify", ckpt).returncode == 0


def test_an_interrupted_repair_is_finished_by_aris_next_open(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    written(ckpt)
    path = store_dir(ckpt) / LOG_NAME
    with open(path, "rb") as f:
        offsets = [m.offset for m in scan_members(f)]
    raw = bytearray(path.read_bytes())
    raw[(offsets[2] + offsets[3]) // 2] ^= 0x55  # the third member damaged, complete members after it
    path.write_bytes(bytes(raw))

    class Killed(Exception):
        pass

    def crash() -> None:
        raise Killed  # after the cut and the re-append, before the intent is removed

    with pytest.raises(Killed):
        repair(ckpt, before_done=crash)
    assert layout.unfinished(ckpt) == ["repair"]
    assert (ckpt / VERIFIED_CONTEXT_NAME).exists() and (store_dir(ckpt) / SNAPSHOT_NAME).exists()
    read_only_answers(ckpt, "repair")
    opened = ari_opens(ckpt, "halo")
    assert opened.returncode == 0, opened.stderr
    assert "finished a repair a crash interrupted" in opened.stdout and "hits 5" in opened.stdout
    assert layout.unfinished(ckpt) == []
    with Ledger.open_readonly(ckpt) as ledger:
        events = list(ledger.events())
    salvaged = [e for e in events if "origin" in e.body]
    assert salvaged and len({e.body["origin"]["salvaged"]["hash"] for e in salvaged}) == len(salvaged)
    verify = ari_ledger("verify", ckpt)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_a_read_only_file_system_names_the_unfinished_operation(tmp_path: Path) -> None:
    """An open that cannot write (here: read-only by request) never serves from unfinished files."""
    ckpt = tmp_path / "ckpt"
    written(ckpt, SECRET)
    redact(ckpt, Selector(text=SECRET), reason="leak", by="t", keep_intent=True)
    from ledger.errors import UnfinishedOperation

    with pytest.raises(UnfinishedOperation, match="ari-ledger repair"):
        MemoryBackend(ckpt, readonly=True)
