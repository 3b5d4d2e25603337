"""The MCP server is ARI's skill, not a side door around the guard (issue 27, item 5).

Driven over stdio by the SDK's own client, as ``test_mcp.py`` does: the default tool list is
ARI's plus named read-only tools (ari-core's ``seed_core_memory`` and ``react_add`` only with
``ARI_MEMORY_MCP_ALL_TOOLS``); a server spawned for one node (``ARI_CURRENT_NODE_ID`` in its
environment) keeps its guard there and reads only that node's recorded lineage; ``work_dir``
and ``experiments_root`` stay inside the checkpoint's experiments roots.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from projections.adapters.demo import copy_run
from projections.api import MemoryBackend
from projections.evidence.grounding import experiments_roots
from support.env import FIXTURES, subprocess_env

RUN_ID = "run_20261128_stencil"
OPT_IN = "ARI_MEMORY_MCP_ALL_TOOLS"

#: the tools ARI's own server serves (kotama7/ARI ari-skill-memory/src/server.py, every @mcp.tool())
ARI_TOOLS = {
    "add_memory",
    "search_memory",
    "get_node_memory",
    "clear_node_memory",
    "get_experiment_context",
    "add_experiment_result",
    "add_failure_case",
    "add_procedure_memory",
    "add_reflection",
    "add_reproducibility_event",
    "search_research_memory",
    "get_verified_context",
    "audit_memory",
    "consolidate_node_memory",
    "_set_current_node",
}
#: this project's read-only additions, served by default
READ_ONLY = {"list_all_nodes", "bulk_get_node_memory", "react_search", "react_get_all", "health"}
#: the read-only additions that cannot be confined to one lineage (not served by a per-node server)
UNSCOPED = {"list_all_nodes", "react_search", "react_get_all"}
#: ari-core's in-process calls, never the agent's: served only with the opt-in
CORE_ONLY = {"seed_core_memory", "react_add"}


def params(checkpoint: Path, **env: str) -> StdioServerParameters:
    base = {k: v for k, v in subprocess_env().items() if k != OPT_IN}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "projections", "mcp"],
        env={**base, "ARI_CHECKPOINT_DIR": str(checkpoint), **env},
    )


async def listed(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


async def call(session: ClientSession, name: str, **args: Any) -> Any:
    response = await session.call_tool(name, args)
    assert not response.is_error, response.content
    if response.structured_content is not None:
        data = response.structured_content
        return data["result"] if set(data) == {"result"} else data
    return json.loads(response.content[0].text)


def run(server: StdioServerParameters, body) -> None:
    async def main() -> None:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session)

    anyio.run(main)


def log_bytes(checkpoint: Path) -> bytes | None:
    path = checkpoint / "memory_ledger" / "memory_ledger.jsonl.gz"
    return path.read_bytes() if path.exists() else None


# -- the tool list ---------------------------------------------------------------------------------------


def test_default_tools_are_aris_plus_read_only_and_core_tools_need_the_opt_in(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"

    async def default(session: ClientSession) -> None:
        assert await listed(session) == ARI_TOOLS | READ_ONLY
        for name in CORE_ONLY:  # not served: the SDK's unknown-tool error, nothing written
            response = await session.call_tool(name, {"content": "x", "persona": "", "human": ""})
            assert response.is_error and name in response.content[0].text
        assert log_bytes(checkpoint) is None

    run(params(checkpoint), default)

    async def opted_in(session: ClientSession) -> None:
        assert await listed(session) == ARI_TOOLS | READ_ONLY | CORE_ONLY
        assert (await call(session, "react_add", content="Thought: tile the k loop"))["ok"]

    run(params(checkpoint, **{OPT_IN: "1"}), opted_in)


# -- a server spawned for one node -----------------------------------------------------------------------


def test_a_node_fixed_at_spawn_keeps_the_guard(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    backend = MemoryBackend(checkpoint)
    kept = backend.add_memory("node_B", "node_B's result", current_node="node_B")["id"]
    backend.close()
    before = log_bytes(checkpoint)

    async def body(session: ClientSession) -> None:
        refused = await call(session, "_set_current_node", node_id="node_B")
        assert refused["ok"] is False and "node_A" in refused["error"] and "node_B" in refused["error"]
        # the guard stayed on node_A: node_B's memory can be neither cleared nor written
        assert (await call(session, "clear_node_memory", node_id="node_B"))["removed"] == 0
        cow = await call(session, "add_memory", node_id="node_B", text="sneaky")
        assert cow == {"ok": False, "error": "node_id does not match current node (CoW violation)"}
        assert log_bytes(checkpoint) == before
        # moving it to where it is is ARI's call and answers as ARI's
        assert {"ok": True, "node_id": "node_A"}.items() <= (
            await call(session, "_set_current_node", node_id="node_A")
        ).items()
        assert (await call(session, "add_memory", node_id="node_A", text="node_A's own"))["ok"]

    run(params(checkpoint, ARI_CURRENT_NODE_ID="node_A"), body)
    after = MemoryBackend(checkpoint)
    assert [e["entry_id"] for e in after.get_node_memory("node_B")["entries"]] == [kept]
    after.close()


def tree(checkpoint: Path) -> None:
    """root → node_A → {node_A1, node_A2}, recorded, one entry each."""
    backend = MemoryBackend(checkpoint)
    for node, ancestors in (
        ("root", []),
        ("node_A", ["root"]),
        ("node_A1", ["root", "node_A"]),
        ("node_A2", ["root", "node_A"]),
    ):
        parent = ancestors[-1] if ancestors else None
        backend.start_node(node, parent_id=parent, ancestor_ids=ancestors, current_node=node)
        backend.add_memory(node, f"RESULT SUMMARY of {node}: stencil GFlops", current_node=node)
    backend.close()


def test_a_per_node_server_reads_only_the_recorded_lineage(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    tree(checkpoint)

    async def per_node(session: ClientSession) -> None:
        assert await listed(session) == (ARI_TOOLS | READ_ONLY) - UNSCOPED
        sibling = ["root", "node_A", "node_A1"]
        for name, args in (
            ("search_memory", {"query": "stencil GFlops", "ancestor_ids": sibling, "limit": 10}),
            ("search_research_memory", {"query": "stencil GFlops", "ancestor_ids": sibling}),
            ("get_verified_context", {"ancestor_ids": sibling}),
            ("get_node_memory", {"node_id": "node_A1"}),
            ("bulk_get_node_memory", {"node_ids": ["node_A", "node_A1"]}),
        ):
            out = await call(session, name, **args)
            assert set(out) == {"ok", "error"} and out["ok"] is False, (name, out)
            assert "node_A1" in out["error"] and "root, node_A, node_A2" in out["error"], (name, out)
        # the lineage, or a part of it, is answered
        hits = (
            await call(session, "search_memory", query="stencil GFlops", ancestor_ids=["root", "node_A", "node_A2"])
        )["results"]
        assert {h["node_id"] for h in hits} == {"root", "node_A", "node_A2"}
        hits = (await call(session, "search_memory", query="stencil GFlops", ancestor_ids=["node_A"]))["results"]
        assert {h["node_id"] for h in hits} == {"node_A"}
        assert (await call(session, "get_node_memory", node_id="node_A2"))["entries"]

    run(params(checkpoint, ARI_CURRENT_NODE_ID="node_A2"), per_node)

    async def pooled(session: ClientSession) -> None:
        """ARI's pooled server has no node of its own: ancestor_ids is the caller's word."""
        assert await listed(session) == ARI_TOOLS | READ_ONLY
        hits = (
            await call(session, "search_memory", query="stencil GFlops", ancestor_ids=["root", "node_A", "node_A1"])
        )["results"]
        assert "node_A1" in {h["node_id"] for h in hits}

    run(params(checkpoint), pooled)


# -- paths ------------------------------------------------------------------------------------------------


def test_work_dir_and_experiments_root_stay_in_the_experiments_roots(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    experiments = copy_run(FIXTURES / "ari_run", tmp_path)  # <ckpt>/../experiments
    report = json.loads((experiments / RUN_ID / "node_A" / "node_report.json").read_text())
    (experiments / "escape").symlink_to("/")
    roots = [str(r) for r in experiments_roots(checkpoint)]

    async def body(session: ClientSession) -> None:
        assert (await call(session, "health"))["ok"] and (await call(session, "_set_current_node", node_id="node_A"))[
            "ok"
        ]
        before = log_bytes(checkpoint)
        for bad in ("/", str(experiments / ".."), str(experiments / "escape" / "etc"), "relative/dir"):
            out = await call(session, "consolidate_node_memory", node_id="node_A", node_report=report, work_dir=bad)
            assert set(out) == {"ok", "error", "written"} and out["ok"] is False and out["written"] == [], out
            assert out["error"].startswith("work_dir: ") and all(r in out["error"] for r in roots), out
            out = await call(session, "audit_memory", experiments_root=bad)
            assert set(out) == {"ok", "error"} and out["ok"] is False, out
            assert out["error"].startswith("experiments_root: ") and all(r in out["error"] for r in roots), out
        assert log_bytes(checkpoint) == before
        # the node's own work dir, and the root ARI's layout puts it in, are served as before
        work = experiments / RUN_ID / "node_A"
        out = await call(
            session, "consolidate_node_memory", node_id="node_A", node_report=report, work_dir=str(work), run_id=RUN_ID
        )
        assert out["ok"] and [w["kind"] for w in out["written"]] == ["experiment_result", "reflection"]
        audit = await call(session, "audit_memory", experiments_root=str(experiments), run_id=RUN_ID)
        assert audit["summary"]["verified"] >= 1 and audit["summary"]["mismatch"] == 0

    run(params(checkpoint), body)


def test_work_dir_may_be_where_any_of_aris_layouts_puts_it(tmp_path: Path) -> None:
    """Issue 39: ARI's path resolver reads a bucketed layout (``<workspace>/runs/<run_id>/workspace/
    <node_id>``) and ARI's own memory-skill test passes the checkpoint itself as ``work_dir``; each
    is served, in ARI's shape. Beside them, a folder of no layout is still refused, in ARI's shape
    too (``written`` present, so ARI's caller never fails on a missing key)."""
    report = {
        "node_id": "nX",
        "status": "success",
        "metrics": {"GB_per_s": 842.1},
        "self_assessment": {"headline": "tile=32 best throughput"},
        "files_changed": {},
        "artifacts": [],
        "next_steps_hints": ["try K=64"],
    }
    workspace = tmp_path / "ws"
    cases = {
        # checkpoint → the work dirs its layouts allow
        workspace / "checkpoints" / "run_1": [
            workspace / "runs" / "run_1" / "workspace" / "nX",
            workspace / "experiments" / "run_1" / "nX",
            workspace / "checkpoints" / "run_1",
        ],
        workspace / "runs" / "run_2" / "checkpoints": [workspace / "runs" / "run_2" / "workspace" / "nX"],
    }
    for checkpoint, work_dirs in cases.items():
        for work in work_dirs:
            work.mkdir(parents=True, exist_ok=True)
        outside = tmp_path / "elsewhere" / "nX"
        outside.mkdir(parents=True, exist_ok=True)

        async def body(
            session: ClientSession,
            checkpoint: Path = checkpoint,
            work_dirs: list[Path] = work_dirs,
            outside: Path = outside,
        ) -> None:
            assert (await call(session, "_set_current_node", node_id="nX"))["ok"]
            for n, work in enumerate(work_dirs):
                mine = dict(report, metrics={"GB_per_s": 842.1 + n})  # a new report each time: no "already"
                out = await call(session, "consolidate_node_memory", node_id="nX", node_report=mine, work_dir=str(work))
                assert out["ok"] and {w["kind"] for w in out["written"]} >= {"experiment_result", "reflection"}, (
                    work,
                    out,
                )
            before = log_bytes(checkpoint)
            out = await call(
                session, "consolidate_node_memory", node_id="nX", node_report=report, work_dir=str(outside)
            )
            assert out["ok"] is False and out["written"] == [] and out["error"].startswith("work_dir: "), out
            assert log_bytes(checkpoint) == before

        run(params(checkpoint), body)
