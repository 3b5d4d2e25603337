"""The Letta projection against the real server the test setup starts (R11–R13)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from projections import letta_server as letta_harness
from projections.api import MemoryBackend
from projections.errors import EmbeddingMismatch
from support.engines import backends_on, delete_agent
from support.env import subprocess_env

pytestmark = pytest.mark.letta


@pytest.fixture
def on_letta(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """MemoryBackends on the real Letta server the test setup started."""
    with backends_on("letta", request, monkeypatch) as make:
        yield make


def passages_of(backend: MemoryBackend) -> list:
    letta = backend.session.letta.projection
    out, after = [], None
    while True:
        page = letta.pusher.agents.passages.list(letta.agent_id, limit=1000, **({"after": after} if after else {}))
        if not page:
            return out
        out.extend(page)
        after = page[-1].id


def event_tags(backend: MemoryBackend) -> Counter:
    return Counter(t for p in passages_of(backend) for t in p.tags if t.startswith("e:"))


CROWD_QUERY = "stencil GFlops roofline bandwidth result"


def write_crowd(backend: MemoryBackend, n: int) -> None:
    """``n`` entries of node ``crowd`` (one group commit) that match CROWD_QUERY better than any own entry."""
    with backend.session.ledger.batch() as batch:
        for i in range(n):
            batch.append("crowd", "memory_added", {"text": f"{CROWD_QUERY} {i}"}, current_node="crowd")


def write_own(backend: MemoryBackend, numbers: range) -> list[str]:
    """Entries of node ``mine`` that match CROWD_QUERY worse than the crowd; their ids."""
    return [
        backend.add_memory("mine", f"grocery list item {i}: apples and bread", current_node="mine")["id"]
        for i in numbers
    ]


def test_crowded_pool_still_returns_every_in_scope_entry(on_letta, tmp_path: Path) -> None:
    """2,000 sibling passages match the query better than any of the node's own."""
    backend = on_letta(tmp_path / "ckpt")
    backend.start_node("root", None, [], "draft", current_node="root")
    backend.start_node("crowd", "root", ["root"], current_node="crowd")
    backend.start_node("mine", "root", ["root"], current_node="mine")
    write_crowd(backend, 2000)
    own = write_own(backend, range(5))
    results = backend.search_memory(CROWD_QUERY, ["root", "mine"], limit=5)["results"]
    assert sorted(r["entry_id"] for r in results) == sorted(own)
    # ARI's fixed over-fetch (top_k 200) would have cut them off; the plan asks for the window
    # after the crowd, and no more rows than the scope's own
    assert backend.session.letta.projection.last_search == {
        "plan": "windows",
        "calls": 1,
        "top_k": [5],
        "targets": 5,
        "passages": 2005,
    }
    assert backend.health()["backend"] == "letta"

    spread = write_own(backend, range(5, 7))
    write_crowd(backend, 300)  # the scope's newest entries, then a crowd after them too
    results = backend.search_memory(CROWD_QUERY, ["root", "mine"], limit=7)["results"]
    assert sorted(r["entry_id"] for r in results) == sorted(own + spread)
    assert backend.session.letta.projection.last_search["top_k"] == [7]


def test_a_passage_the_fold_does_not_know_costs_a_wider_read_not_a_wrong_one(on_letta, tmp_path: Path) -> None:
    """Someone wrote into the agent directly, inside the window the plan asks for: the planned
    call comes back without one of its targets, and the widening search answers."""
    from projections.engines.letta.plan import letta_time

    backend = on_letta(tmp_path / "ckpt")
    write_crowd(backend, 300)
    own = write_own(backend, range(5))
    assert backend.flush_projections()
    letta = backend.session.letta.projection
    entries = backend.session.projector.catalog.entries
    letta.client.agents.passages.create(
        letta.agent_id,
        text=f"{CROWD_QUERY}, unknown",
        created_at=letta_time(entries[own[2]].ts),
    )
    results = backend.search_memory(CROWD_QUERY, ["mine"], limit=5)["results"]
    assert sorted(r["entry_id"] for r in results) == sorted(own)
    assert letta.last_search["plan"] == "widened"


def test_restore_after_the_agent_is_deleted_gives_the_same_answers(on_letta, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    backend = on_letta(ckpt)
    backend.start_node("root", None, [], "draft", current_node="root")
    for i in range(40):
        backend.add_memory("root", f"observation {i}: tiling {i % 7} gives {i % 5} GFlops", current_node="root")
    backend.react_add("Thought: measure the roofline")
    backend.seed_core_memory("persona", "human", {"goal": "fast stencil"})
    before = backend.search_memory("tiling GFlops", ["root"], limit=10)["results"]
    delete_agent(backend.session.letta.projection)
    backend.close()

    again = on_letta(ckpt)  # the agent is missing: opening replays the log into a new one
    after = again.search_memory("tiling GFlops", ["root"], limit=10)["results"]
    assert [r["entry_id"] for r in after] == [r["entry_id"] for r in before]
    assert again.health()["lag"] == 0
    tags = event_tags(again)
    assert len(tags) == 41 and set(tags.values()) == {1}
    letta = again.session.letta.projection
    block = letta.client.agents.blocks.retrieve("ari_context", agent_id=letta.agent_id)
    assert json.loads(block.value) == {"goal": "fast stencil"}


def test_killed_replay_rerun_creates_no_duplicates(on_letta, letta_server, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    backend = on_letta(ckpt)
    with backend.session.ledger.batch() as batch:
        for i in range(800):
            batch.append("root", "memory_added", {"text": f"entry {i} about cache blocking"}, current_node="root")
    backend.health()  # pushes everything once
    agent_name, client = backend.session.letta.projection.agent_name, backend.session.letta.projection.pusher
    delete_agent(backend.session.letta.projection)
    backend.close()

    env = subprocess_env(**letta_server.client_env)
    replay = subprocess.Popen(
        [sys.executable, "-m", "projections", "restore", str(ckpt)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill it half-way
        found = list(client.agents.list(name=agent_name))
        if found and len(client.agents.passages.list(found[0].id, limit=1000)) >= 200:
            break
        time.sleep(0.2)
    replay.kill()
    replay.wait()
    assert replay.returncode != 0

    rerun = subprocess.run(
        [sys.executable, "-m", "projections", "restore", str(ckpt), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["cursor"] == 800
    resumed = on_letta(ckpt)
    assert resumed.health()["lag"] == 0
    tags = event_tags(resumed)
    assert len(tags) == 800 and set(tags.values()) == {1}  # every event once, none twice


def test_letta_down_writes_succeed_and_the_lag_drains(on_letta, letta_server, tmp_path: Path) -> None:
    backend = on_letta(tmp_path / "ckpt")
    backend.start_node("root", None, [], "draft", current_node="root")
    assert backend.health()["backend"] == "letta"
    letta_harness.down()
    try:
        ids = [
            backend.add_memory("root", f"written while Letta is down {i}", current_node="root")["id"]
            for i in range(100)
        ]
        time.sleep(2.1)
        health = backend.health()
        assert health["backend"].startswith("embedded") and health["lag"] >= 100
        assert health["letta"]["ok"] is False and health["letta"]["error"]
        hits = backend.search_memory("written while Letta is down", ["root"], limit=100)["results"]
        assert len(hits) == 100  # reads fall back to the embedded engine
    finally:
        letta_harness.up()
    time.sleep(2.1)
    health = backend.health()
    assert health["backend"] == "letta" and health["lag"] == 0
    hits = backend.search_memory("written while Letta is down", ["root"], limit=100)["results"]
    assert sorted(h["entry_id"] for h in hits) == sorted(ids)


def test_agent_with_another_embedding_is_refused(
    on_letta, letta_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = on_letta(tmp_path / "ckpt")
    backend.add_memory("root", "hello", current_node="root")
    backend.health()
    backend.close()
    other = dict(letta_server.embedding_config, embedding_model="some/other-model", embedding_dim=384)
    monkeypatch.setenv("LETTA_EMBEDDING_CONFIG", json.dumps(other))
    mixed = MemoryBackend(tmp_path / "ckpt")
    with pytest.raises(EmbeddingMismatch, match=r"wordllama/l2_supercat_256.*some/other-model"):
        mixed.search_memory("hello", ["root"])
    mixed.close()


def test_demo_runs_through_letta(letta_server, tmp_path: Path) -> None:
    env = subprocess_env(**letta_server.client_env, ARI_MEMORY_SEARCH_ENGINE="letta")
    run = subprocess.run(
        [sys.executable, "-m", "projections", "demo", str(tmp_path / "d"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["backend"] == "letta"
    for row in data["scope"]:
        assert row["top_hits"] and {hit[0] for hit in row["top_hits"]} <= set(row["may_read"])
    from letta_client import Letta

    from projections.settings import checkpoint_hash

    client = Letta(base_url=letta_server.base_url, api_key=letta_server.api_key)
    agent = list(client.agents.list(name=f"ari_agent_{checkpoint_hash(tmp_path / 'd' / 'checkpoint')}"))
    assert agent and agent[0].metadata["ari_ledger"]["cursor"] > 0


def test_agent_deleted_under_a_running_backend_is_restored(on_letta, tmp_path: Path) -> None:
    backend = on_letta(tmp_path / "ckpt")
    ids = [backend.add_memory("root", f"note {i} on vectorisation", current_node="root")["id"] for i in range(10)]
    assert backend.health()["lag"] == 0
    delete_agent(backend.session.letta.projection)  # e.g. the server was emptied while ARI ran
    backend.search_memory("vectorisation", ["root"], limit=10)  # notices, falls back, forgets the agent
    time.sleep(2.1)
    hits = backend.search_memory("vectorisation", ["root"], limit=10)["results"]
    assert backend.health()["backend"] == "letta" and sorted(h["entry_id"] for h in hits) == sorted(ids)
    assert set(event_tags(backend).values()) == {1}


def test_purge_renews_the_agent_and_a_replay_skips_what_it_hid(on_letta, tmp_path: Path) -> None:
    """ARI's purge deletes the checkpoint's agent; here the projection folds the purge the same way."""
    ckpt = tmp_path / "ckpt"
    backend = on_letta(ckpt)
    for i in range(5):
        backend.add_memory("root", f"before the purge {i}", current_node="root")
    backend.react_add("Thought: before the purge")
    backend.seed_core_memory("", "", {"primary_metric": "GFlops"})
    assert backend.health()["letta"]["lag"] == 0
    old_agent = backend.session.letta.projection.agent_id
    assert backend.purge_checkpoint() == {"removed_node": 5, "removed_react": 1}
    kept = backend.add_memory("root", "after the purge", current_node="root")["id"]
    assert [r["entry_id"] for r in backend.search_memory("purge", ["root"], limit=10)["results"]] == [kept]
    letta = backend.session.letta.projection
    assert letta.agent_id != old_agent and {t[2:] for t in event_tags(backend)} == {kept}
    assert letta.client.agents.blocks.retrieve("ari_context", agent_id=letta.agent_id).value == ""
    delete_agent(letta)
    backend.close()
    again = on_letta(ckpt)  # a restore replays only what the purge left visible
    assert [r["entry_id"] for r in again.search_memory("purge", ["root"], limit=10)["results"]] == [kept]
    assert {t[2:] for t in event_tags(again)} == {kept}


def test_aris_default_embedding_handle_uses_the_offline_endpoint(
    on_letta, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ari-core sets LETTA_EMBEDDING_CONFIG=letta-default in every run; it must not break anything."""
    monkeypatch.setenv("LETTA_EMBEDDING_CONFIG", "letta-default")
    backend = on_letta(tmp_path / "ckpt")
    entry = backend.add_memory("root", "loopline model derived from STREAM", current_node="root")["id"]
    assert [
        r["entry_id"] for r in backend.search_memory("loopline performance model", ["root"], limit=1)["results"]
    ] == [entry]
    health = backend.health()
    assert health["backend"] == "letta" and health["letta"]["ok"] and health["letta"]["lag"] == 0
    agent = backend.session.letta.projection.client.agents.retrieve(backend.session.letta.projection.agent_id)
    assert agent.embedding_config.embedding_model == backend.session.projector.embedder.name
