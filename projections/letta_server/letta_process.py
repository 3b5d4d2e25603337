"""5. The Letta server itself, started through ``launcher.py`` (a program beside this module).

The launcher works around a file-descriptor bug of 0.16.7 (see its docstring). It is copied to
``<home>/letta_launcher.py`` before each start and run from there with the Letta venv's
interpreter: that path in the command line is the marker that tells this home's server from any
other process (also one started by an older harness), and the server never runs code from a
checkout that may change under it. (Not called ``letta.py``: that would shadow ``letta`` for a
launcher run in place.)
"""

from __future__ import annotations

import time
import urllib.error
from pathlib import Path
from typing import Any

from .errors import LettaHarnessError
from .install import LETTA_VERSION, letta_env
from .layout import Layout, log_tail
from .postgres import pg_uri
from .processes import HOST, http_json, port_open, spawn_detached, terminate

PROGRAM = Path(__file__).with_name("launcher.py")


def letta_marker(layout: Layout) -> str:
    """What the command line of this home's Letta server contains, and no other process's."""
    return str(layout.launcher)


def letta_health(port: int) -> dict[str, Any] | None:
    try:
        h = http_json(f"http://{HOST}:{port}/v1/health/", timeout=3)
    except (OSError, ValueError, urllib.error.URLError):
        return None
    if isinstance(h, dict) and h.get("status") == "ok" and h.get("version") == LETTA_VERSION:
        return h
    return None


def start_letta(layout: Layout, port: int, pg_port: int, timeout: float) -> tuple[int, float]:
    """Start the server and wait for ``GET /v1/health/``; returns (pid, seconds)."""
    t0 = time.monotonic()
    if port_open(port):
        raise LettaHarnessError(f"port {port} (Letta) is already taken by another program: pass --letta-port")
    layout.launcher.write_bytes(PROGRAM.read_bytes())
    log = layout.logs / "letta.log"
    proc = spawn_detached(
        [str(layout.python), str(layout.launcher), "--host", HOST, "--port", str(port)],
        log=log,
        cwd=layout.run_dir,
        env=letta_env(layout, pg_uri(pg_port)),
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LettaHarnessError(
                f"the Letta server exited during start-up (exit {proc.returncode}). "
                f"Log {log}, last lines:\n{log_tail(log)}"
            )
        if letta_health(port):
            return proc.pid, time.monotonic() - t0
        time.sleep(0.5)
    terminate(proc.pid, letta_marker(layout), grace=10)
    raise LettaHarnessError(
        f"the Letta server did not answer GET /v1/health/ with version {LETTA_VERSION} on port {port} within "
        f"{timeout:.0f} s (16-27 s is usual). Log {log}, last lines:\n{log_tail(log)}"
    )
