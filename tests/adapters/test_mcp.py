"""A real MCP client (the SDK's stdio client) drives the server as a subprocess (R25, R35).

The server runs on the venv's SDK (2.x) and on the 1.x line ARI's environment pins: mcp 1.x is
installed beside the venv (``tests/mcp1-requirements.txt``) and put first on the server's
PYTHONPATH only, while the client stays on 2.x; ``health`` reports which SDK served it. The skill
directory ``ari-ledger ari-skill`` writes is launched exactly as ARI launches a skill, and its
``ari_skill_memory`` shim is imported from it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from projections.adapters.demo import copy_run
from projections.api import MemoryBackend
from support.env import FIXTURES, ROOT, subprocess_env

RUN = FIXTURES / "ari_run"
RUN_ID = "run_20261128_stencil"
MCP1 = Path(sys.prefix) / "mcp1"
MCP1_REQUIREMENTS = ROOT / "tests" / "mcp1-requirements.txt"
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
#: this project's read-only tools, served beside ARI's (ari-core's seed_core_memory and react_add are not)
READ_ONLY = {"list_all_nodes", "bulk_get_node_memory", "react_search", "react_get_all", "health"}


def _sdk_major(path: Path) -> str | None:
    dist = next(iter(importlib.metadata.distributions(name="mcp", path=[str(path)])), None)
    return dist.version.split(".")[0] if dist else None


@pytest.fixture(scope="session")
def mcp1() -> Path:
    """mcp 1.x beside the venv (tests/run installs it; installed here once when missing)."""
    if _sdk_major(MCP1) != "1":
        staging = MCP1.with_name(f"mcp1.{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                str(staging),
                "-r",
                str(MCP1_REQUIREMENTS),
            ],
            check=True,
        )
        shutil.rmtree(MCP1, ignore_errors=True)
        staging.rename(MCP1)
    assert _sdk_major(MCP1) == "1"
    return MCP1


@pytest.fixture(params=["2", "1"], ids=["mcp2", "mcp1"])
def sdk(request: pytest.FixtureRequest) -> tuple[str, list[str]]:
    """(SDK major the server must run on, directories to put first on its PYTHONPATH)."""
    if request.param == "1":
        return "1", [str(request.getfixturevalue("mcp1"))]
    return "2", []


@pytest.fixture(scope="module")
def skill_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The skill directory, written by the real command line."""
    target = tmp_path_factory.mktemp("ari") / "ari-skill-memory-ledger"
    subprocess.run(
        [sys.executable, "-m", "projections", "ari-skill", str(target)],
        env=subprocess_env(),
        check=True,
        capture_output=True,
    )
    return target


def result_of(response) -> dict:
    assert not response.is_error, response.content
    if response.structured_content is not None:
        data = response.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(response.content[0].text)


class Client:
    """A session plus ``call(name, **args)`` returning the tool's result object."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, **args: Any) -> dict:
        return result_of(await self.session.call_tool(name, args))

    async def error(self, name: str, **args: Any) -> str:
        response = await self.session.call_tool(name, args)
        assert response.is_error, response
        return response.content[0].text


async def serve(params: StdioServerParameters, body) -> None:
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await body(Client(session))


# -- this project's scenario, through `python -m projections mcp` ------------------------------------------


def test_mcp_stdio_bfts_scenario(tmp_path: Path) -> None:
    experiments = copy_run(RUN, tmp_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "projections", "mcp"],
        env=subprocess_env(ARI_CHECKPOINT_DIR=str(tmp_path / "checkpoint")),
    )

    async def body(c: Client) -> None:
        names = {t.name for t in (await c.session.list_tools()).tools}
        assert names == ARI_TOOLS | READ_ONLY
        assert await c.call("get_experiment_context") == {}
        assert (await c.call("add_memory", node_id="root", text="x"))["error"] == "ARI_CURRENT_NODE_ID not set"
        for node in ("root", "node_A", "node_A1", "node_A2"):
            await c.call("_set_current_node", node_id=node)
            assert (await c.call("add_memory", node_id=node, text=f"RESULT SUMMARY of {node}: stencil GFlops"))["ok"]
            work = experiments / RUN_ID / node
            out = await c.call(
                "consolidate_node_memory", node_id=node, node_report=str(work / "node_report.json"), work_dir=str(work)
            )
            assert out["written"]
        # CoW: node_A2 is current; writing into its parent or sibling is refused
        refused = await c.call("add_memory", node_id="node_A1", text="sneaky")
        assert refused == {"ok": False, "error": "node_id does not match current node (CoW violation)"}
        # sibling isolation
        lineage = ["root", "node_A", "node_A2"]
        hits = (await c.call("search_memory", query="stencil GFlops", ancestor_ids=lineage, limit=50))["results"]
        assert hits and {h["node_id"] for h in hits} <= set(lineage)
        typed = (
            await c.call("search_research_memory", query="GFlops", ancestor_ids=lineage, kinds=["experiment_result"])
        )["results"]
        assert {h["kind"] for h in typed} == {"experiment_result"}
        target = next(h for h in typed if h["node_id"] == "node_A2")["entry_id"]
        assert (
            await c.call("add_reproducibility_event", node_id="node_A2", target_memory_id=target, status="rerun_passed")
        )["ok"]
        ctx = await c.call("get_verified_context", ancestor_ids=lineage)
        assert ctx["claims"][0]["entry_id"] == target and ctx["claims"][0]["repro_status"] == "rerun_passed"
        audit = await c.call("audit_memory", experiments_root=str(experiments), run_id=RUN_ID)
        assert audit["summary"]["mismatch"] == 0 and audit["chain"]["ok"]
        assert [r["path"] for r in audit["results"] if r["status"] == "missing"] == [
            "stencil_bench"
        ]  # node_A never kept it
        # a library error is a tool error with the library's message; the server lives on
        bad = await c.error("add_reproducibility_event", node_id="node_A2", target_memory_id=target, status="maybe")
        assert "status: unknown status 'maybe'" in bad
        assert (await c.call("health"))["ok"] is True
        # ReAct: ari-core appends in-process (its call, not the agent's); the server reads lists, as ARI's backend returns them
        core = MemoryBackend(tmp_path / "checkpoint")
        step = core.react_add("Thought: tile the k loop", {"node_id": "node_A2", "step": 3})
        core.close()
        found = await c.session.call_tool("react_search", {"query": "tile the loop", "limit": 3})
        assert not found.is_error and json.loads(found.content[0].text)["id"] == step["id"]
        trace = await c.session.call_tool("react_get_all", {})
        assert not trace.is_error and [json.loads(x.text)["id"] for x in trace.content] == [step["id"]]
        # time travel: as of seq 1 nothing had been consolidated yet
        assert (await c.call("get_node_memory", node_id="node_A2", as_of=1))["entries"] == []

    anyio.run(serve, params, body)


# -- the skill directory, launched as ARI launches a skill ---------------------------------------------


def ari_launch(skill: Path, tmp_path: Path, sdk_path: list[str], **env: str) -> StdioServerParameters:
    """ARI's ``_server_params``: ``{python} {skill}/src/server.py``, ``PYTHONPATH={skill}:{ari-core}``
    (mcp 1.x, when asked for, first), cwd elsewhere. The interpreter is this venv's, which has
    ari-memory-ledger installed, as ARI's must."""
    ari_core = tmp_path / "ari-core"
    (ari_core / "ari").mkdir(parents=True)
    (ari_core / "ari" / "__init__.py").write_text("")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    base = {k: v for k, v in subprocess_env().items() if k != "PYTHONPATH"}
    pythonpath = os.pathsep.join([*sdk_path, str(skill), str(ari_core)])
    return StdioServerParameters(
        command=sys.executable,
        args=[str(skill / "src" / "server.py")],
        env={**base, "PYTHONPATH": pythonpath, **env},
        cwd=cwd,
    )


def test_ari_skill_dir_over_stdio(skill_dir: Path, sdk: tuple[str, list[str]], tmp_path: Path) -> None:
    major, sdk_path = sdk
    experiments = copy_run(RUN, tmp_path)
    report = json.loads((experiments / RUN_ID / "node_A" / "node_report.json").read_text())
    params = ari_launch(skill_dir, tmp_path, sdk_path, ARI_CHECKPOINT_DIR=str(tmp_path / "checkpoint"))

    async def body(c: Client) -> None:
        assert (await c.call("health"))["mcp_sdk"].split(".")[0] == major
        tools = {t.name: t for t in (await c.session.list_tools()).tools}
        assert set(tools) == set(json.loads((skill_dir / "mcp.json").read_text())["tools"]) == ARI_TOOLS | READ_ONLY
        assert "object" in json.dumps(tools["add_experiment_result"].input_schema["properties"]["metric_ptr"])
        assert await c.call("get_experiment_context") == {}

        # _set_current_node: ARI's shapes; an id that cannot be a node is refused with the reason
        for bad, reason in (
            ("", "must not be empty"),
            ("node/A", "'/'"),
            ("node\x00A", "'\\x00'"),
            ("node\nA", "'\\n'"),
        ):
            out = await c.call("_set_current_node", node_id=bad)
            assert out["ok"] is False and reason in out["error"], out
        assert (await c.call("add_memory", node_id="root", text="x"))["error"] == "ARI_CURRENT_NODE_ID not set"
        assert {"ok": True, "node_id": "root"}.items() <= (await c.call("_set_current_node", node_id="root")).items()
        assert (await c.call("_set_current_node", node_id=""))["ok"] is False  # refused: the guard stays on root
        added = await c.call(
            "add_memory",
            node_id="root",
            text="RESULT SUMMARY naive baseline 2.41 GFlops/s",
            metadata={"kind": "result_summary", "step": 1},
        )
        assert added["ok"] and added["id"]
        [entry] = (await c.call("get_node_memory", node_id="root"))["entries"]
        assert (
            entry["entry_id"] == added["id"]
            and {"kind": "result_summary", "step": 1}.items() <= entry["metadata"].items()
        )
        hits = (await c.call("search_memory", query="baseline GFlops", ancestor_ids=["root"], limit=5))["results"]
        assert [h["entry_id"] for h in hits] == [added["id"]]

        # node end of node_A: ARI's hook sends the report object, the work dir and the run id
        assert (await c.call("_set_current_node", node_id="node_A"))["ok"]
        work = experiments / RUN_ID / "node_A"
        out = await c.call(
            "consolidate_node_memory", node_id="node_A", node_report=report, work_dir=str(work), run_id=RUN_ID
        )
        assert [w["kind"] for w in out["written"]] == ["experiment_result", "reflection"] and all(
            w["ok"] for w in out["written"]
        )
        assert {e["entry_id"] for e in (await c.call("get_node_memory", node_id="node_A"))["entries"]} == {
            w["id"] for w in out["written"]
        }
        again = await c.call(
            "consolidate_node_memory", node_id="node_A", node_report=report, work_dir=str(work), run_id=RUN_ID
        )
        assert again["written"] == [] and [a["id"] for a in again["already"]] == [w["id"] for w in out["written"]]
        refused = await c.call("add_memory", node_id="root", text="into the parent")
        assert refused == {"ok": False, "error": "node_id does not match current node (CoW violation)"}

        ctx = await c.call("get_verified_context", ancestor_ids=["root", "node_A"])
        claim = next(x for x in ctx["claims"] if x["node_id"] == "node_A")
        assert {"entry_id", "node_id", "text", "kind", "grounded", "artifact_refs", "repro_status"} <= set(claim)
        assert claim["grounded"] is True and "9.87" in claim["text"] and claim["repro_status"] is None
        assert claim["kind"] == "experiment_result" and claim["evidence"] == "values_checked"
        values = claim["values"]  # 16 threads (run_command), 9.87 GFlops/s, 4.1x the baseline, metric_ptr
        assert values["verdict"] == "checked" and values["checked"] == 4
        assert [n["verdict"] for n in values["numbers"]] == ["checked"] * 4
        audit = await c.call("audit_memory", experiments_root=str(experiments), run_id=RUN_ID)
        assert audit["summary"]["verified"] >= 1 and audit["summary"]["mismatch"] == 0
        assert [r["path"] for r in audit["results"] if r["status"] == "missing"] == [
            "stencil_bench"
        ]  # listed, never kept

        assert "limit: must be a non-negative integer, got -1" in await c.error(
            "search_memory", query="q", ancestor_ids=["root"], limit=-1
        )
        assert (await c.call("clear_node_memory", node_id="node_A"))["removed"] >= 1
        assert (await c.call("get_node_memory", node_id="node_A"))["entries"] == []

    anyio.run(serve, params, body)


def test_ari_experiment_result_with_metric_ptr_object(skill_dir: Path, mcp1: Path, tmp_path: Path) -> None:
    """ARI sends ``metric_ptr`` as ``{"name", "value"}`` (on its SDK line, 1.x)."""
    params = ari_launch(skill_dir, tmp_path, [str(mcp1)], ARI_CHECKPOINT_DIR=str(tmp_path / "checkpoint"))

    async def body(c: Client) -> None:
        assert (await c.call("_set_current_node", node_id="root"))["ok"]
        out = await c.call(
            "add_experiment_result",
            node_id="root",
            text="naive baseline: 2.41 GFlops/s",
            metric_ptr={"name": "GFlops_per_s", "value": 2.41},
            artifact_refs=[],
            node_report_ref={"run_id": RUN_ID, "node_id": "root"},
        )
        assert out["ok"] and out["id"]
        [entry] = (await c.call("get_node_memory", node_id="root"))["entries"]
        assert entry["entry_id"] == out["id"] and entry["metadata"]["metric_ptr"] == {
            "name": "GFlops_per_s",
            "value": 2.41,
        }

    anyio.run(serve, params, body)


def test_skill_server_names_a_missing_ledger(skill_dir: Path) -> None:
    """An interpreter without ari-memory-ledger fails at once, saying so (ARI logs the skill's stderr)."""
    env = {k: v for k, v in subprocess_env().items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-S", str(skill_dir / "src" / "server.py")],
        env={**env, "PYTHONPATH": str(skill_dir)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1 and "cannot import ari-memory-ledger" in done.stderr and "README.md" in done.stderr


# -- the drop-in ari-skill-memory distribution -------------------------------------------------------------


def test_skill_dir_installs_as_ari_skill_memory(skill_dir: Path, tmp_path: Path) -> None:
    """``pip install DIR`` (as into ARI's environment) gives the distribution ari-skill-memory with the shim."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(skill_dir)],
        check=True,
        capture_output=True,
    )
    [dist] = importlib.metadata.distributions(name="ari-skill-memory", path=[str(target)])
    assert dist.version == "0.6.0+ledger." + importlib.metadata.version("ari-memory-ledger")
    assert dist.requires == ["ari-memory-ledger>=" + importlib.metadata.version("ari-memory-ledger")]
    installed = {p.relative_to(target).as_posix() for p in target.rglob("*.py") if "__pycache__" not in p.parts}
    shipped = {
        p.relative_to(skill_dir / "src").as_posix() for p in (skill_dir / "src" / "ari_skill_memory").rglob("*.py")
    }
    assert installed == shipped and "ari_skill_memory/backends/__init__.py" in installed  # and no top-level server.py


@pytest.fixture
def shim(skill_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``import_module`` for the shim's modules, from ``DIR/src``; forgotten afterwards."""
    monkeypatch.syspath_prepend(str(skill_dir / "src"))
    yield lambda name: importlib.import_module(f"ari_skill_memory.{name}")
    for name in [m for m in sys.modules if m == "ari_skill_memory" or m.startswith("ari_skill_memory.")]:
        del sys.modules[name]


@pytest.fixture
def node_a(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryBackend]:
    """A backend with node_A consolidated from its report (node_A current)."""
    experiments = copy_run(RUN, tmp_path)
    backend = MemoryBackend(tmp_path / "checkpoint")
    backend.start_node("root", current_node="root")
    backend.start_node("node_A", parent_id="root", ancestor_ids=["root"], current_node="node_A")
    work = experiments / RUN_ID / "node_A"
    backend.consolidate_node_memory("node_A", work / "node_report.json", work, current_node="node_A")
    monkeypatch.setenv("ARI_CURRENT_NODE_ID", "node_A")
    yield backend
    backend.close()


REF = {"run_id": RUN_ID, "node_id": "node_A"}


def test_shim_context_builder_and_search_forward(shim, node_a: MemoryBackend) -> None:
    lineage = ["root", "node_A"]
    built = shim("context_builder").build_verified_context(node_a, lineage, purpose="paper", limit=1)
    assert built == node_a.get_verified_context(lineage, "paper", 1) and len(built["claims"]) == 1
    found = shim("retriever").search_research_memory(
        node_a, "GFlops", lineage, kinds=["experiment_result"], require_artifacts=True, limit=2
    )
    assert found == node_a.search_research_memory(
        "GFlops", lineage, kinds=["experiment_result"], require_artifacts=True, limit=2
    )
    assert found["results"]


def test_shim_writers_forward(shim, node_a: MemoryBackend) -> None:
    writer = shim("writer")
    target = node_a.search_research_memory("GFlops", ["root", "node_A"], kinds=["experiment_result"])["results"][0][
        "entry_id"
    ]
    written = [
        writer.add_failure_case(node_a, "node_A", "OOM at 4096^3", artifact_refs=[], node_report_ref=REF),
        writer.add_procedure_memory(node_a, "node_A", "build with make OMP=1", node_report_ref=REF),
        writer.add_reflection(node_a, "node_A", "tile the k loop next", confidence=0.4, node_report_ref=REF),
        writer.add_reproducibility_event(
            node_a, "node_A", target, "rerun_passed", artifact_refs=[], text="re-ran: 9.85 GFlops/s"
        ),
    ]
    assert all(w["ok"] for w in written)
    texts = {e["entry_id"]: e["text"] for e in node_a.get_node_memory("node_A")["entries"]}
    assert [texts[w["id"]] for w in written] == [
        "OOM at 4096^3",
        "build with make OMP=1",
        "tile the k loop next",
        "re-ran: 9.85 GFlops/s",
    ]
    # CoW is the backend's: node_A is current, so root cannot be written
    assert writer.add_failure_case(node_a, "root", "x") == {
        "ok": False,
        "error": "node_id does not match current node (CoW violation)",
    }


def test_shim_writer_ari_shapes(shim, node_a: MemoryBackend) -> None:
    writer = shim("writer")
    result = writer.add_experiment_result(
        node_a, "node_A", "9.87 GFlops/s", metric_ptr={"name": "GFlops_per_s", "value": 9.87}, node_report_ref=REF
    )
    typed = writer.add_typed_memory(node_a, "node_A", "procedure", "make OMP=1", node_report_ref=REF, extra={"step": 2})
    assert result["ok"] and typed["ok"]
    meta = {e["entry_id"]: e["metadata"] for e in node_a.get_node_memory("node_A")["entries"]}
    assert meta[result["id"]]["metric_ptr"] == {"name": "GFlops_per_s", "value": 9.87}
    assert meta[typed["id"]]["mem_kind"] == "procedure" and meta[typed["id"]]["step"] == 2


def test_shim_retriever_folds(shim, node_a: MemoryBackend) -> None:
    retriever = shim("retriever")
    [result] = retriever.ancestor_typed_memory(node_a, ["root", "node_A"], kinds=["experiment_result"])
    assert result["node_id"] == "node_A" and "9.87" in result["text"]
    assert node_a.add_reproducibility_event("node_A", result["entry_id"], "rerun_failed")["ok"]
    assert retriever.fold_reproducibility(node_a, ["root", "node_A"]) == {
        result["entry_id"]: {"status": "rerun_failed"}
    }


def test_shim_backends_is_the_ledger_factory(shim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from projections.api import backend as ledger_backend

    backends = shim("backends")
    assert backends.MemoryBackend is shim("backends.base").MemoryBackend is ledger_backend.MemoryBackend
    monkeypatch.setenv("ARI_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    first = backends.get_backend()
    assert (
        backends.get_backend(checkpoint_dir=tmp_path / "ckpt") is first is ledger_backend.get_backend(tmp_path / "ckpt")
    )
    fresh = backends.get_backend(tmp_path / "ckpt", reset=True)
    assert fresh is not first and backends.get_backend() is fresh
    backends.clear_backend_cache()
    assert backends.get_backend() is not fresh
    backends.clear_backend_cache()


# -- bad input through the server: a tool error naming the field, and the server lives on ------------------

MCP_BAD_INPUT = [
    ("add_memory", {"node_id": "a/b", "text": "x"}, "node_id: contains a forbidden character"),
    (
        "add_memory",
        {"node_id": "root", "text": "x", "metadata": {"k": "y" * (1024 * 1024 + 1)}},
        "body.metadata.k: is 1048577 bytes",
    ),
    ("search_memory", {"query": "q", "ancestor_ids": ["root"], "limit": -1}, "limit: must be a non-negative integer"),
    (
        "add_reproducibility_event",
        {"node_id": "root", "target_memory_id": "e1", "status": "maybe"},
        "status: unknown status 'maybe'",
    ),
    (
        "get_verified_context",
        {"ancestor_ids": ["root"], "min_evidence": "solid"},
        "min_evidence: unknown evidence level",
    ),
    ("audit_memory", {"experiments_root": "{experiments}", "run_id": "/etc"}, "run_id: '/etc' is not a run id"),
    (
        "consolidate_node_memory",
        {"node_id": "root", "node_report": "/dev/zero", "work_dir": "{experiments}"},
        "node_report: /dev/zero is outside",
    ),
]


def test_bad_input_is_a_tool_error_naming_the_field(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    experiments = tmp_path / "experiments"  # a root the paths must lie in (<ckpt>/../experiments)
    experiments.mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "projections", "mcp"],
        env=subprocess_env(ARI_CHECKPOINT_DIR=str(checkpoint), ARI_CURRENT_NODE_ID="root"),
    )

    async def body(c: Client) -> None:
        assert (await c.call("add_memory", node_id="root", text="before"))["ok"]
        before = (checkpoint / "memory_ledger" / "memory_ledger.jsonl.gz").read_bytes()
        for tool, args, message in MCP_BAD_INPUT:
            args = {k: str(experiments) if v == "{experiments}" else v for k, v in args.items()}
            error = await c.error(tool, **args)
            assert message in error, (tool, error)
        assert (checkpoint / "memory_ledger" / "memory_ledger.jsonl.gz").read_bytes() == before
        assert (await c.call("health"))["ok"] is True

    anyio.run(serve, params, body)
