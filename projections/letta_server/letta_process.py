"""5. The Letta server itself, started through ``launcher.py`` (a program beside this module).

The launcher works around a file-descriptor bug of 0.16.7 (see its docstring). It is copied to
``<home>/letta_launcher.py`` before each start and run from there with the Letta venv's
interpreter: that path in the command line is the marker that tells this home's server from any
other process (also one started by an older harness), and the server never runs code from a
checkout that may change under it. (Not called ``letta.py``: that would shadow ``letta`` for a
launcher run in place.)

Owner only: the server runs as the service user (``nobody`` when root runs the harness: its
``/v1/tools/run`` executes Python as that user) with Letta's own password check on
(``LETTA_SERVER_SECURE``/``LETTA_SERVER_PASSWORD``; every route but health wants
``Authorization: Bearer <password>``, which letta-client sends from ``LETTA_API_KEY``). The
embedding endpoint's key reaches the launcher as ``ARI_LETTA_EMBED_KEY`` (see launcher.py).
"""

from __future__ import annotations

import os
import time
import urllib.error
from pathlib import Path
from typing import Any

from .credentials import Credentials
from .errors import LettaHarnessError
from .install import LETTA_VERSION, letta_env
from .layout import Layout, log_tail
from .postgres import letta_pg_uri, socket_dir
from .processes import HOST, http_json, http_status, port_open, spawn_detached, terminate
from .service import as_service_user, own_dir

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


def letta_auth(port: int, api_key: str) -> bool:
    """The server wants its password: an API call without it is refused (401), with it answered."""
    url = f"http://{HOST}:{port}/v1/agents/?limit=1"
    return http_status(url) == 401 and http_status(url, bearer=api_key, timeout=30) == 200


def start_letta(layout: Layout, port: int, pg_port: int, creds: Credentials, timeout: float) -> tuple[int, float]:
    """Start the server and wait for ``GET /v1/health/``; returns (pid, seconds)."""
    t0 = time.monotonic()
    if port_open(port):
        raise LettaHarnessError(f"port {port} (Letta) is already taken by another program: pass --letta-port")
    layout.launcher.write_bytes(PROGRAM.read_bytes())
    os.chmod(layout.launcher, 0o644)  # the service user runs it; only we write it
    own_dir(layout.run_dir)
    log = layout.logs / "letta.log"
    env = letta_env(
        layout,
        letta_pg_uri(pg_port, socket_dir(layout), creds.postgres_password),
        LETTA_SERVER_SECURE="true",
        LETTA_SERVER_PASSWORD=creds.letta_api_key,
        ARI_LETTA_EMBED_KEY=creds.embed_key,
    )
    proc = spawn_detached(
        as_service_user([str(layout.python), str(layout.launcher), "--host", HOST, "--port", str(port)]),
        log=log,
        cwd=layout.run_dir,
        env=env,
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
