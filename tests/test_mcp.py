"""A real MCP client (the SDK's stdio client) drives the server as a subprocess (R25)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conftest import FIXTURES, subprocess_env

from projections.demo import copy_run

RUN = FIXTURES / "ari_run"


def result_of(response) -> dict:
    assert not response.is_error, response.content
    if response.structured_content is not None:
        data = response.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(response.content[0].text)


async def scenario(ckpt: Path, experiments: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ledger", "mcp"], env=subprocess_env(ARI_CHECKPOINT_DIR=str(ckpt))
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = {t.name for t in (await session.list_tools()).tools}
        assert {
            "add_memory", "search_memory", "get_node_memory", "clear_node_memory", "get_experiment_context",
            "add_experiment_result", "add_failure_case", "add_procedure_memory", "add_reflection",
            "add_reproducibility_event", "search_research_memory", "get_verified_context", "audit_memory",
            "consolidate_node_memory", "_set_current_node",
        } <= names

        async def call(name: str, **args) -> dict:
            return result_of(await session.call_tool(name, args))

        assert await call("get_experiment_context") == {}
        assert (await call("add_memory", node_id="root", text="x"))["error"] == "ARI_CURRENT_NODE_ID not set"
        run = "run_20261128_stencil"
        for node, ancestors in (("root", []), ("node_A", ["root"]), ("node_A1", ["root", "node_A"]), ("node_A2", ["root", "node_A"])):
            await call("_set_current_node", node_id=node)
            assert (await call("add_memory", node_id=node, text=f"RESULT SUMMARY of {node}: stencil GFlops"))["ok"]
            work = experiments / run / node
            out = await call("consolidate_node_memory", node_id=node, node_report=str(work / "node_report.json"), work_dir=str(work))
            assert out["ok"] and out["written"]
        # CoW: node_A2 is current; writing into its parent or sibling is refused
        refused = await call("add_memory", node_id="node_A1", text="sneaky")
        assert refused == {"ok": False, "error": "node_id does not match current node (CoW violation)"}
        # sibling isolation
        hits = (await call("search_memory", query="stencil GFlops", ancestor_ids=["root", "node_A", "node_A2"], limit=50))["results"]
        assert hits and {h["node_id"] for h in hits} <= {"root", "node_A", "node_A2"}
        typed = (await call("search_research_memory", query="GFlops", ancestor_ids=["root", "node_A", "node_A2"], kinds=["experiment_result"]))["results"]
        assert {h["kind"] for h in typed} == {"experiment_result"}
        target = next(h for h in typed if h["node_id"] == "node_A2")["entry_id"]
        assert (await call("add_reproducibility_event", node_id="node_A2", target_memory_id=target, status="rerun_passed"))["ok"]
        ctx = await call("get_verified_context", ancestor_ids=["root", "node_A", "node_A2"])
        assert ctx["claims"][0]["entry_id"] == target and ctx["claims"][0]["repro_status"] == "rerun_passed"
        audit = await call("audit_memory", experiments_root=str(experiments), run_id=run)
        assert audit["summary"]["mismatch"] == 0 and audit["summary"]["missing"] == 0 and audit["chain"]["ok"]
        # a library error is a tool error with the library's message; the server lives on
        bad = await session.call_tool("add_reproducibility_event", {"node_id": "node_A2", "target_memory_id": target, "status": "maybe"})
        assert bad.is_error and "status: unknown status 'maybe'" in bad.content[0].text
        assert (await call("health"))["ok"] is True
        # time travel: as of seq 1 nothing had been consolidated yet
        assert (await call("get_node_memory", node_id="node_A2", as_of=1))["entries"] == []


def test_mcp_stdio_bfts_scenario(tmp_path: Path) -> None:
    experiments = copy_run(RUN, tmp_path)
    anyio.run(scenario, tmp_path / "checkpoint", experiments)
