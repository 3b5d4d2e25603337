"""ARI's access log, ``memory_access.jsonl``, written by this library's ``AccessLog``.

Facts from ARI's source (ari-skill-memory ``access_log.py`` and its backends, ari-core
``viz/api_memory.py::_api_memory_access`` and ``memory_cli.py::compact_access_cmd``) that these
tests hold the log to:

- a write line is ``{"ts": float unix seconds, "node_id": $ARI_CURRENT_NODE_ID or "", "op": "write",
  "collection": "node_scope"|"react_step", "entry_id", "text_preview": text[:ARI_MEMORY_ACCESS_PREVIEW_CHARS
  (200)], "metadata"}``, keys in that order;
- a read line is ``{"ts", "node_id", "op": "read", "collection", "query", "ancestor_ids" (list, or null
  for ReAct), "limit", "results": [{"entry_id", "src_node_id", "score", ...}]}``; inheritance reads use
  the queries ``inherit:get_node_memory`` and ``inherit:bulk_get_node_memory``;
- ARI encodes with ``json.dumps(..., ensure_ascii=False)`` and its readers split the file with
  ``str.splitlines()`` and ``json.loads`` each line, skipping lines that do not decode;
- the viz keeps lines whose ``node_id`` is the node, counts ``op`` ``write``/``read`` and
  ``results[].entry_id``; it reads ``memory_access.jsonl`` only;
- the log rotates at ``ARI_MEMORY_ACCESS_LOG_MAX_MB`` (100) to ``memory_access.<int unix time>.jsonl``;
  ``compact-access`` collects ``glob("memory_access.*.jsonl")``; ``ARI_MEMORY_ACCESS_LOG=off``
  turns the log off (this library also takes 0/false/no).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import projections.access.writer as access_writer
from projections.access.log import ACCESS_LOG_NAME, AccessLog
from projections.access.reader import check_chain
from projections.access.writer import ROTATED_GLOB, flush_all
from support.env import subprocess_env

ARI_WRITE_KEYS = ["ts", "node_id", "op", "collection", "entry_id", "text_preview", "metadata"]
ARI_READ_KEYS = ["ts", "node_id", "op", "collection", "query", "ancestor_ids", "limit", "results"]
CHAIN_KEYS = ["n", "prev", "hash"]  # this library's, chained on last
ROTATED_NAME = re.compile(r"memory_access\.(\d+)(?:_(\d+))?\.jsonl")
TINY_MB = "0.001"  # 1048 bytes: a rotation every few lines
TINY_BYTES = int(0.001 * 1024 * 1024)


@pytest.fixture(autouse=True)
def no_access_log_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """conftest clears ARI's main variables; these two are the access log's own."""
    monkeypatch.delenv("ARI_MEMORY_ACCESS_PREVIEW_CHARS", raising=False)
    monkeypatch.delenv("ARI_MEMORY_ACCESS_LOG_MAX_MB", raising=False)


def ari_lines(path: Path) -> list[dict[str, Any]]:
    """A file read the way ARI reads it; fails on anything ARI would skip or mis-split."""
    flush_all()  # what this process queued is in the file
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), f"{path.name} ends inside a line"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


def rotated_in_order(ckpt: Path) -> list[Path]:
    """Rotated files as compact-access finds them, oldest first (unix time, then suffix)."""
    flush_all()
    found = list(ckpt.glob(ROTATED_GLOB))
    for p in found:
        assert ROTATED_NAME.fullmatch(p.name), p.name
    return sorted(found, key=lambda p: tuple(int(g or 0) for g in ROTATED_NAME.fullmatch(p.name).groups()))


def all_lines(ckpt: Path) -> list[dict[str, Any]]:
    """Every line ever written, oldest file first, the current file last."""
    files = rotated_in_order(ckpt) + [ckpt / ACCESS_LOG_NAME]  # (flushed first)
    return [line for f in files if f.exists() for line in ari_lines(f)]


# ARI's line shapes ------------------------------------------------------------------------


def test_write_line_has_aris_fields_first_then_ours(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "node_A")
    metadata = {"kind": "experiment_result", "flops": 2**70, "note": "測定 naïve"}
    before = time.time()
    AccessLog(ckpt).write("node_scope", "e1", "RESULT SUMMARY ok", metadata, tool="add_memory", seq=12)
    flush_all()
    raw = (ckpt / ACCESS_LOG_NAME).read_bytes()
    [line] = ari_lines(ckpt / ACCESS_LOG_NAME)
    assert list(line)[:7] == ARI_WRITE_KEYS
    assert isinstance(line["ts"], float) and before <= line["ts"] <= time.time()
    assert line["node_id"] == "node_A" and line["op"] == "write" and line["collection"] == "node_scope"
    assert line["entry_id"] == "e1" and line["text_preview"] == "RESULT SUMMARY ok"
    assert line["metadata"] == metadata  # the big int exactly, not as a float
    assert list(line)[7:] == ["tool", "pid", "seq", *CHAIN_KEYS]
    assert line["tool"] == "add_memory" and line["pid"] == os.getpid() and line["seq"] == 12
    assert "測定 naïve".encode() in raw and b"\\u" not in raw  # ensure_ascii=False, as ARI writes


def test_read_lines_have_aris_fields_for_search_react_and_inheritance(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "child")
    log = AccessLog(ckpt)
    hits = [{"entry_id": "e1", "src_node_id": "root", "score": 0.87}]
    log.read("node_scope", "loopline", ["root", "child"], 5, hits, tool="search_memory")
    log.read(
        "react_step", "compile", None, 10, [{"entry_id": "r1", "src_node_id": "", "score": 1.0}], tool="react_search"
    )
    log.read(
        "node_scope",
        "inherit:get_node_memory",
        ["root"],
        1,
        [{"src_node_id": "root", "entry_id": "e1", "type": "result_summary"}],
        tool="get_node_memory",
    )
    log.read(
        "node_scope",
        "inherit:bulk_get_node_memory",
        ["root"],
        1,
        [{"src_node_id": "root", "count": 1}],
        tool="bulk_get_node_memory",
    )
    search, react, inherit, bulk = ari_lines(ckpt / ACCESS_LOG_NAME)
    for line in (search, react, inherit, bulk):
        assert list(line)[:8] == ARI_READ_KEYS and line["op"] == "read" and line["node_id"] == "child"
        assert list(line)[8:] == ["tool", "pid", "ids", *CHAIN_KEYS]
    assert search["ancestor_ids"] == ["root", "child"] and search["limit"] == 5 and search["results"] == hits
    assert react["collection"] == "react_step" and react["ancestor_ids"] is None
    assert inherit["query"] == "inherit:get_node_memory" and inherit["results"][0]["type"] == "result_summary"
    assert bulk["query"] == "inherit:bulk_get_node_memory" and bulk["results"] == [{"src_node_id": "root", "count": 1}]


def test_node_id_is_the_node_argument_else_the_current_node_else_empty(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = AccessLog(ckpt)
    log.write("node_scope", "e1", "t", {}, tool="add_memory")
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "node_B")
    log.write("node_scope", "e2", "t", {}, tool="add_memory")
    log.write("node_scope", "e3", "t", {}, tool="start_node", node="node_C")
    log.record("refused", "clear_node_memory", node="", reason="not the current node")
    assert [x["node_id"] for x in ari_lines(ckpt / ACCESS_LOG_NAME)] == ["", "node_B", "node_C", ""]


@pytest.mark.parametrize(("setting", "kept"), [(None, 200), ("7", 7), ("0", 0), ("not a number", 200)])
def test_preview_length_comes_from_the_variable(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch, setting: str | None, kept: int
) -> None:
    if setting is not None:
        monkeypatch.setenv("ARI_MEMORY_ACCESS_PREVIEW_CHARS", setting)
    text = "é" * 150 + "x" * 350  # characters, not bytes
    AccessLog(ckpt).write("react_step", "r1", text, {}, tool="react_add")
    [line] = ari_lines(ckpt / ACCESS_LOG_NAME)
    assert line["text_preview"] == text[:kept]


def test_every_line_break_splitlines_knows_stays_inside_one_line(ckpt: Path) -> None:
    """JSON allows U+0085, U+2028 and U+2029 raw, but ARI's splitlines() would cut there."""
    text = "a\nb\rc\x0bd\x0ce\x1cf\x85g\u2028h\u2029i"
    log = AccessLog(ckpt)
    log.write("node_scope", "e1", text, {"why": text}, tool="add_memory")
    log.read("node_scope", text, ["root"], 1, [], tool="search_memory")
    write, read = ari_lines(ckpt / ACCESS_LOG_NAME)
    assert write["text_preview"] == text and write["metadata"] == {"why": text} and read["query"] == text


def test_other_operations_are_lines_the_viz_counts_as_neither_read_nor_write(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "node_A")
    log = AccessLog(ckpt)
    log.record("audit", "audit_memory", findings={"missing": 1, "verified": 3})
    log.record("refused", "add_memory", node="node_B", reason="copy-on-write: node_A is current")
    audit, refused = ari_lines(ckpt / ACCESS_LOG_NAME)
    assert list(audit) == ["ts", "node_id", "op", "tool", "pid", "findings", *CHAIN_KEYS]
    assert audit["op"] == "audit" and audit["findings"] == {"missing": 1, "verified": 3}
    assert refused["node_id"] == "node_B" and refused["op"] == "refused"
    assert not {x["op"] for x in (audit, refused)} & {"read", "write"}
    assert log.problems == []


def test_ari_fields_cannot_be_overwritten_or_faked(ckpt: Path) -> None:
    log = AccessLog(ckpt)
    log.write("node_scope", "e1", "t", {}, tool="add_memory", ts="yesterday", pid=1, hash="0" * 64, kept=True)
    log.record("write", "add_memory", entry_id="e2")  # a write line without ARI's fields
    [line] = ari_lines(ckpt / ACCESS_LOG_NAME)
    assert isinstance(line["ts"], float) and line["pid"] == os.getpid() and line["kept"] is True
    assert len(log.problems) == 2
    assert "['ts', 'pid', 'hash']" in log.problems[0] and "use AccessLog.write()" in log.problems[1]
    assert check_chain(ckpt)[0].ok  # the chain's keys stay the chain's


def test_values_json_cannot_hold_become_strings_instead_of_losing_the_line(ckpt: Path) -> None:
    loop: list[Any] = []
    loop.append(loop)
    log = AccessLog(ckpt)
    log.write("node_scope", "e1", "t", {"path": Path("/x/y"), "pair": (1, 2), "loop": loop}, tool="add_memory")
    [line] = ari_lines(ckpt / ACCESS_LOG_NAME)
    assert line["metadata"]["path"] == "/x/y" and line["metadata"]["pair"] == [1, 2]
    assert json.dumps(line["metadata"]["loop"]).count("[") > 1  # cut, not lost
    assert log.problems == []


@pytest.mark.parametrize("setting", ["off", "OFF", "0", "false", "no"])
def test_off_writes_nothing_and_creates_no_file(ckpt: Path, monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv("ARI_MEMORY_ACCESS_LOG", setting)
    log = AccessLog(ckpt)
    log.write("node_scope", "e1", "t", {}, tool="add_memory")
    log.read("node_scope", "q", ["root"], 5, [], tool="search_memory")
    log.record("audit", "audit_memory")
    log.flush_and_close()
    assert list(ckpt.iterdir()) == [] and log.problems == []
    monkeypatch.setenv("ARI_MEMORY_ACCESS_LOG", "on")  # read at call time: back on, same object
    log.write("node_scope", "e2", "t", {}, tool="add_memory")
    assert [x["entry_id"] for x in ari_lines(ckpt / ACCESS_LOG_NAME)] == ["e2"]


def test_flush_and_close_leaves_the_log_usable(ckpt: Path) -> None:
    log = AccessLog(ckpt)
    log.flush_and_close()  # nothing written yet: nothing created
    assert list(ckpt.iterdir()) == []
    log.write("node_scope", "e1", "t", {}, tool="add_memory")
    log.flush_and_close()
    log.write("node_scope", "e2", "t", {}, tool="add_memory")  # ARI's tests drain, then go on
    assert [x["entry_id"] for x in ari_lines(ckpt / ACCESS_LOG_NAME)] == ["e1", "e2"]
    assert log.problems == []


# rotation ---------------------------------------------------------------------------------


def test_rotation_uses_aris_names_at_the_size_limit_and_loses_nothing(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARI_MEMORY_ACCESS_LOG_MAX_MB", TINY_MB)
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "node_A")
    log = AccessLog(ckpt)
    started = int(time.time())
    for i in range(60):
        log.write("node_scope", f"e{i}", "x" * 120, {"i": i}, tool="add_memory")
    rotated = rotated_in_order(ckpt)
    assert len(rotated) >= 5 and ACCESS_LOG_NAME not in {p.name for p in ckpt.glob(ROTATED_GLOB)}
    for p in rotated:
        stamp = int(ROTATED_NAME.fullmatch(p.name).group(1))
        assert started <= stamp <= time.time()
        size, last = p.stat().st_size, len(p.read_bytes().splitlines(keepends=True)[-1])
        assert size >= TINY_BYTES > size - last  # rotated as soon as it reached the limit
    assert [x["entry_id"] for x in all_lines(ckpt)] == [f"e{i}" for i in range(60)]
    # what compact-access would summarise: the rotated files only, counted by node and op
    compacted = Counter((x["node_id"], x["op"]) for p in rotated for x in ari_lines(p))
    assert compacted[("node_A", "write")] == 60 - len(ari_lines(ckpt / ACCESS_LOG_NAME))
    assert log.problems == []
    chain, _ = check_chain(ckpt)
    assert chain.ok and chain.chained == 60 and len(chain.files) == len(rotated) + 1


def test_rotation_never_overwrites_an_existing_rotated_file(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_MEMORY_ACCESS_LOG_MAX_MB", TINY_MB)
    now = int(time.time())
    taken = {}
    for name in [f"memory_access.{s}.jsonl" for s in range(now - 1, now + 5)] + [f"memory_access.{now}_001.jsonl"]:
        taken[name] = json.dumps({"ts": 1.0, "node_id": "old", "op": "write", "entry_id": name}) + "\n"
        (ckpt / name).write_text(taken[name])
    log = AccessLog(ckpt)
    for i in range(40):
        log.write("node_scope", f"e{i}", "x" * 120, {}, tool="add_memory")
    for name, content in taken.items():
        assert (ckpt / name).read_text() == content
    ours = [x["entry_id"] for x in all_lines(ckpt) if x["node_id"] != "old"]
    assert sorted(ours) == sorted(f"e{i}" for i in range(40))
    assert len(list(ckpt.glob(ROTATED_GLOB))) > len(taken)


CHILD = """
import json, sys, time
from pathlib import Path
from projections.access.log import AccessLog
ckpt, writer, n, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
log = AccessLog(ckpt)
while not go.exists():
    time.sleep(0.001)
for i in range(n):
    if i % 2:
        log.write("node_scope", f"{writer}-{i}", "x" * (50 + i % 150), {"i": i}, tool="add_memory", writer=writer, i=i)
    else:
        log.read("node_scope", "q", [writer], 5, [{"entry_id": f"{writer}-{i}", "src_node_id": writer, "score": 1.0}],
                 tool="search_memory", writer=writer, i=i)
log.flush()
print(json.dumps(log.problems))
"""


def check_every_line_once_in_order(ckpt: Path, writers: list[str], n: int) -> list[dict[str, Any]]:
    lines = all_lines(ckpt)  # also: no file ends inside a line, every line decodes
    seen = Counter((x["writer"], x["i"]) for x in lines)
    assert seen == Counter((w, i) for w in writers for i in range(n))  # none lost, none twice
    for w in writers:  # oldest file first: each writer's lines in the order it wrote them
        assert [x["i"] for x in lines if x["writer"] == w] == list(range(n))
    for p in rotated_in_order(ckpt):  # each file rotated once, when full (one rotator per file)
        assert p.stat().st_size >= TINY_BYTES
    chain, _ = check_chain(ckpt)  # one chain across every rotation, each line once
    assert chain.ok and chain.chained == len(lines) == len(writers) * n, chain.problems
    return lines


def test_eight_processes_rotating_at_once_lose_no_line_and_none_dies(ckpt: Path) -> None:
    writers, n = [f"node_{w}" for w in range(8)], 250
    go = ckpt.parent / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(ckpt), w, str(n), str(go)],
            env=subprocess_env(ARI_CURRENT_NODE_ID=w, ARI_MEMORY_ACCESS_LOG_MAX_MB=TINY_MB),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in writers
    ]
    go.touch()
    outcomes = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert [(rc, out.strip(), err) for rc, out, err in outcomes] == [(0, "[]", "")] * 8
    lines = check_every_line_once_in_order(ckpt, writers, n)
    assert len(rotated_in_order(ckpt)) > 50
    for w in writers:  # what the viz shows for each node, across every file
        mine = [x for x in lines if x["node_id"] == w]
        assert Counter(x["op"] for x in mine) == {"write": n // 2, "read": n // 2}
        assert {r["entry_id"] for x in mine if x["op"] == "read" for r in x["results"]} == {
            f"{w}-{i}" for i in range(0, n, 2)
        }


def test_threads_of_one_process_share_the_log_safely(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARI_MEMORY_ACCESS_LOG_MAX_MB", TINY_MB)
    log, writers, n = AccessLog(ckpt), [f"t{k}" for k in range(4)], 150

    def run(writer: str) -> None:
        for i in range(n):
            log.write("react_step", f"{writer}-{i}", "y" * 80, {}, tool="react_add", writer=writer, i=i)

    threads = [threading.Thread(target=run, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check_every_line_once_in_order(ckpt, writers, n)
    assert log.problems == []


# failures are kept, never raised ----------------------------------------------------------


def test_a_missing_checkpoint_directory_is_a_problem_not_an_exception(tmp_path: Path) -> None:
    log = AccessLog(tmp_path / "gone")
    log.write("node_scope", "e1", "t", {}, tool="add_memory")
    log.flush()
    log.read("node_scope", "q", ["root"], 5, [], tool="search_memory")
    log.flush()
    assert len(log.problems) == 2 and "FileNotFoundError" in log.problems[0]
    assert not (tmp_path / "gone").exists()


def test_without_flock_lines_are_still_written_unlocked_and_never_rotated(
    ckpt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lustre mounted without ``-o flock`` answers ENOSYS; losing the whole log would be worse."""

    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(access_writer.fcntl, "flock", no_flock)  # fcntl as the writer sees it
    monkeypatch.setenv("ARI_MEMORY_ACCESS_LOG_MAX_MB", TINY_MB)
    log = AccessLog(ckpt)
    for i in range(20):
        log.write("node_scope", f"e{i}", "x" * 120, {}, tool="add_memory")
        log.flush()
    assert [x["entry_id"] for x in ari_lines(ckpt / ACCESS_LOG_NAME)] == [f"e{i}" for i in range(20)]
    assert list(ckpt.glob(ROTATED_GLOB)) == []  # rotating unlocked could race another process
    assert log.problems and all("lock" in p and "Function not implemented" in p for p in log.problems)


FS_CHILD = """
import errno, fcntl, json, os, subprocess, sys
from pathlib import Path
from projections.access.log import ACCESS_LOG_NAME, AccessLog
ckpt = Path(sys.argv[1])

def no_flock(fd, operation):
    raise OSError(errno.ENOSYS, "Function not implemented")

subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(ckpt)], check=True)
log, path = AccessLog(ckpt), ckpt / ACCESS_LOG_NAME
for i in range(20):
    log.write("node_scope", f"e{i}", "z" * 100, {}, tool="add_memory")
log.flush()
fd = os.open(ckpt / "filler", os.O_WRONLY | os.O_CREAT)
try:
    while os.write(fd, b"f" * 4096):
        pass
except OSError:
    pass  # the file system is full now
os.close(fd)
before = path.read_bytes()
os.environ["ARI_MEMORY_ACCESS_PREVIEW_CHARS"] = "5000"
log.write("node_scope", "big", "w" * 5000, {}, tool="add_memory")  # longer than any space left
log.flush()
full = {"problems": log.problems, "unchanged": path.read_bytes() == before, "size": len(before)}
real_flock = fcntl.flock
fcntl.flock = no_flock  # the same full disk on a file system without flock
log.write("node_scope", "big2", "w" * 5000, {}, tool="add_memory")
log.flush()
fcntl.flock = real_flock
unlocked = {"problems": log.problems[len(full["problems"]):], "unchanged": path.read_bytes() == before}
seen = len(log.problems)
subprocess.run(["mount", "-o", "remount,ro", str(ckpt)], check=True)
log.write("node_scope", "late", "t", {}, tool="add_memory")
log.flush()
print(json.dumps({"full": full, "unlocked": unlocked, "ro_problems": log.problems[seen:], "text": path.read_text()}))
"""


def what(problem: str) -> str:
    """The step a problem names: ``<UTC time> <step>: <error>``."""
    return problem.split(" ", 1)[1].split(":", 1)[0]


def test_a_full_or_read_only_file_system_is_a_problem_not_an_exception(ckpt: Path) -> None:
    """A real tmpfs filled up, then remounted read-only, in a user and mount namespace."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unprivileged user namespaces (unshare -rm) to mount a small tmpfs")
    done = subprocess.run(
        [unshare, "-rm", sys.executable, "-c", FS_CHILD, str(ckpt)],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    full = report["full"]
    assert full["unchanged"] and len(full["problems"]) == 1  # the partial line was cut back off
    wanted = "short write" if full["size"] % 4096 else "No space left on device"
    assert wanted in full["problems"][0]
    unlocked = report["unlocked"]  # without the lock the piece is still cut back: the file ended with it
    assert unlocked["unchanged"] and [what(p) for p in unlocked["problems"]] == ["lock", "write"]
    [read_only] = report["ro_problems"]
    assert what(read_only) == "open" and "Read-only file system" in read_only
    lines = [json.loads(x) for x in report["text"].splitlines()]
    assert [x["entry_id"] for x in lines] == [f"e{i}" for i in range(20)]


# -- a torn last line (issue 39) ------------------------------------------------------------------


def _written(ckpt: Path, count: int) -> bytes:
    log = AccessLog(ckpt)
    for i in range(count):
        log.write("node_scope", f"e{i}", "x" * 300, {}, tool="add_memory", node="root")
    log.flush_and_close()
    return (ckpt / ACCESS_LOG_NAME).read_bytes()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.integers(0, 4), where=st.floats(0, 1, exclude_min=True, exclude_max=True))
def test_a_line_torn_at_any_offset_is_a_note_and_the_next_writer_cuts_it(
    tmp_path: Path, before: int, where: float
) -> None:
    """A crash inside the write of line ``before + 1`` (the first line included) leaves a prefix of
    it without its newline: never acknowledged, no head names it. Every reader says so in a note,
    never "not a JSON line"; the next writer cuts it and the chain goes on intact."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
        whole, ckpt = Path(tmp) / "whole", Path(tmp) / "torn"
        whole.mkdir()
        full = _written(whole, before + 1)
        cut_from = len(full) - len(full.rstrip(b"\n").rsplit(b"\n", 1)[-1]) - 1 if before else 0
        cut = cut_from + max(1, int(where * (len(full) - 1 - cut_from)))  # inside the last line, before its newline
        ckpt.mkdir()
        if before:  # the acknowledged lines, and the head they left
            _written(ckpt, before)
        torn = full[cut_from:cut]
        with open(ckpt / ACCESS_LOG_NAME, "ab") as f:
            f.write(torn)
        check, lines = check_chain(ckpt)
        assert check.ok, check.problems
        assert check.lines == before and len(lines) == before
        assert any("a crash tore" in n for n in check.notes), check.notes
        _written_more = AccessLog(ckpt)
        _written_more.write("node_scope", "next", "next entry", {}, tool="add_memory", node="root")
        _written_more.flush_and_close()
        check, lines = check_chain(ckpt)
        assert check.ok and check.chained == before + 1, check.problems
        assert not [n for n in check.notes if "tore" in n], check.notes
        assert lines[-1]["entry_id"] == "next"
