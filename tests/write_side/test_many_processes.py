"""Many processes, one checkpoint (issue 17, item 8): real processes writing at once, forks after
open, the real MCP server beside an in-process backend, two ``import-ari`` of one backup at once,
consolidation of one report twice at once, SIGKILL of each writer in turn, with ``status`` and
``verify`` run while they write.

Texts are 1.5-3 KB of hex so the log crosses the side index's 256 KiB stride several times in
each test. Every test ends the way a user checks: ``ari-ledger verify CKPT`` exits 0,
``ari-ledger status CKPT --json`` shows no alarm, and every acknowledged write is found once by
a fresh process.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ledger.log import IDX_STRIDE
from projections.api import MemoryBackend, clear_backend_cache, get_backend
from projections.tools import checkpoint
from support.env import FIXTURES, first_line, subprocess_env

NODE = "root"


def big_text(rnd: random.Random, tag: str) -> str:
    return f"{tag} " + rnd.randbytes(rnd.randint(1000, 1800)).hex()


def cli(*args: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "projections", *map(str, args)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=timeout,
    )


COUNT = r"""
import json, sys
from collections import Counter
from ledger import Ledger
with Ledger.open_readonly(sys.argv[1]) as ledger:
    events = [e for e in ledger.events() if e.type == "memory_added"]
print(json.dumps({"ids": Counter(e.id for e in events), "texts": Counter(e.body["text"] for e in events),
                  "size": ledger.path.stat().st_size}))
"""


def user_checks(ckpt: Path, acked_ids: list[str] = (), acked_texts: list[str] = (), *, strides: int = 2) -> dict:
    """What a user runs: verify (exit 0), status (no alarm), then a fresh process finds every
    acknowledged write, each once. Returns the fresh process's counts."""
    runs = [  # three fresh processes, at once (they only read)
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env())
        for args in (
            [sys.executable, "-m", "projections", "verify", str(ckpt)],
            [sys.executable, "-m", "projections", "status", str(ckpt), "--json"],
            [sys.executable, "-c", COUNT, str(ckpt)],
        )
    ]
    (_verify, _), (status, _), (fresh, _) = outs = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0, 0], outs
    assert json.loads(status)["alarms"] == []
    found = json.loads(fresh)
    assert found["size"] > strides * IDX_STRIDE, f"the log ({found['size']} bytes) did not cross the stride {strides}x"
    assert all(found["ids"].get(i) == 1 for i in acked_ids), "an acknowledged id is missing or repeated"
    assert all(found["texts"].get(t) == 1 for t in acked_texts), "an acknowledged text is missing or repeated"
    assert max(found["texts"].values(), default=1) == 1, "a text was written twice"
    return found


# ---------------------------------------------------------------------------- spawned writers

BACKEND_WRITER = r"""
import random, sys
from projections.api import get_backend
ckpt, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(tag)
backend = get_backend(ckpt)
print("ready", flush=True)
i = 0
while count < 0 or i < count:
    text = f"{tag}-{i} " + rnd.randbytes(rnd.randint(1000, 1800)).hex()
    print(backend.add_memory("root", text, {"i": i}, current_node="root")["id"], flush=True)
    i += 1
"""


def start_writer(ckpt: Path, tag: str, count: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", BACKEND_WRITER, str(ckpt), tag, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(ARI_CURRENT_NODE_ID=NODE),
    )
    assert first_line(proc).strip() == "ready", proc.stderr.read()[-2000:]
    return proc


def test_spawned_writers_while_status_and_verify_run(ckpt: Path) -> None:
    """3 writer processes; meanwhile status and verify (in-process and the CLI) and an in-process
    backend's health run over and over: no false alarm, no torn tail, nothing lost."""
    procs = [start_writer(ckpt, f"w{w}", 100) for w in range(3)]
    reader = MemoryBackend(ckpt)
    checks = alarms = torn = 0
    cli_runs: list[subprocess.CompletedProcess[str]] = []

    def writing() -> bool:
        return any(p.poll() is None for p in procs)

    def run_cli() -> None:  # what a person types while ARI runs (at least once: fast writers may be done)
        while not cli_runs or writing():
            cli_runs.append(cli("status" if len(cli_runs) % 2 == 0 else "verify", ckpt, "--json"))

    people = threading.Thread(target=run_cli)
    people.start()
    while writing():
        state = checkpoint.status(ckpt)
        found = checkpoint.verify(ckpt)
        alarms += bool(state["alarms"]) + (not found.passed)
        torn += reader.health()["torn_tail"] or any("torn" in n for n in state["notes"])
        checks += 1
    people.join()
    reader.close()
    acked = [line for p in procs for line in p.communicate()[0].split()]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert [r.returncode for r in cli_runs] == [0] * len(cli_runs), [r.stdout + r.stderr for r in cli_runs]
    cli_alarms = [json.loads(r.stdout).get("alarms") for r in cli_runs if '"alarms"' in r.stdout]
    assert not any(cli_alarms), cli_alarms
    print(json.dumps({"test": "spawned", "checks": checks, "cli": len(cli_runs), "alarms": alarms, "torn": torn}))
    assert checks >= 1 and len(cli_runs) >= 1 and alarms == 0 and torn == 0  # checks started while writing
    assert len(acked) == 300
    user_checks(ckpt, acked)


# ---------------------------------------------------------------------------- forks after open


def _fork_child(ckpt: str, tag: str, out: str) -> None:
    rnd = random.Random(tag)
    backend = get_backend(ckpt)  # the parent's cached backend, repaired in this process
    with open(out, "w") as f:
        for i in range(50):
            f.write(backend.add_memory(NODE, big_text(rnd, f"{tag}-{i}"), current_node=NODE)["id"] + "\n")
            f.flush()


def test_multiprocessing_fork_children_write_beside_the_parent(ckpt: Path, tmp_path: Path) -> None:
    rnd = random.Random(1)
    parent = get_backend(ckpt)
    acked = [parent.add_memory(NODE, big_text(rnd, "parent-0"), current_node=NODE)["id"]]
    ctx = multiprocessing.get_context("fork")
    outs = [tmp_path / f"child{c}.ids" for c in range(3)]
    children = [ctx.Process(target=_fork_child, args=(str(ckpt), f"c{c}", str(outs[c]))) for c in range(3)]
    for child in children:
        child.start()
    for i in range(50):  # the parent keeps working through the same backend
        acked.append(parent.add_memory(NODE, big_text(rnd, f"parent-{i + 1}"), current_node=NODE)["id"])
    for child in children:
        child.join(timeout=300)
    assert [c.exitcode for c in children] == [0, 0, 0]
    acked += [i for out in outs for i in out.read_text().split()]
    assert len(acked) == 201 and len(parent.get_node_memory(NODE)["entries"]) == 201
    clear_backend_cache()
    user_checks(ckpt, acked)


def test_os_fork_after_open_and_append_both_sides_append(ckpt: Path, tmp_path: Path) -> None:
    from ledger import Ledger

    ledger = Ledger.open(ckpt)
    acked = [ledger.append(NODE, "memory_added", {"text": "before the fork"}, current_node=NODE).id]
    out = tmp_path / "child.ids"
    pid = os.fork()
    side = "child" if pid == 0 else "parent"
    rnd = random.Random(side)
    try:
        with open(out if pid == 0 else os.devnull, "w") as f:
            for i in range(150):
                if i % 10 == 9:  # a group commit too
                    with ledger.batch() as batch:
                        ids = [
                            batch.append(
                                NODE, "memory_added", {"text": big_text(rnd, f"{side}-{i}-{j}")}, current_node=NODE
                            ).id
                            for j in range(3)
                        ]
                else:
                    ids = [
                        ledger.append(
                            NODE, "memory_added", {"text": big_text(rnd, f"{side}-{i}")}, current_node=NODE
                        ).id
                    ]
                if pid == 0:
                    f.write("\n".join(ids) + "\n")
                    f.flush()
                else:
                    acked += ids
    except BaseException:
        if pid == 0:
            os._exit(1)
        raise
    if pid == 0:
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ledger.close()
    acked += out.read_text().split()
    assert len(acked) == 1 + 2 * (135 + 15 * 3)
    user_checks(ckpt, acked)


# ---------------------------------------------------------------------------- the MCP server


def test_the_mcp_server_writes_beside_an_in_process_backend(ckpt: Path) -> None:
    """ARI's real layout: the memory skill's MCP server (a process of its own, driven by the
    official client over stdio) and ari-core's in-process backend on one checkpoint."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "projections", "mcp"],
        env=subprocess_env(ARI_CHECKPOINT_DIR=str(ckpt), ARI_CURRENT_NODE_ID=NODE),
    )
    backend = MemoryBackend(ckpt)
    acked: list[str] = []

    def in_process() -> None:
        rnd = random.Random("core")
        for _ in range(100):
            acked.append(backend.add_memory(NODE, big_text(rnd, f"core-{len(acked)}"), current_node=NODE)["id"])

    async def body() -> None:
        rnd = random.Random("mcp")
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for i in range(120):
                response = await session.call_tool("add_memory", {"node_id": NODE, "text": big_text(rnd, f"mcp-{i}")})
                assert not response.is_error, response.content
                data = response.structured_content or json.loads(response.content[0].text)
                data = data.get("result", data)
                assert data["ok"], data
                acked.append(data["id"])
                if i % 30 == 0:  # the server reads what the in-process backend wrote
                    seen = await session.call_tool("get_node_memory", {"node_id": NODE})
                    assert not seen.is_error

    writer = threading.Thread(target=in_process)
    writer.start()
    try:
        anyio.run(body)
    finally:
        writer.join(timeout=300)
    assert len(backend.get_node_memory(NODE)["entries"]) == len(acked) >= 220
    backend.close()
    user_checks(ckpt, acked)


# ---------------------------------------------------------------------------- once, under races


def test_two_import_ari_of_one_backup_at_once_write_each_entry_once(tmp_path: Path) -> None:
    import gzip

    ckpt, backup = tmp_path / "ckpt", tmp_path / "memory_backup.jsonl.gz"
    rnd = random.Random(7)
    lines = [
        {
            "kind": "node_scope",
            "node_id": f"node_{i % 5}",
            "text": big_text(rnd, f"e{i}"),
            "metadata": {"i": i},
            "ts": 1e9 + i,
        }
        for i in range(1000)
    ]
    backup.write_bytes(gzip.compress("".join(json.dumps(line) + "\n" for line in lines).encode()))
    at = time.time() + 3  # both start importing at the same moment
    script = (
        "import sys, time; from projections.adapters.cli import main; time.sleep(max(0, float(sys.argv[1]) - time.time()));"
        "sys.exit(main(['import-ari', sys.argv[2], '--source', sys.argv[3], '--json']))"
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(at), str(ckpt), str(backup)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
        )
        for _ in range(2)
    ]
    outs = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [o[1][-2000:] for o in outs]
    imported = [json.loads(o[0])[0]["kinds"]["node_scope"] for o in outs]
    assert sum(r["imported"] for r in imported) == 1000 and sum(r["skipped"] for r in imported) == 1000
    again = cli("import-ari", ckpt, "--source", backup, "--json")
    assert json.loads(again.stdout)[0]["kinds"]["node_scope"]["imported"] == 0
    found = user_checks(ckpt, acked_texts=[line["text"] for line in lines])
    assert sum(found["texts"].values()) == 1000


CONSOLIDATE = r"""
import json, sys, time
from projections.api import MemoryBackend
at, ckpt, node, report, work = float(sys.argv[1]), *sys.argv[2:]
backend = MemoryBackend(ckpt)
time.sleep(max(0, at - time.time()))
print(json.dumps(backend.consolidate_node_memory(node, report, work, current_node=node)))
backend.close()
"""


def test_one_report_consolidated_twice_at_once_is_written_once(tmp_path: Path) -> None:
    from projections.adapters.demo import copy_run

    experiments = copy_run(FIXTURES / "ari_run", tmp_path)
    work = next(p.parent for p in sorted(experiments.rglob("node_report.json")))
    ckpt = tmp_path / "ckpt"
    rnd = random.Random(3)
    seed = MemoryBackend(ckpt)  # a log past the stride, as a real run's would be
    with seed.session.batch() as batch:
        for i in range(400):
            batch.append(work.name, "memory_added", {"text": big_text(rnd, f"seed-{i}")}, current_node=work.name)
    seed.close()
    at = time.time() + 4
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CONSOLIDATE,
                str(at),
                str(ckpt),
                work.name,
                str(work / "node_report.json"),
                str(work),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(ARI_CURRENT_NODE_ID=work.name),
        )
        for _ in range(2)
    ]
    outs = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [o[1][-2000:] for o in outs]
    results = [json.loads(o[0]) for o in outs]
    written = [r for r in results if r["written"]]
    assert len(written) == 1 and len([r for r in results if r.get("already")]) == 1, results
    found = user_checks(ckpt, [w["id"] for w in written[0]["written"]])
    assert sum(found["ids"].values()) == 400 + len(written[0]["written"])


# ---------------------------------------------------------------------------- SIGKILL


def test_sigkill_each_writer_in_turn(ckpt: Path) -> None:
    """3 writers; each in turn is SIGKILLed mid-run and a new one started in its place."""
    rnd = random.Random(11)
    procs = [start_writer(ckpt, f"k{w}", -1) for w in range(3)]
    acked: list[str] = []
    for turn in range(3):
        time.sleep(rnd.uniform(0.5, 1.2))
        victim = procs[turn]
        victim.send_signal(signal.SIGKILL)
        out, _ = victim.communicate()
        acked += [line for line in out.split("\n")[:-1] if line]  # a cut last line was not acknowledged
        assert victim.returncode == -signal.SIGKILL
        procs[turn] = start_writer(ckpt, f"k{turn}-again", 40)
    for proc in procs:
        if proc.poll() is None and proc.args[-1] == "-1":
            proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
        acked += [line for line in out.split("\n")[:-1] if line]
    counts = Counter(acked)
    assert max(counts.values()) == 1 and len(acked) >= 120
    user_checks(ckpt, acked)
