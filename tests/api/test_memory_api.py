"""ARI's memory API (R9, R14–R16, R24, R29): one suite, run against every search engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import ConfigurationError, InvalidInput
from ledger.layout import store_dir
from ledger.log import LOG_NAME
from projections.access.log import ACCESS_LOG_NAME
from projections.api import MemoryBackend
from support.env import FIXTURES, subprocess_env


@pytest.fixture
def backend(engine_backend, ckpt: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh backend on the engine under test, with root started."""
    b = engine_backend(ckpt)
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "root")
    b.start_node("root", None, [], "draft")
    return b


def add(b, node: str, text: str, **meta):
    result = b.add_memory(node, text, meta or None, current_node=node)
    assert result["ok"], result
    return result["id"]


def start(b, node: str, ancestors: list[str]):
    assert b.start_node(node, ancestors[-1] if ancestors else None, ancestors, "improve", current_node=node)["ok"]


def test_experiment_context_is_empty_before_the_seed(backend) -> None:
    assert backend.get_experiment_context() == {}
    context = {"goal": "fast stencil", "primary_metric": "GFlops_per_s", "higher_is_better": True}
    assert backend.seed_core_memory("You are ARI.", "HPC researcher", context)["ok"]
    assert backend.get_experiment_context() == context
    assert backend.get_experiment_context(as_of=1) == {}


def test_sibling_branches_never_see_each_other(backend) -> None:
    """ARI's intent: 3 sibling branches × 50 entries; each sees root and itself only."""
    root_ids = {add(backend, "root", f"root survey note {i} about stencil kernels") for i in range(5)}
    branch_ids = {}
    for branch in ("node_A", "node_A1", "node_B"):  # node_A1 shares a prefix with node_A
        start(backend, branch, ["root"])
        branch_ids[branch] = {
            add(backend, branch, f"{branch} experiment {i}: blocking and tiling result") for i in range(50)
        }
    for branch, own in branch_ids.items():
        results = backend.search_memory("tiling result of the experiment", ["root", branch], limit=500)["results"]
        got = {r["entry_id"] for r in results}
        assert got == root_ids | own
        assert {r["node_id"] for r in results} == {"root", branch}
        scores = [r["score"] for r in results]  # the engine's rank order, the embedder's score
        assert all(a >= b - 1e-3 for a, b in zip(scores, scores[1:])) and all(0.0 <= s <= 1.0 for s in scores)
        by_node = backend.bulk_get_node_memory(["root", branch])["by_node"]
        assert {e["entry_id"] for es in by_node.values() for e in es} == root_ids | own


def test_ids_are_compared_whole(backend) -> None:
    start(backend, "acme", ["root"])
    start(backend, "acme-corp", ["root"])
    add(backend, "acme-corp", "secret of the other branch")
    assert backend.search_memory("secret", ["acme"], limit=10)["results"] == []
    assert backend.search_memory("secret", ["acm"], limit=10)["results"] == []
    assert backend.bulk_get_node_memory(["acme"])["by_node"] == {"acme": []}


def test_empty_scope_or_zero_limit_returns_nothing(backend) -> None:
    add(backend, "root", "something")
    assert backend.search_memory("something", [], limit=5) == {"results": []}
    assert backend.search_memory("something", ["root"], limit=0) == {"results": []}


def test_search_input_is_validated(backend) -> None:
    with pytest.raises(InvalidInput, match="ancestor_ids"):
        backend.search_memory("q", "root")
    with pytest.raises(InvalidInput, match="limit"):
        backend.search_memory("q", ["root"], limit=-1)
    with pytest.raises(InvalidInput, match="query"):
        backend.search_memory("bad \udc80", ["root"])


def test_cow_violation_leaves_the_ancestor_byte_identical(backend, monkeypatch: pytest.MonkeyPatch) -> None:
    add(backend, "root", "the root's plan")
    start(backend, "node_A", ["root"])
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "node_A")
    log_before = (store_dir(backend.checkpoint_dir) / LOG_NAME).read_bytes()
    root_before = backend.get_node_memory("root")
    assert backend.add_memory("root", "overwrite the plan") == {
        "ok": False,
        "error": "node_id does not match current node (CoW violation)",
    }
    assert backend.clear_node_memory("root") == {
        "removed": 0,
        "error": "node_id does not match current node (CoW violation)",
    }
    monkeypatch.delenv("ARI_CURRENT_NODE_ID")
    assert backend.add_memory("root", "x") == {"ok": False, "error": "ARI_CURRENT_NODE_ID not set"}
    assert (store_dir(backend.checkpoint_dir) / LOG_NAME).read_bytes() == log_before
    assert backend.get_node_memory("root") == root_before


def test_clear_is_a_tombstone_and_time_travel_sees_before(backend) -> None:
    first = add(backend, "root", "first note")
    add(backend, "root", "second note")
    seq_before_clear = backend.session.ledger.last_seq
    assert backend.clear_node_memory("root", current_node="root") == {"removed": 2}
    assert backend.get_node_memory("root") == {"entries": []}
    assert backend.search_memory("note", ["root"], limit=5) == {"results": []}
    later = add(backend, "root", "third note, after the clear")
    assert [e["entry_id"] for e in backend.get_node_memory("root")["entries"]] == [later]
    as_of = backend.get_node_memory("root", as_of=seq_before_clear)["entries"]
    assert [e["text"] for e in as_of] == ["first note", "second note"]
    hits = backend.search_memory("first note", ["root"], limit=5, as_of=seq_before_clear)["results"]
    assert hits[0]["entry_id"] == first and len(hits) == 2
    texts = [
        json.loads(line)
        for line in subprocess.run(
            ["zcat", str(store_dir(backend.checkpoint_dir) / LOG_NAME)], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    ]
    assert sum(1 for t in texts if t["type"] == "memory_added") == 3  # the log keeps everything


def test_get_node_memory_and_list_all_nodes_shapes(backend) -> None:
    add(backend, "root", "a", source="survey")
    start(backend, "node_A", ["root"])
    add(backend, "node_A", "b")
    entries = backend.get_node_memory("root")["entries"]
    assert entries[0]["text"] == "a" and entries[0]["metadata"] == {"source": "survey"}
    assert {"entry_id", "text", "metadata", "ts"} <= set(entries[0])
    by_node = backend.list_all_nodes()["by_node"]
    assert list(by_node) == ["root", "node_A"] and by_node["node_A"][0]["text"] == "b"


def test_react_trace_is_flat(backend) -> None:
    ids = [backend.react_add(f"Thought {i}: compile with -O{i % 4}", {"step": i})["id"] for i in range(6)]
    backend.react_add("Action: run the roofline measurement")
    everything = backend.react_get_all()
    assert [e["id"] for e in everything[:6]] == ids and len(everything) == 7
    top = backend.react_search("roofline measurement", limit=3)
    assert top[0]["content"] == "Action: run the roofline measurement" and len(top) == 3


def test_retrieval_quality_on_the_hand_written_set(backend) -> None:
    cases = json.loads((FIXTURES / "retrieval_quality.json").read_text())
    for i, case in enumerate(cases):
        node = f"case_{i}"
        start(backend, node, ["root"])
        ids = [add(backend, node, text) for text in case["entries"]]
        hits = backend.search_memory(case["query"], [node], limit=len(ids))["results"]
        assert hits[0]["entry_id"] == ids[case["relevant"]], (case["query"], hits[0]["text"])


def test_health_reports_engine_events_and_lag(backend) -> None:
    add(backend, "root", "x")
    health = backend.health()
    assert health["ok"] is True and health["events"] == 2 and health["lag"] == 0
    assert health["backend"] in ("embedded", "letta") and health["latency_ms"] >= 0


def test_restore_rebuilds_the_projection_it_is_asked_for(tmp_path: Path) -> None:
    """Without a server the local projection is the one restored; a name nobody keeps is refused."""
    backend = MemoryBackend(tmp_path)
    backend.start_node("root", None, [], "draft", current_node="root")
    add(backend, "root", "x")
    assert backend.restore() == {"name": "local", "cursor": 2, "events": 2}
    assert backend.restore(only="local")["cursor"] == 2
    with pytest.raises(ConfigurationError, match=r"no projection named 'letta' here \(this checkpoint keeps: local\)"):
        backend.restore(only="letta")
    backend.close()


WRITER = r"""
import sys
from projections.api import get_backend
b = get_backend(sys.argv[1])
print(b.add_memory("root", sys.argv[2])["id"])
"""


def test_read_your_writes_across_processes(backend) -> None:
    add(backend, "root", "written here first")
    child = subprocess.run(
        [sys.executable, "-c", WRITER, str(backend.checkpoint_dir), "written by another process: loopline model"],
        capture_output=True,
        text=True,
        env=subprocess_env(ARI_CURRENT_NODE_ID="root"),
        check=True,
    )
    new_id = child.stdout.strip()
    hits = backend.search_memory("loopline model from another process", ["root"], limit=1)["results"]
    assert hits[0]["entry_id"] == new_id


def test_access_log_records_reads_and_writes(backend, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = add(backend, "root", "logged")
    backend.search_memory("logged", ["root"], limit=1)
    backend._access.flush_and_close()  # as ARI's tests drain the queue before reading
    lines = [json.loads(x) for x in (backend.checkpoint_dir / ACCESS_LOG_NAME).read_text().splitlines()]
    write = next(x for x in lines if x["op"] == "write" and x["tool"] == "add_memory")
    assert write["entry_id"] == entry and write["node_id"] == "root" and write["collection"] == "node_scope"
    read = [x for x in lines if x["op"] == "read" and x["tool"] == "search_memory"][-1]
    assert read["query"] == "logged" and read["ancestor_ids"] == ["root"] and read["node_id"] == "root"
    assert [r["entry_id"] for r in read["results"]] == [entry] and read["results"][0]["src_node_id"] == "root"
    monkeypatch.setenv("ARI_MEMORY_ACCESS_LOG", "off")
    size = (backend.checkpoint_dir / ACCESS_LOG_NAME).stat().st_size
    backend.search_memory("logged", ["root"], limit=1)
    backend._access.flush_and_close()
    assert (backend.checkpoint_dir / ACCESS_LOG_NAME).stat().st_size == size


def test_the_retired_front_doors_warn_and_answer_with_the_same_backend(tmp_path: Path) -> None:
    import ledger
    import projections
    from projections.api import get_backend

    typed = get_backend(tmp_path / "ckpt")
    with pytest.warns(DeprecationWarning, match=r"use projections\.api\.get_backend"):
        assert ledger.get_backend(tmp_path / "ckpt") is typed
    with pytest.warns(DeprecationWarning, match=r"use projections\.api\.get_backend"):
        assert projections.get_backend(tmp_path / "ckpt") is typed
    with pytest.warns(DeprecationWarning):
        ledger.clear_backend_cache()
    assert typed.closed
