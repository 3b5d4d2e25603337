"""Bad input through the MCP server: one line naming the field, nothing written, a line in the log.

Driven over stdio by the SDK's own client, as ``test_mcp.py`` does, with the server on the venv's SDK
(2.x) and on the 1.x line ARI pins (``test_mcp``'s ``sdk`` fixture). Every tool the server can serve
(``ARI_MEMORY_MCP_ALL_TOOLS``) gets each class of bad input: a value of the wrong type, an argument
it does not take, a value out of range, a huge value, text a client could not have meant (U+FFFD,
which is what the stdio transport makes of undecodable bytes, and control characters), and a
missing argument. Where the library checks an argument, the answer is the library's line; where
the command line refuses the same thing, the answer is its line with the argument's name.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import test_mcp
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ledger import InvalidInput, layout
from ledger.events import check_node_id
from projections.api import MemoryBackend
from support.env import ari_ledger, subprocess_env

#: test_mcp.py's fixtures: the server on the venv's SDK (2.x), or on ARI's 1.x line installed beside it
mcp1, sdk = test_mcp.mcp1, test_mcp.sdk

LOG = Path("memory_ledger") / "memory_ledger.jsonl.gz"
HUGE = "h" * 300_000
LONG_ID = "n" * 257  # one past the library's limit of a node id
OVERSIZED = {"k": "y" * (1024 * 1024 + 1)}  # one byte past the library's limit of a JSON field
WEIRD = "as\ufffdof\x00\x7f"  # U+FFFD (an undecodable byte, as the transport delivers it), NUL, DEL
WEIRD_SHOWN = "as\ufffdof\\x00\\x7f"
PREFIX = re.compile(r"^Error executing tool [^:]+: ")
DROP = object()  # a change that leaves the argument out

#: tool -> (a valid call, {class: (the call's arguments changed, the field the answer must name)});
#: ``DROP`` leaves an argument out; ``{entry}`` and ``{experiments}`` are filled in. The valid
#: calls are never made: they would write.
ROOT = ["root"]
MATRIX: dict[str, tuple[dict[str, Any], dict[str, tuple[dict[str, Any], str]]]] = {
    "_set_current_node": (
        {"node_id": "root"},
        {
            "type": ({"node_id": 5}, "node_id"),
            "range": ({"node_id": LONG_ID}, "node_id"),
            "huge": ({"node_id": HUGE}, "node_id"),
            "missing": ({"node_id": DROP}, "node_id"),
        },
    ),
    "add_memory": (
        {"node_id": "root", "text": "x"},
        {
            "type": ({"text": 123}, "text"),
            "range": ({"metadata": OVERSIZED}, "metadata"),
            "huge": ({"node_id": HUGE}, "node_id"),
            "missing": ({"text": DROP}, "text"),
        },
    ),
    "search_memory": (
        {"query": "q", "ancestor_ids": ROOT},
        {
            "type": ({"ancestor_ids": "root"}, "ancestor_ids"),
            "range": ({"limit": -1}, "limit"),
            "huge": ({"query": HUGE}, "query"),
            "missing": ({"ancestor_ids": DROP}, "ancestor_ids"),
        },
    ),
    "get_node_memory": (
        {"node_id": "root"},
        {
            "type": ({"node_id": 5}, "node_id"),
            "range": ({"as_of": -1}, "as_of"),
            "huge": ({"as_of": 10**30}, "as_of"),
            "missing": ({"node_id": DROP}, "node_id"),
        },
    ),
    "clear_node_memory": (
        {"node_id": "root"},
        {
            "type": ({"node_id": []}, "node_id"),
            "range": ({"node_id": LONG_ID}, "node_id"),
            "huge": ({"node_id": HUGE}, "node_id"),
            "missing": ({"node_id": DROP}, "node_id"),
        },
    ),
    "list_all_nodes": (
        {},
        {
            "type": ({"as_of": "x"}, "as_of"),
            "range": ({"as_of": -1}, "as_of"),
            "huge": ({HUGE: 1}, HUGE),
        },
    ),
    "bulk_get_node_memory": (
        {"node_ids": ROOT},
        {
            "type": ({"node_ids": "root"}, "node_ids"),
            "range": ({"as_of": 10**6}, "as_of"),
            "huge": ({"node_ids": HUGE}, "node_ids"),
            "missing": ({"node_ids": DROP}, "node_ids"),
        },
    ),
    "react_add": (
        {"content": "Thought: tile the k loop"},
        {
            "type": ({"content": 1}, "content"),
            "range": ({"metadata": OVERSIZED}, "metadata"),
            "huge": ({HUGE: 1}, HUGE),
            "missing": ({"content": DROP}, "content"),
        },
    ),
    "react_search": (
        {"query": "q"},
        {
            "type": ({"limit": None}, "limit"),
            "range": ({"limit": -1}, "limit"),
            "huge": ({"query": HUGE}, "query"),
            "missing": ({"query": DROP}, "query"),
        },
    ),
    "react_get_all": (
        {},
        {
            "type": ({"as_of": [1]}, "as_of"),
            "range": ({"as_of": -1}, "as_of"),
            "huge": ({HUGE: 1}, HUGE),
        },
    ),
    "seed_core_memory": (
        {"persona": "p", "human": "h"},
        {
            "type": ({"persona": 1}, "persona"),
            "range": ({"context": OVERSIZED}, "context"),
            "huge": ({HUGE: 1}, HUGE),
            "missing": ({"human": DROP}, "human"),
        },
    ),
    "get_experiment_context": (
        {},
        {
            "type": ({"as_of": "x"}, "as_of"),
            "range": ({"as_of": 10**6}, "as_of"),
            "huge": ({HUGE: 1}, HUGE),
        },
    ),
    "add_experiment_result": (
        {"node_id": "root", "text": "x"},
        {
            "type": ({"metric_ptr": "x"}, "metric_ptr"),
            "range": ({"node_id": LONG_ID}, "node_id"),
            "huge": ({"node_id": HUGE}, "node_id"),
            "missing": ({"text": DROP}, "text"),
        },
    ),
    "add_failure_case": (
        {"node_id": "root", "text": "x"},
        {
            "type": ({"artifact_refs": "x"}, "artifact_refs"),
            "range": ({"node_id": LONG_ID}, "node_id"),
            "huge": ({"node_id": HUGE}, "node_id"),
            "missing": ({"node_id": DROP}, "node_id"),
        },
    ),
    "add_procedure_memory": (
        {"node_id": "root", "text": "x"},
        {
            "type": ({"node_report_ref": 5}, "node_report_ref"),
            "range": ({"node_id": LONG_ID}, "node_id"),
            "huge": ({"node_id": HUGE}, "node_id"),
            "missing": ({"text": DROP}, "text"),
        },
    ),
    "add_reflection": (
        {"node_id": "root", "text": "x"},
        {
            "type": ({"confidence": "high"}, "confidence"),
            "range": ({"node_id": LONG_ID}, "node_id"),
            "huge": ({"node_id": HUGE}, "node_id"),
            "missing": ({"node_id": DROP}, "node_id"),
        },
    ),
    "add_reproducibility_event": (
        {"node_id": "root", "target_memory_id": "{entry}", "status": "rerun_passed"},
        {
            "type": ({"status": 1}, "status"),
            "range": ({"status": "maybe"}, "status"),
            "huge": ({"status": HUGE}, "status"),
            "missing": ({"status": DROP}, "status"),
        },
    ),
    "search_research_memory": (
        {"query": "q", "ancestor_ids": ROOT},
        {
            "type": ({"kinds": "experiment_result"}, "kinds"),
            "range": ({"limit": -1}, "limit"),
            "huge": ({"kinds": ["k" * 300_000]}, "kinds"),
            "missing": ({"query": DROP}, "query"),
        },
    ),
    "get_verified_context": (
        {"ancestor_ids": ROOT},
        {
            "type": ({"limit": "many"}, "limit"),
            "range": ({"limit": -1}, "limit"),
            "huge": ({"min_evidence": HUGE}, "min_evidence"),
            "missing": ({"ancestor_ids": DROP}, "ancestor_ids"),
        },
    ),
    "audit_memory": (
        {"experiments_root": "{experiments}"},
        {
            "type": ({"experiments_root": 5}, "experiments_root"),
            "range": ({"experiments_root": "/\nelsewhere\r"}, "experiments_root"),  # one line all the same
            "huge": ({"experiments_root": "/" + HUGE}, "experiments_root"),
            "missing": ({"experiments_root": DROP}, "experiments_root"),
        },
    ),
    "consolidate_node_memory": (
        {"node_id": "root", "node_report": {"node_id": "root"}, "work_dir": "{experiments}"},
        {
            "type": ({"node_report": 5}, "node_report"),
            "range": ({"work_dir": "/"}, "work_dir"),
            "huge": ({"work_dir": "/" + HUGE}, "work_dir"),
            "missing": ({"work_dir": DROP}, "work_dir"),
        },
    ),
    "health": (
        {},
        {
            "huge": ({HUGE: 1}, HUGE),
        },
    ),
}
#: every tool also gets an argument it does not take (a misspelt ``as_of``) and one named with text
#: no client means (U+FFFD, control characters), answered in one readable line
EVERY_TOOL = {"unknown": ({"asof": 3}, "asof"), "not_utf8": ({WEIRD: 1}, WEIRD_SHOWN)}


def server(checkpoint: Path, sdk_path: list[str], **env: str) -> StdioServerParameters:
    """``ari-ledger mcp`` on the SDK line ``sdk_path`` names (first on the server's PYTHONPATH only)."""
    base = subprocess_env(ARI_CHECKPOINT_DIR=str(checkpoint), **env)
    base["PYTHONPATH"] = os.pathsep.join([*sdk_path, base["PYTHONPATH"]])
    return StdioServerParameters(command=sys.executable, args=["-m", "projections", "mcp"], env=base)


def serve(params: StdioServerParameters, errlog: Path, body) -> None:
    """Run ``body(session)`` against the server; its stderr (the server's log) goes to ``errlog``."""

    async def main() -> None:
        with errlog.open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await body(session)

    anyio.run(main)


async def answer(session: ClientSession, name: str, args: dict[str, Any]) -> str:
    """The one line a refused call answers: a tool error's text without the SDK's ``Error executing
    tool NAME:`` prefix, or the ``error`` of a refusal in ARI's shape. An accepted call fails."""
    response = await session.call_tool(name, args)
    if response.is_error:
        [content] = response.content
        return PREFIX.sub("", content.text)
    data = response.structured_content or json.loads(response.content[0].text)
    assert isinstance(data.get("error"), str) and data.get("ok") is not True, (name, data)
    return data["error"]


def names_the_field(line: str, field: str) -> bool:
    """The line is ``FIELD: REASON`` (the field maybe a place in it: ``kinds[0]``, ``body.metadata.k``)."""
    head = line.split(": ", 1)[0]
    return field in re.split(r"[.\[\]]", head) or head == field or head.startswith(field[:200] + "…")


def is_one_line(line: str) -> bool:
    return len(line.splitlines()) == 1 and line == line.strip() and len(line) < 2000


def filled(args: dict[str, Any], entry: str, experiments: Path) -> dict[str, Any]:
    """``args`` less the dropped ones, with ``{entry}`` and ``{experiments}`` filled in."""
    places = {"{entry}": entry, "{experiments}": str(experiments)}
    return {k: places.get(v, v) if isinstance(v, str) else v for k, v in args.items() if v is not DROP}


def calls(entry: str, experiments: Path) -> list[tuple[str, str, dict[str, Any], str]]:
    """(tool, class, arguments, field) for every bad call of the matrix."""
    return [
        (tool, kind, filled({**valid, **change}, entry, experiments), field)
        for tool, (valid, cases) in MATRIX.items()
        for kind, (change, field) in {**cases, **EVERY_TOOL}.items()
    ]


@pytest.fixture
def checkpoint(tmp_path: Path) -> tuple[Path, str]:
    """A checkpoint with the node root and one entry of it, and an experiments root beside it."""
    path = tmp_path / "checkpoint"
    (tmp_path / "experiments").mkdir()
    backend = MemoryBackend(path)
    backend.start_node("root", current_node="root")
    entry = backend.add_memory("root", "baseline: 2.41 GFlops/s", current_node="root")["id"]
    backend.close()
    return path, entry


def test_every_tool_answers_bad_input_in_one_line_naming_the_field(
    checkpoint: tuple[Path, str], sdk: tuple[str, list[str]], tmp_path: Path
) -> None:
    (path, entry), (major, sdk_path) = checkpoint, sdk
    errlog = tmp_path / "server.log"
    made = calls(entry, tmp_path / "experiments")
    answers: list[str] = []

    async def body(session: ClientSession) -> None:
        health = (await session.call_tool("health", {})).structured_content
        assert health is not None and health["mcp_sdk"].split(".")[0] == major
        assert {t.name for t in (await session.list_tools()).tools} == set(MATRIX)
        assert (await session.call_tool("_set_current_node", {"node_id": "root"})).is_error is False
        before = (path / LOG).read_bytes()
        for tool, kind, args, field in made:
            line = await answer(session, tool, args)
            assert is_one_line(line), (tool, kind, line[:300])
            assert names_the_field(line, field), (tool, kind, line[:300])
            assert "pydantic" not in line and "validation error" not in line and "\udcff" not in line, (tool, line)
            if kind == "huge":
                assert "h" * 201 not in line and "k" * 201 not in line, (tool, line[:300])
            answers.append(line)
        assert (path / LOG).read_bytes() == before  # nothing written
        assert (await session.call_tool("health", {})).structured_content["ok"] is True  # the server lives on

    serve(server(path, sdk_path, ARI_MEMORY_MCP_ALL_TOOLS="1"), errlog, body)
    logged = errlog.read_text().splitlines()
    refused = [line for line in logged if line.startswith("ari-memory-ledger: refused ")]
    assert len(refused) == len(made), "\n".join(logged[-5:])[:2000]
    for (tool, _kind, _args, _field), line, said in zip(made, answers, refused, strict=True):
        assert said.startswith(f"ari-memory-ledger: refused {tool}: ") and said.endswith(line), (said[:300], line)


def test_the_library_and_the_command_line_word_the_same_refusals(
    checkpoint: tuple[Path, str], sdk: tuple[str, list[str]], tmp_path: Path
) -> None:
    """The answer to a value the library checks is the library's line; to a kind or a seq the
    command line checks, its line, the option's name replaced by the argument's."""
    path, _entry = checkpoint
    library = MemoryBackend(path, readonly=True)

    def refused(call) -> str:
        with pytest.raises(InvalidInput) as info:
            call()
        return str(info.value)

    expected = {
        ("search_memory", "limit"): refused(lambda: library.search_memory("q", ROOT, None)),
        ("search_memory", "ancestor_ids"): refused(lambda: library.search_memory("q", "root")),
        ("search_memory", "query"): refused(lambda: library.search_memory(123, ROOT)),
        ("add_memory", "node_id"): refused(lambda: check_node_id(5)),
        ("bulk_get_node_memory", "node_ids"): refused(lambda: library.bulk_get_node_memory("root")),
        ("search_research_memory", "kinds"): refused(
            lambda: library.search_research_memory("q", ROOT, kinds="experiment_result")
        ),
    }
    library.close()
    cli_kind = ari_ledger("search", path, "q", "--as", "root", "--kind", "bogus_kind")
    cli_seq = ari_ledger("search", path, "q", "--as", "root", "--as-of", "-1")
    assert cli_kind.returncode == 2 and cli_seq.returncode == 2
    calls_ = {
        ("search_memory", "limit"): {"query": "q", "ancestor_ids": ROOT, "limit": None},
        ("search_memory", "ancestor_ids"): {"query": "q", "ancestor_ids": "root"},
        ("search_memory", "query"): {"query": 123, "ancestor_ids": ROOT},
        ("add_memory", "node_id"): {"node_id": 5, "text": "x"},
        ("bulk_get_node_memory", "node_ids"): {"node_ids": "root"},
        ("search_research_memory", "kinds"): {"query": "q", "ancestor_ids": ROOT, "kinds": "experiment_result"},
    }
    got: dict[tuple[str, str], str] = {}

    async def body(session: ClientSession) -> None:
        for key, args in calls_.items():
            got[key] = await answer(session, key[0], args)
        got["kind"] = await answer(
            session, "search_research_memory", {"query": "q", "ancestor_ids": ROOT, "kinds": ["bogus_kind"]}
        )
        got["seq"] = await answer(session, "search_memory", {"query": "q", "ancestor_ids": ROOT, "as_of": -1})

    serve(server(path, sdk[1]), tmp_path / "server.log", body)
    for key, line in expected.items():
        assert got[key] == line, key
    assert cli_kind.stderr == f"error: --kind: {got['kind'].removeprefix('kinds: ')}\n"
    assert cli_seq.stderr == f"error: --as-of: {got['seq'].removeprefix('as_of: ')}\n"


def test_what_aris_server_takes_is_taken(
    checkpoint: tuple[Path, str], sdk: tuple[str, list[str]], tmp_path: Path
) -> None:
    """ARI's server validates in pydantic's lax mode: a number as a string, a list as its JSON
    text, ``"true"`` for a boolean. Those are answered, not refused, on ARI's SDK line too."""
    path, entry = checkpoint

    async def body(session: ClientSession) -> None:
        for name, args in (
            ("search_memory", {"query": "baseline", "ancestor_ids": ROOT, "limit": "5"}),
            ("search_memory", {"query": "baseline", "ancestor_ids": '["root"]', "limit": 5.0}),
            ("search_research_memory", {"query": "q", "ancestor_ids": ROOT, "require_artifacts": "true"}),
            ("search_research_memory", {"query": "q", "ancestor_ids": ROOT, "kinds": ["experiment_result"]}),
            ("get_verified_context", {"ancestor_ids": ROOT, "limit": "2"}),
            ("get_node_memory", {"node_id": "root", "as_of": "1"}),
        ):
            response = await session.call_tool(name, args)
            assert not response.is_error, (name, response.content)
        hits = await session.call_tool("search_memory", {"query": "baseline", "ancestor_ids": ROOT, "limit": "5"})
        assert [h["entry_id"] for h in hits.structured_content["results"]] == [entry]

    serve(server(path, sdk[1]), tmp_path / "server.log", body)


def files_under(top: Path) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


def unusable(what: str, tmp_path: Path) -> tuple[Path, str]:
    """A checkpoint path that cannot be one, and the start of the line every call must answer;
    a byte of the path that is not UTF-8 is shown as ``\\xff``."""
    if what == "a path through a file":
        (tmp_path / "run.txt").write_text("not a directory")
        return tmp_path / "run.txt" / "run1", f"ARI_CHECKPOINT_DIR: {tmp_path / 'run.txt' / 'run1'}/"
    if what == "a path that is not UTF-8":
        path = tmp_path / os.fsdecode(b"run-\xff")
        path.mkdir()
        return path, f"ARI_CHECKPOINT_DIR: {layout.not_utf8(path, 'the checkpoint records its paths')}"
    path = tmp_path / os.fsdecode(b"run-\xff.txt")  # its name is not UTF-8 either
    path.write_text("not a directory")
    if what == "the ledger's own folder":
        MemoryBackend(tmp_path / "run1").close()
        path = tmp_path / "run1" / "memory_ledger"
    with pytest.raises(InvalidInput) as library:
        layout.check_checkpoint_dir(path)
    return path, f"ARI_CHECKPOINT_DIR: {library.value.reason}".replace("\udcff", "\\xff")


@pytest.mark.parametrize(
    "what", ["a file", "the ledger's own folder", "a path through a file", "a path that is not UTF-8"]
)
def test_a_checkpoint_that_cannot_be_one_is_said_by_every_call(
    what: str, sdk: tuple[str, list[str]], tmp_path: Path
) -> None:
    """The server starts (a client that saw only "Connection closed" would not know why); every
    tool answers one line naming ARI_CHECKPOINT_DIR and the library's reason, an undecodable byte
    of the path shown as ``\\xff``; nothing is created or changed, and the log says each refusal."""
    _major, sdk_path = sdk
    path, expected = unusable(what, tmp_path)
    before = files_under(tmp_path)
    errlog = tmp_path.parent / f"{tmp_path.name}.log"
    answers: list[str] = []

    async def body(session: ClientSession) -> None:
        for tool, (valid, _cases) in MATRIX.items():
            answers.append(await answer(session, tool, filled(valid, "e", tmp_path)))

    serve(server(path, sdk_path, ARI_MEMORY_MCP_ALL_TOOLS="1"), errlog, body)
    for line in answers:
        assert line.startswith(expected) and is_one_line(line) and "\udcff" not in line, (line, expected)
        assert line.endswith(": not a directory") if what == "a path through a file" else line == expected
    assert files_under(tmp_path) == before
    logged = errlog.read_text().splitlines()
    assert [line for line in logged if line.startswith("ari-memory-ledger: refused ")] == [
        f"ari-memory-ledger: refused {tool}: {line}" for tool, line in zip(MATRIX, answers, strict=True)
    ]
