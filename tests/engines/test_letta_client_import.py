"""The Letta client without httpx's command line (issue 30, item 1): ``import httpx`` loads its
command line, with click, rich and pygments when they are installed (~5 MB of a client), and no
request uses it. The client is made without it when httpx is not loaded yet; a process that
loaded httpx before is not touched, and httpx's command line stays importable afterwards."""

from __future__ import annotations

from support.imports import loaded_after

CLI = ("httpx._main", "click", "rich", "pygments")
MAKE = """
import os
os.environ["LETTA_BASE_URL"] = "http://127.0.0.1:9"  # made, never called
from projections.engines.letta.server import make_client
client = make_client()
assert client.agents.passages is not None
assert not any(type(f).__name__ == "_NoHttpxCommandLine" for f in sys.meta_path)
"""


def test_a_fresh_client_process_loads_no_command_line() -> None:
    assert loaded_after(MAKE, "", CLI) == dict.fromkeys(CLI, False)


def test_httpx_command_line_is_still_importable_afterwards() -> None:
    loaded = loaded_after(MAKE, "import httpx._main", CLI)
    assert loaded["httpx._main"] and loaded["click"]


def test_a_process_that_loaded_httpx_keeps_its_command_line() -> None:
    loaded = loaded_after("import httpx", MAKE + "\nimport httpx._main\nassert httpx.main is httpx._main.main", CLI)
    assert loaded == dict.fromkeys(CLI, True)
