"""``ari-ledger repair`` (issue 17, item 7): explicit, never automatic. It keeps the longest valid
prefix, moves the rest aside byte for byte, re-appends what it can salvage (marked salvaged, with
the original seq and hash) and leaves a log that verifies and that ARI's calls open again."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import Ledger, LogCorrupted
from ledger.layout import store_dir
from ledger.log import LOG_NAME, scan_members
from ledger.maintenance.repair import repair
from projections.api import MemoryBackend
from support.env import subprocess_env


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "projections", *args], capture_output=True, text=True, env=subprocess_env(), timeout=300
    )


def build(ckpt: Path, members: int = 8, per: int = 3) -> tuple[list[str], list[int]]:
    """A log of ``members`` group commits of ``per`` entries; returns the texts and member offsets."""
    texts = []
    with Ledger.open(ckpt) as ledger:
        for m in range(members):
            with ledger.batch() as batch:
                for i in range(per):
                    texts.append(f"member {m} entry {i}: " + "stencil " * 20)
                    batch.append("root", "memory_added", {"text": texts[-1]}, current_node="root")
    with open(store_dir(ckpt) / LOG_NAME, "rb") as f:
        offsets = [m.offset for m in scan_members(f)]
    return texts, offsets


def damage(ckpt: Path, offset: int) -> bytes:
    path = store_dir(ckpt) / LOG_NAME
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x55
    path.write_bytes(bytes(raw))
    return bytes(raw)


@pytest.mark.parametrize("member", [0, 3, 7])
def test_damage_inside_the_log_is_repaired_to_a_log_that_verifies(ckpt: Path, member: int) -> None:
    texts, offsets = build(ckpt)
    end = offsets[member + 1] if member + 1 < len(offsets) else (store_dir(ckpt) / LOG_NAME).stat().st_size
    raw = damage(ckpt, (offsets[member] + end) // 2)  # inside the member's deflate data
    with pytest.raises(LogCorrupted):
        MemoryBackend(ckpt)
    report = repair(ckpt)
    assert report.kept == 3 * member and report.kept_bytes == offsets[member]
    assert report.set_aside is not None and report.set_aside.read_bytes() == raw[offsets[member] :]  # byte for byte
    assert (store_dir(ckpt) / LOG_NAME).read_bytes()[: offsets[member]] == raw[: offsets[member]]  # prefix untouched
    with Ledger.open_readonly(ckpt) as ledger:
        assert ledger.verify().ok
        events = list(ledger.events())
    salvaged = [e for e in events if "salvaged" in (e.body.get("origin") or {})]
    assert [e.seq for e in salvaged] == [s for _, s in report.salvaged]
    # every entry after the damaged member comes back, each once, with its original seq and hash
    after = texts[3 * (member + 1) :]
    got = [e.body["text"] for e in salvaged]
    assert set(after) <= set(got) and len(got) == len(set(got)) <= len(texts) - 3 * member
    assert all(e.body["origin"]["salvaged"]["seq"] > 3 * member for e in salvaged)
    assert cli("verify", str(ckpt)).returncode == 0
    backend = MemoryBackend(ckpt)  # ARI can run again
    assert backend.add_memory("root", "after the repair", {}, current_node="root")["ok"]
    backend.close()
    again = repair(ckpt)
    assert again.reason is None and again.lines()[0].startswith("nothing to repair")


def test_the_command_says_what_it_kept_set_aside_and_salvaged(ckpt: Path) -> None:
    _texts, offsets = build(ckpt)
    backend = MemoryBackend(ckpt)
    backend.search_memory("stencil", ["root"], 1)
    backend.close()  # saves a snapshot anchored at the end of the log, which the repair cuts
    assert (store_dir(ckpt) / "memory_projection.snapshot").exists()
    damage(ckpt, offsets[5] + 20)
    run = cli("repair", str(ckpt))
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("found: ") and lines[1] == f"kept: seq 1..15 ({offsets[5]} bytes), untouched"
    assert lines[2].startswith("set aside: ") and ".damaged-" in lines[2]
    assert lines[3].startswith("salvaged: ") and "marked salvaged" in lines[3]
    assert any(line.startswith("moved aside: ") and "memory_projection.snapshot" in line for line in lines)
    assert lines[-1].startswith("verify: ok: ")
    status = json.loads(cli("status", str(ckpt), "--json").stdout)
    assert status["alarms"] == []
    nothing = cli("repair", str(ckpt), "--json")
    assert nothing.returncode == 0 and json.loads(nothing.stdout)["repair"]["reason"] is None


def test_random_damage_always_repairs_to_a_verifying_log_losing_only_damaged_lines(tmp_path: Path) -> None:
    rnd = random.Random(17)
    for case in range(12):
        ckpt = tmp_path / f"case{case}"
        texts, offsets = build(ckpt, members=6, per=2)
        size = (store_dir(ckpt) / LOG_NAME).stat().st_size
        pos = rnd.randrange(offsets[1], size - 8)  # damage after the first member: the ckpt id survives
        damage(ckpt, pos)
        try:
            Ledger.open(ckpt).close()
            continue  # a flip gzip tolerates (a header byte that carries no data)
        except LogCorrupted:
            pass
        report = repair(ckpt)
        with Ledger.open_readonly(ckpt) as ledger:
            assert ledger.verify().ok, case
            got = [e.body["text"] for e in ledger.events()]
        hit = next(i for i, o in enumerate(offsets) if o > pos) - 1 if pos < offsets[-1] else len(offsets) - 1
        assert set(texts) - set(got) <= set(texts[2 * hit : 2 * hit + 2]), case  # only the damaged member's lines
        assert report.kept == 2 * hit


@pytest.mark.parametrize("stop_at", ["_reanchor", "_reappend"])
def test_a_repair_killed_midway_is_finished_by_the_next_run(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch, stop_at: str
) -> None:
    """Issue 26: the intent is recorded first, so a repair stopped after it set the damage aside
    (before the head moved, or after the cut, before the salvage) is finished by running it again:
    the salvageable events never stay only in ``.damaged-*``, and the next open raises no alarm."""
    import ledger.maintenance.repair as repair_module

    texts, offsets = build(ckpt)
    damage(ckpt, (offsets[3] + offsets[4]) // 2)

    def crash(*_args: object, **_kw: object) -> None:
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(repair_module, stop_at, crash)
    with pytest.raises(KeyboardInterrupt):
        repair(ckpt)
    monkeypatch.undo()
    intent = store_dir(ckpt) / (LOG_NAME + repair_module.INTENT_SUFFIX)
    assert intent.exists()  # what remains to do is recorded
    if stop_at == "_reappend":
        Ledger.open(ckpt).close()  # the cut log opens: the head was lowered before the cut
    report = repair(ckpt)
    assert report.resumed and report.lines()[0].startswith("resumed: ")
    assert not intent.exists()
    with Ledger.open_readonly(ckpt) as ledger:
        assert ledger.verify().ok
        got = [e.body["text"] for e in ledger.events()]
    assert set(texts[3 * 5 :]) <= set(got) and len(got) == len(set(got))  # every whole member after the damage
    assert repair(ckpt).reason is None  # and done: nothing to repair
