"""Many processes, one checkpoint, one Letta agent (issue 17, item 4): real processes on the
real server. Each test ends the way a user checks: ``verify`` exits 0, ``status --json`` is
clean, and the agent's passages (listed from this process) hold each event once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.events import is_stub_body
from projections.engines.letta import make_client
from projections.engines.letta.server import META_KEY, agent_name, delete_agent
from support.env import subprocess_env
from support.memory_proc import MemoryProcess

pytestmark = pytest.mark.letta

HOOK = """
import sys, time
from projections.api import clear_backend_cache, get_backend
get_backend(sys.argv[1]).add_memory("root", sys.argv[2], current_node="root")
started = time.perf_counter()
clear_backend_cache()  # what atexit does
print(f"{time.perf_counter() - started:.3f}")
"""


@pytest.fixture
def letta_env(letta_server, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in letta_server.client_env.items():
        monkeypatch.setenv(name, value)
    return subprocess_env(**letta_server.client_env)


@pytest.fixture
def ckpt(tmp_path: Path, letta_env) -> Iterator[Path]:
    path = tmp_path / "ckpt"
    yield path
    delete_agent(make_client(), agent_name(path))


@pytest.fixture
def procs(ckpt: Path, letta_env) -> Iterator[list[MemoryProcess]]:
    """Driven processes on ``ckpt``; any left running at the end are killed."""
    made: list[MemoryProcess] = []
    yield made
    for proc in made:
        if proc.proc.poll() is None:
            proc.kill()


def start(procs: list[MemoryProcess], ckpt: Path, env: dict[str, str], n: int) -> list[MemoryProcess]:
    """``n`` processes opening the checkpoint at once (the agent-creation race)."""
    started = [MemoryProcess(ckpt, env) for _ in range(n)]
    procs.extend(started)
    for proc in started:
        assert proc.read() == "ready"
    return started


def agents(ckpt: Path) -> list:
    return list(make_client().agents.list(name=agent_name(ckpt)))


def event_tags(agent_id: str) -> Counter:
    client, out, after = make_client(), Counter(), None
    while True:
        page = client.agents.passages.list(agent_id, limit=1000, **({"after": after} if after else {}))
        if not page:
            return out
        out.update(t[2:] for p in page for t in p.tags if t.startswith("e:"))
        after = page[-1].id


def visible_entries(ckpt: Path) -> set[str]:
    """What the agent must hold: the entries after the last purge (from a fresh open of the log)."""
    with Ledger.open_readonly(ckpt) as ledger:
        events = list(ledger.events())
    last_purge = max((e.seq for e in events if e.type == "checkpoint_purged"), default=0)
    return {
        e.id
        for e in events
        if e.type in ("memory_added", "react_step") and e.seq > last_purge and not is_stub_body(e.body)
    }


def ari_ledger(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projections", *args], env=env, capture_output=True, text=True, timeout=300
    )


def assert_as_a_user_sees_it(ckpt: Path, env: dict[str, str]) -> None:
    """One agent holding every visible entry once; verify 0; status clean, Letta at the log's end."""
    found = agents(ckpt)
    assert len(found) == 1, [a.id for a in found]
    tags = event_tags(found[0].id)
    assert set(tags) == visible_entries(ckpt) and set(tags.values()) == {1}, tags.most_common(3)
    verify = ari_ledger("verify", str(ckpt), env=env)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    status = ari_ledger("status", str(ckpt), "--json", env=env)
    assert status.returncode == 0, status.stderr
    state = json.loads(status.stdout)
    assert state["alarms"] == [] and state["notes"] == []
    letta = state["projections"]["letta"]
    assert letta["error"] is None and letta["lag"] == 0 and letta["duplicates"] == [] and not letta["pushing"]


@pytest.mark.parametrize("n", [2, 3])
def test_n_processes_make_one_agent_and_push_each_event_once(n: int, ckpt: Path, letta_env, procs) -> None:
    writers = start(procs, ckpt, letta_env, n)
    for k, proc in enumerate(writers):
        proc.send(f"write 30 p{k}")
    for proc in writers:
        proc.read()
    for proc in writers:
        assert proc.ask("flush") == "True"
    for proc in writers:
        proc.exit()
    assert_as_a_user_sees_it(ckpt, letta_env)


def test_agent_deleted_on_the_server_while_two_processes_are_open(ckpt: Path, letta_env, procs) -> None:
    a, b = start(procs, ckpt, letta_env, 2)
    a.ask("write 20 a"), b.ask("write 20 b")
    assert a.ask("flush") == "True"
    delete_agent(make_client(), agent_name(ckpt))  # the server was emptied while ARI ran
    a.send("write 10 a2"), b.send("write 10 b2")
    a.read(), b.read()
    assert a.ask("flush") == "True" and b.ask("flush") == "True"
    a.exit(), b.exit()
    assert_as_a_user_sees_it(ckpt, letta_env)


def test_purge_with_a_second_process_alive(ckpt: Path, letta_env, procs) -> None:
    a, b = start(procs, ckpt, letta_env, 2)
    a.ask("write 15 before-a"), b.ask("write 15 before-b")
    assert b.ask("flush") == "True"
    assert a.ask("purge") == "30"
    a.send("write 10 after-a"), b.send("write 10 after-b")
    a.read(), b.read()
    assert b.ask("flush") == "True" and a.ask("flush") == "True"
    a.exit(), b.exit()
    assert_as_a_user_sees_it(ckpt, letta_env)


def test_sigkill_of_the_pusher_mid_push_then_restart(ckpt: Path, letta_env, procs) -> None:
    """The pusher dies between a batch landing and its cursor: the next pusher checks, not trusts."""
    a, b = start(procs, ckpt, letta_env, 2)
    a.ask("bulk 500 bulk")  # a's thread pushes it in batches of 200
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = agents(ckpt)
        if found and len(make_client().agents.passages.list(found[0].id, limit=250)) >= 200:
            break
        time.sleep(0.1)
    a.kill()  # mid-push: the second batch is in flight
    b.ask("write 5 b")
    (restarted,) = start(procs, ckpt, letta_env, 1)
    restarted.ask("write 5 again")
    assert b.ask("flush") == "True" and restarted.ask("flush") == "True"
    b.exit(), restarted.exit()
    assert_as_a_user_sees_it(ckpt, letta_env)


def test_short_lived_hooks_exit_at_once_and_their_entries_reach_letta(ckpt: Path, letta_env, procs) -> None:
    (pusher,) = start(procs, ckpt, letta_env, 1)
    pusher.ask("bulk 300 agent")
    assert pusher.ask("flush") == "True"

    def hook(text: str) -> tuple[float, float]:
        started = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-c", HOOK, str(ckpt), text], env=letta_env, capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
        return float(run.stdout.strip()), time.perf_counter() - started

    beside = [hook(f"hook beside the pusher {i}") for i in range(3)]  # the pusher's thread, or their own push
    pusher.exit()
    alone = [hook(f"hook alone {i}") for i in range(3)]  # no other process: each pushes its own
    for close_s, _ in beside + alone:
        assert close_s < 1.5, (beside, alone)
    found = agents(ckpt)
    meta = found[0].metadata[META_KEY]
    with Ledger.open_readonly(ckpt) as ledger:
        assert meta["cursor"] == ledger.last_seq  # nothing left unpushed, and no flush asked for it
    assert_as_a_user_sees_it(ckpt, letta_env)


def test_duplicate_agents_of_older_versions_are_named_and_cleaned_up(
    ckpt: Path, letta_env, procs, letta_server
) -> None:
    (a,) = start(procs, ckpt, letta_env, 1)
    a.ask("write 5 a")
    assert a.ask("flush") == "True"
    a.exit()
    kept = agents(ckpt)[0].id
    dup = make_client().agents.create(  # as two processes of an older version made it
        name=agent_name(ckpt),
        model="letta/letta-free",
        embedding_config=letta_server.embedding_config,
        include_base_tools=False,
    )
    state = json.loads(ari_ledger("status", str(ckpt), "--json", env=letta_env).stdout)
    assert state["projections"]["letta"]["duplicates"] == [dup.id]
    assert any(kept in note and "restore --dedupe" in note for note in state["notes"])
    cleaned = ari_ledger("restore", str(ckpt), "--dedupe", "--json", env=letta_env)
    assert cleaned.returncode == 0, cleaned.stderr
    assert json.loads(cleaned.stdout)["deleted_duplicates"] == [dup.id]
    assert [x.id for x in agents(ckpt)] == [kept]
    assert_as_a_user_sees_it(ckpt, letta_env)


def test_a_redaction_while_two_processes_run_leaves_no_passage_of_the_text(ckpt: Path, letta_env, procs) -> None:
    """Two processes push to the agent; ``ari-ledger redact`` runs beside them: the passages of the
    redacted entries leave the server, both processes go on writing into the rewritten log, and
    the agent ends holding every other entry once, with no passage holding the text."""
    leak = "sk-LETTA-LEAK-31337"
    a, b = start(procs, ckpt, letta_env, 2)
    a.ask("write 12 plain-a"), b.ask(f"write 6 {leak}")
    assert a.ask("flush") == "True" and b.ask("flush") == "True"
    done = ari_ledger("redact", str(ckpt), "--match", leak, "--reason", "leaked key", env=letta_env)
    assert done.returncode == 0 and "redacted 6 event(s)" in done.stdout, done.stdout + done.stderr
    a.ask("write 5 after-a"), b.ask("write 5 after-b")
    assert a.ask("flush") == "True" and b.ask("flush") == "True"
    a.exit(), b.exit()
    assert_as_a_user_sees_it(ckpt, letta_env)
    (agent,) = agents(ckpt)
    texts = [p.text for p in make_client().agents.passages.list(agent.id, limit=1000)]
    assert len(texts) == 22 and not any(leak in t for t in texts)
