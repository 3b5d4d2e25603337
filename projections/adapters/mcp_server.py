"""MCP server over stdio with ARI's memory tool names, argument types and result shapes.

Every tool is one call into :class:`~projections.api.backend.MemoryBackend` for the checkpoint in
``ARI_CHECKPOINT_DIR``; read tools take ``as_of`` (a seq) to answer as a node saw it then. It runs
on the MCP SDK's 2.x line (``MCPServer``) and on the 1.x line ARI's environment pins (``FastMCP``,
the same server under its old name).

Bad input is answered in one line, ``FIELD: REASON``, as the library and the command line say it,
and the server keeps running: an unknown or missing argument names the tool's arguments; a value
of the wrong JSON type names what was expected (the library's own line where the library checks
that argument); a checkpoint that cannot be one names ``ARI_CHECKPOINT_DIR`` on every call. What
the SDK's lax validation accepts (``"5"`` for an integer) is accepted, as ARI's own server does.
An answer never echoes a huge value whole nor an undecodable byte as a surrogate, and each refusal
is one line on stderr, the server's log.

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
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any

from pydantic import ValidationError, ValidatorFunctionWrapHandler, WrapValidator

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ModuleNotFoundError:  # mcp 1.x, ARI's environment: the same high-level server under its old name
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef,attr-defined]  # 1.x only
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]  # 1.x only

from ledger import InvalidInput, LedgerError, config, layout
from ledger.errors import ECHO_LIMIT, cut_echoes, kind_of, one_line, os_reason, refusal
from ledger.events import check_node_id, check_seq, check_text
from projections import settings
from projections.api import MemoryBackend, get_backend
from projections.evidence.grounding import experiments_roots, work_dir_roots

INSTRUCTIONS = "Ancestor-scoped, artifact-grounded memory of an ARI checkpoint."

#: The MCP SDK release this server runs on (``health`` reports it: ARI's environment pins 1.x).
MCP_SDK_VERSION = version("mcp")

#: The variable that names the checkpoint: the field of every refusal about it.
CHECKPOINT_ENV = "ARI_CHECKPOINT_DIR"


def _backend() -> MemoryBackend:
    """The checkpoint's backend; a path that cannot be opened is refused naming ``ARI_CHECKPOINT_DIR``."""
    try:
        return get_backend()
    except InvalidInput as exc:
        if exc.field != "checkpoint":
            raise
        raise InvalidInput(CHECKPOINT_ENV, exc.reason) from None
    except OSError as exc:  # a folder it cannot create or read: say which, as the command line does
        where = f"{exc.filename}: " if exc.filename else ""
        raise InvalidInput(CHECKPOINT_ENV, f"{where}{os_reason(exc)}") from None


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


# -- answers to bad input: one line, FIELD: REASON ---------------------------------------------------


#: Where ``str.splitlines`` breaks a line besides ``\r`` and ``\n`` (which :func:`one_line` joins).
def _long_strings(value: object) -> Iterator[str]:
    """The strings in an argument value (keys too) longer than :data:`ECHO_LIMIT`."""
    if isinstance(value, str):
        if len(value) > ECHO_LIMIT:
            yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _long_strings(key)
            yield from _long_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _long_strings(item)


def shorten(line: str, values: object) -> str:
    """``line`` as every surface shows a message (:func:`ledger.errors.one_line`), each string of
    ``values`` (a call's arguments) it echoes longer than :data:`ECHO_LIMIT` cut
    (:func:`ledger.errors.cut_echoes`): the command line's ``shorten`` for JSON arguments."""
    return one_line(cut_echoes(line, _long_strings(values)))


def said(name: str, line: str, arguments: Mapping[str, Any]) -> str:
    """A refusal of a call to ``name`` as the client gets it (:func:`shorten`), and logged as one
    line on stderr (the server's log, which ARI keeps), so the person running ARI sees it."""
    line = shorten(line, {name: arguments})
    print(f"ari-memory-ledger: refused {shorten(name, name)}: {line}", file=sys.stderr, flush=True)
    return line


def _to_library(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """The SDK's lax coercion where it applies (``"5"`` → 5, as ARI's server takes it); any other
    value as sent, for the library's own check to refuse in its words."""
    try:
        return handler(value)
    except ValidationError:
        return value


#: An argument the library checks at least as strictly as its type does, before it reads or
#: writes anything (``projections/api/checks.py``, the reproducibility status, the report): a value
#: of the wrong type reaches the library, whose line is the answer. The input schema is the type's.
LIBRARY_CHECKED = WrapValidator(_to_library)

#: The library's checks of the arguments the SDK validates, which word the answer for a value of
#: the wrong type as the library words it for the same value.
LIBRARY_WORDS: dict[str, Callable[[object, str], object]] = {
    "node_id": check_node_id,
    "query": check_text,
    "text": check_text,
    "content": check_text,
}

#: What a value of each pydantic error type should have been, in the words of JSON.
EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer (a whole number)",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "list_type": "an array",
    "dict_type": "an object",
}


@functools.cache
def _parameters(name: str) -> dict[str, inspect.Parameter]:
    """A tool's arguments, in order."""
    return dict(inspect.signature(_FUNCTIONS[name]).parameters)


def _check_call(name: str, arguments: Mapping[str, Any]) -> None:
    """Refuse, before the SDK validates anything, a checkpoint that cannot be one, an argument the
    tool does not take (a misspelt ``as_of`` would answer "now" without a word) and a missing one."""
    if (problem := checkpoint_problem()) is not None:
        raise InvalidInput(CHECKPOINT_ENV, problem)
    if settings.checkpoint_dir() is not None:
        _backend()  # one that cannot be opened (a path through a file, no permission) is said at once
    parameters = _parameters(name)
    takes = f"{name} takes {', '.join(parameters)}" if parameters else f"{name} takes no arguments"
    for key in arguments:
        if key not in parameters:
            raise InvalidInput(key, f"unknown argument ({takes})")
    for key, parameter in parameters.items():
        if parameter.default is inspect.Parameter.empty and key not in arguments:
            raise InvalidInput(key, f"required argument missing ({takes})")


def _path(field: str, loc: tuple[Any, ...], value: Any) -> tuple[str, Any]:
    """Where in an argument a pydantic error is (``ancestor_ids[1]``, ``metadata.k``, as the library
    names it), and the value there; a union's member names in ``loc`` are not places."""
    where = field
    for part in loc[1:]:
        if isinstance(part, int):
            where += f"[{part}]"
            value = value[part] if isinstance(value, list) and -len(value) <= part < len(value) else None
        elif isinstance(value, Mapping) and part in value:
            where += f".{part}"
            value = value[part]
    return where, value


def _expected(error: Mapping[str, Any]) -> str:
    return EXPECTED.get(error["type"]) or str(error["msg"]).removeprefix("Input should be ")


def _invalid(name: str, exc: ValidationError, arguments: Mapping[str, Any]) -> str:
    """The SDK's refusal of argument types as one line: the first argument (in the tool's order)
    it refused, what was expected and what came; the library's line when it checks that argument."""
    parameters = list(_parameters(name))
    errors = [e for e in exc.errors() if e["loc"] and e["loc"][0] in parameters]
    if not errors:  # none names an argument: say the first as pydantic words it
        return f"arguments: {_expected(exc.errors()[0])}"
    field = next(p for p in parameters if any(e["loc"][0] == p for e in errors))
    raw = arguments.get(field)
    if (check := LIBRARY_WORDS.get(field)) is not None:
        try:
            check(raw, field)
        except InvalidInput as refused:
            return str(refused)
    mine = [e for e in errors if e["loc"][0] == field]
    where = _path(field, mine[0]["loc"], raw)[0]
    expected = list(dict.fromkeys(_expected(e) for e in mine if _path(field, e["loc"], raw)[0] == where))
    if where == field and _parameters(name)[field].default is None:
        expected.append("null")
    return f"{where}: expected {' or '.join(expected)}, got {kind_of(mine[0]['input'])}"


def _reason(name: str, exc: BaseException, arguments: Mapping[str, Any]) -> str | None:
    """The one line a tool error stands for: the library's refusal or the SDK's validation, found
    among its causes; None for any other (an unknown tool, a crash), which the SDK answers."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, LedgerError):
            return str(cause)
        if isinstance(cause, ValidationError):
            return _invalid(name, cause, arguments)
        cause = cause.__cause__
    return None


class LedgerServer(Server):
    """The SDK's server (either line's class), whose answer to a call with bad input is one line,
    ``Error executing tool NAME: FIELD: REASON`` (the SDK's own prefix of a tool error), logged on
    stderr. The tools it serves are :attr:`served`; any other name is an unknown tool, as the SDK says it."""

    served: frozenset[str] = frozenset()

    async def call_tool(self, name: str, arguments: dict[str, Any], *rest: Any, **kwargs: Any) -> Any:
        if name not in self.served:  # the SDK's words, its name cut as any echo is
            raise ToolError(said(name, f"Unknown tool: {name}", arguments))
        try:
            _check_call(name, arguments)
            return await super().call_tool(name, arguments, *rest, **kwargs)
        except LedgerError as exc:
            line = str(exc)
        except ToolError as exc:
            found = _reason(name, exc, arguments)
            if found is None:
                raise
            line = found
        raise ToolError(f"Error executing tool {name}: {said(name, line, arguments)}")


def tool(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record ``fn`` as a tool whose library errors become tool errors and whose refusals in ARI's
    shape (a top-level ``error``) are shortened, readable and logged (:func:`build_server` serves it)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except LedgerError as exc:
            raise ToolError(str(exc)) from exc
        if isinstance(result, dict) and isinstance(result.get("error"), str):
            result = {**result, "error": said(fn.__name__, result["error"], kwargs)}
        return result

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
    names = list(names)
    built = LedgerServer("ari-memory-ledger", instructions=INSTRUCTIONS)
    built.served = frozenset(names)
    for name in names:
        built.tool(name=name)(_FUNCTIONS[name])
    return built


def _outside_lineage(field: str, ids: object) -> dict[str, Any] | None:
    """A per-node server's refusal of ids outside its node's recorded lineage (the ancestors and
    itself, as the checkpoint recorded them: only the node itself when it recorded nothing);
    None when all are inside, or on a pooled server, which has no node to check against. Ids that
    are not a list of strings are the library's to refuse, before it reads anything."""
    node = Spawn.node
    if node is None or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
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


def _seq(as_of: int | None) -> int | None:
    """``as_of``: a seq of this log, 0 to its last (the command line's ``--as-of`` rule); a seq
    past the end names no state of the log, so it is refused rather than answered as now."""
    if as_of is not None:
        check_seq(as_of, "as_of", None if as_of < 0 else _backend().seq_on_disk())
    return as_of


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
def add_memory(
    node_id: str, text: str, metadata: Annotated[dict[str, Any] | None, LIBRARY_CHECKED] = None
) -> dict[str, Any]:
    """Add a node-scope memory entry (only the current node may write its own memory)."""
    return _out(_backend().add_memory(node_id, text, metadata))


@tool
def search_memory(
    query: str,
    ancestor_ids: Annotated[list[str], LIBRARY_CHECKED],
    limit: Annotated[int, LIBRARY_CHECKED] = 5,
    as_of: int | None = None,
) -> dict[str, Any]:
    """Entries of exactly these ancestor nodes, ranked by semantic similarity to the query."""
    if refused := _outside_lineage("ancestor_ids", ancestor_ids):
        return refused
    return _out(_backend().search_memory(query, ancestor_ids, limit, as_of=_seq(as_of)))


@tool
def get_node_memory(node_id: str, as_of: int | None = None) -> dict[str, Any]:
    """A node's entries in log order."""
    if refused := _outside_lineage("node_id", [node_id]):
        return refused
    return _out(_backend().get_node_memory(node_id, as_of=_seq(as_of)))


@tool
def clear_node_memory(node_id: str) -> dict[str, Any]:
    """Tombstone the current node's own entries (the log keeps them)."""
    return _out(_backend().clear_node_memory(node_id))


@tool
def list_all_nodes(as_of: int | None = None) -> dict[str, Any]:
    """Every node with visible entries, and its entries."""
    return _out(_backend().list_all_nodes(as_of=_seq(as_of)))


@tool
def bulk_get_node_memory(node_ids: Annotated[list[str], LIBRARY_CHECKED], as_of: int | None = None) -> dict[str, Any]:
    """The entries of exactly these nodes."""
    if refused := _outside_lineage("node_ids", node_ids):
        return refused
    return _out(_backend().bulk_get_node_memory(node_ids, as_of=_seq(as_of)))


@tool
def react_add(content: str, metadata: Annotated[dict[str, Any] | None, LIBRARY_CHECKED] = None) -> dict[str, Any]:
    """Append a step to the checkpoint's flat ReAct trace (ari-core's call: ``ARI_MEMORY_MCP_ALL_TOOLS`` only)."""
    return _out(_backend().react_add(content, metadata))


@tool
def react_search(
    query: str, limit: Annotated[int, LIBRARY_CHECKED] = 10, as_of: int | None = None
) -> list[dict[str, Any]]:
    """Semantic search over the ReAct trace (no ancestor filter); a list, as ARI's backend returns."""
    return [dict(step) for step in _backend().react_search(query, limit, as_of=_seq(as_of))]


@tool
def react_get_all(as_of: int | None = None) -> list[dict[str, Any]]:
    """The whole ReAct trace in order; a list, as ARI's backend returns."""
    return [dict(step) for step in _backend().react_get_all(as_of=_seq(as_of))]


@tool
def seed_core_memory(
    persona: str, human: str, context: Annotated[dict[str, Any] | None, LIBRARY_CHECKED] = None
) -> dict[str, Any]:
    """Seed the experiment context (goal, primary metric, metric ranges, hardware, …), which the
    value checks read (ari-core's call: ``ARI_MEMORY_MCP_ALL_TOOLS`` only)."""
    return _out(_backend().seed_core_memory(persona, human, context))


@tool
def get_experiment_context(as_of: int | None = None) -> dict[str, Any]:
    """The seeded experiment context, {} before the seed."""
    return _out(_backend().get_experiment_context(as_of=_seq(as_of)))


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
    target_memory_id: Annotated[str, LIBRARY_CHECKED],
    status: Annotated[str, LIBRARY_CHECKED],
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
    ancestor_ids: Annotated[list[str], LIBRARY_CHECKED],
    kinds: Annotated[list[str] | None, LIBRARY_CHECKED] = None,
    require_artifacts: bool = False,
    limit: Annotated[int, LIBRARY_CHECKED] = 5,
    as_of: int | None = None,
) -> dict[str, Any]:
    """Typed search in exact ancestor scope, filtered by kind and artifact presence; a kind that
    is neither ARI's nor a label of this checkpoint is refused (a typo would find nothing)."""
    if refused := _outside_lineage("ancestor_ids", ancestor_ids):
        return refused
    _backend().check_kinds(kinds)
    return _out(
        _backend().search_research_memory(
            query, ancestor_ids, kinds=kinds, require_artifacts=require_artifacts, limit=limit, as_of=_seq(as_of)
        )
    )


@tool
def get_verified_context(
    ancestor_ids: Annotated[list[str], LIBRARY_CHECKED],
    purpose: str = "paper",
    limit: Annotated[int | None, LIBRARY_CHECKED] = None,
    min_evidence: str | None = None,
    as_of: int | None = None,
) -> dict[str, Any]:
    """Claims of a lineage ranked rerun_passed > grounded > ungrounded > rerun_failed, each with
    its evidence level; ``min_evidence`` keeps weaker claims out of ``usable_for_claims``."""
    if refused := _outside_lineage("ancestor_ids", ancestor_ids):
        return refused
    return _out(
        _backend().get_verified_context(ancestor_ids, purpose, limit, min_evidence=min_evidence, as_of=_seq(as_of))
    )


@tool
def audit_memory(experiments_root: str, run_id: str | None = None) -> dict[str, Any]:
    """Re-hash every artifact memory cites; check the log's hash chain. ``experiments_root``
    must be one of the checkpoint's experiments roots or inside one."""
    if refused := _outside_roots("experiments_root", experiments_root):
        return refused
    return _out(_backend().audit_memory(experiments_root, run_id))


@tool
def consolidate_node_memory(
    node_id: str,
    node_report: Annotated[dict[str, Any] | str, LIBRARY_CHECKED],
    work_dir: str,
    run_id: str | None = None,
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
    inside a checkpoint: ``ledger.layout.check_checkpoint_dir``; a path that is not UTF-8, which
    the checkpoint cannot record), in the library's words, which name the path; None when it is
    unset (a tool call then says it is needed) or can be. Read at every call, as every variable
    is, so a fixed path serves without a restart."""
    path = settings.checkpoint_dir()
    if path is None:
        return None
    try:
        layout.check_checkpoint_dir(path)
    except InvalidInput as exc:
        return exc.reason
    return layout.not_utf8(path, "the checkpoint records its paths")


def main() -> int:
    """Serve on stdin/stdout until stdin closes, the tools :func:`served_tools` picks for the
    environment the server was spawned with. A checkpoint that cannot be one does not stop it:
    every call answers why, naming ``ARI_CHECKPOINT_DIR`` (a client that saw only "Connection
    closed" would not know), and the server's log says it once per call."""
    Spawn.node = config.current_node()
    build_server(served_tools(Spawn.node, settings.mcp_all_tools())).run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
