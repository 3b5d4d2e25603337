"""MCP server over stdio with ARI's memory tool names, argument types and result shapes.

Every tool is one call into :class:`~projections.api.backend.MemoryBackend` for the checkpoint in
``ARI_CHECKPOINT_DIR``; read tools take ``as_of`` (a seq) to answer as a node saw it then. Library
errors come back as tool errors carrying the library's message; the server keeps running. It runs
on the MCP SDK's 2.x line (``MCPServer``) and on the 1.x line ARI's environment pins (``FastMCP``,
the same server under its old name).

The server is ARI's skill, not a door around the guard. By default it serves ARI's own tools
(:data:`ARI_TOOLS`) and read-only ones (:data:`READ_ONLY_TOOLS`); ari-core's in-process calls
(:data:`CORE_TOOLS`: the seed the value checks use, the ReAct trace) only with
``ARI_MEMORY_MCP_ALL_TOOLS``. ``work_dir`` and ``experiments_root`` must lie in the checkpoint's
experiments roots. A pooled server (ARI's: no node at spawn) lets ``_set_current_node`` move the
copy-on-write guard to the node now running, as ARI's does; a server spawned for one node
(``ARI_CURRENT_NODE_ID`` in its environment) keeps the guard on it and reads only that node's
recorded lineage.

    ari-ledger mcp          (or: python -m projections.adapters.mcp_server)
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ModuleNotFoundError:  # mcp 1.x, ARI's environment: the same high-level server under its old name
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef,attr-defined]  # 1.x only
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]  # 1.x only

from ledger import InvalidInput, LedgerError, config, layout
from ledger.errors import refusal
from ledger.events import check_node_id
from projections import settings
from projections.api import MemoryBackend, get_backend
from projections.evidence.grounding import experiments_roots, work_dir_roots

INSTRUCTIONS = "Ancestor-scoped, artifact-grounded memory of an ARI checkpoint."

#: The MCP SDK release this server runs on (``health`` reports it: ARI's environment pins 1.x).
MCP_SDK_VERSION = version("mcp")


def _backend() -> MemoryBackend:
    return get_backend()


def _out(result: Mapping[str, object]) -> dict[str, Any]:
    """A result as the plain JSON object a tool returns (shapes are TypedDicts, i.e. dicts)."""
    return dict(result)


#: ARI's own tools (``ari-skill-memory/src/server.py``), served with ARI's names and semantics.
ARI_TOOLS = (
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
)
#: This project's read-only tools, served beside ARI's.
READ_ONLY_TOOLS = ("list_all_nodes", "bulk_get_node_memory", "react_search", "react_get_all", "health")
#: Read-only tools that answer for the whole checkpoint, so a server spawned for one node (which
#: reads only that node's lineage) does not serve them.
UNSCOPED_TOOLS = ("list_all_nodes", "react_search", "react_get_all")
#: ari-core's calls, made in-process (``agent/loop.py`` seeds the goal, primary metric and metric
#: ranges the value checks use; ``memory/letta_client.py`` appends the ReAct trace), never the
#: agent's: served only with ``ARI_MEMORY_MCP_ALL_TOOLS``.
CORE_TOOLS = ("react_add", "seed_core_memory")

#: Every tool's name in registration order, and its function (wrapped: library errors become tool errors).
TOOLS: list[str] = []
_FUNCTIONS: dict[str, Callable[..., Any]] = {}


class Spawn:
    """What the server was started with: the node fixed at spawn (``ARI_CURRENT_NODE_ID`` in its
    environment), or None for a pooled server. Set by :func:`main`; in-process callers get None."""

    node: str | None = None


def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record ``fn`` as a tool whose library errors become tool errors (:func:`build_server` serves it)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LedgerError as exc:
            raise ToolError(str(exc)) from exc

    _FUNCTIONS[fn.__name__] = wrapper
    TOOLS.append(fn.__name__)
    return fn


def served_tools(spawn_node: str | None = None, all_tools: bool = False) -> list[str]:
    """The tools a server serves, in registration order: every one with ``all_tools``
    (``ARI_MEMORY_MCP_ALL_TOOLS``); else ARI's and the read-only ones, less the unscoped ones
    when the server was spawned for a node."""
    if all_tools:
        return list(TOOLS)
    return [n for n in TOOLS if n not in CORE_TOOLS and not (spawn_node and n in UNSCOPED_TOOLS)]


def build_server(names: Iterable[str]) -> Any:
    """An MCP server (either SDK line's class) serving the named tools."""
    built = Server("ari-memory-ledger", instructions=INSTRUCTIONS)
    for name in names:
        built.tool(name=name)(_FUNCTIONS[name])
    return built


def _outside_lineage(field: str, ids: Iterable[str]) -> dict[str, Any] | None:
    """A per-node server's refusal of ids outside its node's recorded lineage (the ancestors and
    itself, as the checkpoint recorded them: only the node itself when it recorded nothing);
    None when all are inside, or on a pooled server, which has no node to check against."""
    node = Spawn.node
    if node is None:
        return None
    lineage = _backend().lineage(node) or [node]
    outside = [i for i in dict.fromkeys(ids) if i not in lineage]
    if not outside:
        return None
    return refusal(
        f"{field}: {', '.join(map(repr, outside))} not in the recorded lineage of node {node!r} "
        f"({', '.join(lineage)}); this server was spawned for that node and reads only its lineage"
    )


def _outside_roots(field: str, path: str, *, work_dir: bool = False) -> dict[str, Any] | None:
    """The refusal of a path (symlinks followed) that is not one of the checkpoint's experiments
    roots or inside one (:func:`~projections.evidence.grounding.experiments_roots`); None when it is.
    A node's ``work_dir`` may also be where ARI's other layouts put it
    (:func:`~projections.evidence.grounding.work_dir_roots`), or the checkpoint itself (ARI's own
    memory-skill test passes it), never a folder of the checkpoint's memory."""
    checkpoint = _backend().checkpoint_dir
    roots = work_dir_roots(checkpoint) if work_dir else experiments_roots(checkpoint)
    try:
        where = Path(path).resolve()
        inside = any(where.is_relative_to(root.resolve()) for root in roots)
        inside = inside or (work_dir and where == Path(checkpoint).resolve())
    except (OSError, ValueError):  # a NUL, a symlink loop: no place to serve
        inside = False
    if inside:
        return None
    shown = ", ".join(map(str, roots)) + (f", or the checkpoint {checkpoint}" if work_dir else "")
    return refusal(f"{field}: {path} is outside the checkpoint's experiments roots ({shown})")


@tool
def _set_current_node(node_id: str) -> dict[str, Any]:
    """Set the node allowed to write (the copy-on-write guard) for this server process.

    ARI's shapes: ``{"ok": True, "node_id": id}``, or ``{"ok": False, "error": reason}`` for an
    id that cannot be a node (empty, ``/``, NUL, control characters), which leaves the guard as it
    was. A server spawned for a node keeps the guard there: another node is refused the same way.
    """
    try:
        check_node_id(node_id)
    except InvalidInput as exc:
        return refusal(str(exc))
    if Spawn.node is not None and node_id != Spawn.node:
        return refusal(
            f"node_id: this server was spawned for node {Spawn.node!r} (ARI_CURRENT_NODE_ID); "
            f"its guard does not move to {node_id!r}"
        )
    config.set_current_node(node_id)
    return {"ok": True, "node_id": node_id, "current_node": config.current_node()}


@tool
def add_memory(node_id: str, text: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Add a node-scope memory entry (only the current node may write its own memory)."""
    return _out(_backend().add_memory(node_id, text, metadata))


@tool
def search_memory(query: str, ancestor_ids: list[str], limit: int = 5, as_of: int | None = None) -> dict[str, Any]:
    """Entries of exactly these ancestor nodes, ranked by semantic similarity to the query."""
    if refused := _outside_lineage("ancestor_ids", ancestor_ids):
        return refused
    return _out(_backend().search_memory(query, ancestor_ids, limit, as_of=as_of))


@tool
def get_node_memory(node_id: str, as_of: int | None = None) -> dict[str, Any]:
    """A node's entries in log order."""
    if refused := _outside_lineage("node_id", [node_id]):
        return refused
    return _out(_backend().get_node_memory(node_id, as_of=as_of))


@tool
def clear_node_memory(node_id: str) -> dict[str, Any]:
    """Tombstone the current node's own entries (the log keeps them)."""
    return _out(_backend().clear_node_memory(node_id))


@tool
def list_all_nodes(as_of: int | None = None) -> dict[str, Any]:
    """Every node with visible entries, and its entries."""
    return _out(_backend().list_all_nodes(as_of=as_of))


@tool
def bulk_get_node_memory(node_ids: list[str], as_of: int | None = None) -> dict[str, Any]:
    """The entries of exactly these nodes."""
    if refused := _outside_lineage("node_ids", node_ids):
        return refused
    return _out(_backend().bulk_get_node_memory(node_ids, as_of=as_of))


@tool
def react_add(content: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Append a step to the checkpoint's flat ReAct trace (ari-core's call: ``ARI_MEMORY_MCP_ALL_TOOLS`` only)."""
    return _out(_backend().react_add(content, metadata))


@tool
def react_search(query: str, limit: int = 10, as_of: int | None = None) -> list[dict[str, Any]]:
    """Semantic search over the ReAct trace (no ancestor filter); a list, as ARI's backend returns."""
    return [dict(step) for step in _backend().react_search(query, limit, as_of=as_of)]


@tool
def react_get_all(as_of: int | None = None) -> list[dict[str, Any]]:
    """The whole ReAct trace in order; a list, as ARI's backend returns."""
    return [dict(step) for step in _backend().react_get_all(as_of=as_of)]


@tool
def seed_core_memory(persona: str, human: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """Seed the experiment context (goal, primary metric, metric ranges, hardware, …), which the
    value checks read (ari-core's call: ``ARI_MEMORY_MCP_ALL_TOOLS`` only)."""
    return _out(_backend().seed_core_memory(persona, human, context))


@tool
def get_experiment_context(as_of: int | None = None) -> dict[str, Any]:
    """The seeded experiment context, {} before the seed."""
    return _out(_backend().get_experiment_context(as_of=as_of))


@tool
def add_experiment_result(
    node_id: str,
    text: str,
    metric_ptr: dict[str, Any] | None = None,
    artifact_refs: list[dict[str, Any]] | None = None,
    node_report_ref: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A typed, artifact-grounded experiment result."""
    return _out(
        _backend().add_experiment_result(
            node_id, text, metric_ptr=metric_ptr, artifact_refs=artifact_refs, node_report_ref=node_report_ref
        )
    )


@tool
def add_failure_case(
    node_id: str,
    text: str,
    artifact_refs: list[dict[str, Any]] | None = None,
    node_report_ref: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A typed failure case (becomes a limitation, never a claim)."""
    return _out(
        _backend().add_failure_case(node_id, text, artifact_refs=artifact_refs, node_report_ref=node_report_ref)
    )


@tool
def add_procedure_memory(
    node_id: str,
    text: str,
    artifact_refs: list[dict[str, Any]] | None = None,
    node_report_ref: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A typed procedure (how something was done)."""
    return _out(
        _backend().add_procedure_memory(node_id, text, artifact_refs=artifact_refs, node_report_ref=node_report_ref)
    )


@tool
def add_reflection(
    node_id: str, text: str, confidence: float | None = None, node_report_ref: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A typed reflection (low confidence, never a claim)."""
    return _out(_backend().add_reflection(node_id, text, confidence=confidence, node_report_ref=node_report_ref))


@tool
def add_reproducibility_event(
    node_id: str,
    target_memory_id: str,
    status: str,
    artifact_refs: list[dict[str, Any]] | None = None,
    text: str | None = None,
) -> dict[str, Any]:
    """Append a re-run status for a memory in the writer's scope."""
    return _out(
        _backend().add_reproducibility_event(node_id, target_memory_id, status, artifact_refs=artifact_refs, text=text)
    )


@tool
def search_research_memory(
    query: str,
    ancestor_ids: list[str],
    kinds: list[str] | None = None,
    require_artifacts: bool = False,
    limit: int = 5,
    as_of: int | None = None,
) -> dict[str, Any]:
    """Typed search in exact ancestor scope, filtered by kind and artifact presence."""
    if refused := _outside_lineage("ancestor_ids", ancestor_ids):
        return refused
    return _out(
        _backend().search_research_memory(
            query, ancestor_ids, kinds=kinds, require_artifacts=require_artifacts, limit=limit, as_of=as_of
        )
    )


@tool
def get_verified_context(
    ancestor_ids: list[str],
    purpose: str = "paper",
    limit: int | None = None,
    min_evidence: str | None = None,
    as_of: int | None = None,
) -> dict[str, Any]:
    """Claims of a lineage ranked rerun_passed > grounded > ungrounded > rerun_failed, each with
    its evidence level; ``min_evidence`` keeps weaker claims out of ``usable_for_claims``."""
    if refused := _outside_lineage("ancestor_ids", ancestor_ids):
        return refused
    return _out(_backend().get_verified_context(ancestor_ids, purpose, limit, min_evidence=min_evidence, as_of=as_of))


@tool
def audit_memory(experiments_root: str, run_id: str | None = None) -> dict[str, Any]:
    """Re-hash every artifact memory cites; check the log's hash chain. ``experiments_root``
    must be one of the checkpoint's experiments roots or inside one."""
    if refused := _outside_roots("experiments_root", experiments_root):
        return refused
    return _out(_backend().audit_memory(experiments_root, run_id))


@tool
def consolidate_node_memory(
    node_id: str, node_report: dict[str, Any] | str, work_dir: str, run_id: str | None = None
) -> dict[str, Any]:
    """node_report.json (object or path) → typed entries with provenance, once per report.
    ``work_dir`` must be one of the checkpoint's experiments roots or inside one."""
    if refused := _outside_roots("work_dir", work_dir, work_dir=True):
        return {**refused, "written": []}  # ARI's caller reads "written" whatever happened
    return _out(_backend().consolidate_node_memory(node_id, node_report, work_dir, run_id))


@tool
def health() -> dict[str, Any]:
    """Engine, events in the log and projection lag; ``mcp_sdk`` is the SDK release serving this."""
    return {**_backend().health(), "mcp_sdk": MCP_SDK_VERSION}


def checkpoint_problem() -> str | None:
    """Why ``ARI_CHECKPOINT_DIR`` cannot be served (a file, the ledger's own folder, a folder
    inside a checkpoint: ``ledger.layout.check_checkpoint_dir``), as one line naming the variable
    and the path; None when it is unset (a tool call then says it is needed) or can be."""
    path = settings.checkpoint_dir()
    if path is None:
        return None
    try:
        layout.check_checkpoint_dir(path)
    except InvalidInput as exc:
        return f"ARI_CHECKPOINT_DIR={path}: {exc.reason}"
    return None


def main() -> int:
    """Serve on stdin/stdout until stdin closes, the tools :func:`served_tools` picks for the
    environment the server was spawned with; refuse at once (one ``error:`` line on stderr,
    exit 2) a checkpoint that cannot be one, before any client waits on tools that would fail."""
    problem = checkpoint_problem()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    Spawn.node = config.current_node()
    build_server(served_tools(Spawn.node, settings.mcp_all_tools())).run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
