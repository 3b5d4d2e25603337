"""4. The project's own OpenAI-compatible embedding endpoint, so Letta embeds offline.

It runs with this project's interpreter (``python -m projections.adapters.embed_server``, the
same static embedder as the embedded engine); that module name in its command line is how
up/down/status recognise it.

Owner only: it wants ``secrets/embed_key`` as a bearer key on every route but ``/health``
(``ARI_MEMORY_EMBED_KEY``), which Letta sends as its OpenAI key (see launcher.py), and run by
root it drops to ``nobody`` itself once its model is loaded (``--user``): this project's
interpreter may lie where ``nobody`` cannot go (e.g. a pyenv under /root). It holds no memory
(it turns texts into vectors); the key keeps other users from using or probing it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import urllib.error
from pathlib import Path
from typing import Any

from .credentials import Credentials
from .errors import LettaHarnessError
from .layout import Layout, log_tail
from .processes import HOST, http_json, http_status, port_open, spawn_detached, terminate
from .service import dropping, server_env, service_ids

EMBED_MODEL = "wordllama/l2_supercat_256"
EMBED_DIM = 256
EMBED_MODULE = "projections.adapters.embed_server"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


def embed_health(port: int) -> dict[str, Any] | None:
    try:
        h = http_json(f"http://{HOST}:{port}/health", timeout=2)
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return h if isinstance(h, dict) and h.get("ok") is True else None


def embed_auth(port: int, key: str) -> bool:
    """The endpoint wants its key: an embedding request without it is refused (401), with it answered."""
    url = f"http://{HOST}:{port}/v1/embeddings"
    body = {"input": "owner check", "model": EMBED_MODEL}
    return http_status(url, body=body) == 401 and http_status(url, body=body, bearer=key) == 200


def start_embed(layout: Layout, port: int, creds: Credentials, timeout: float) -> tuple[int, dict[str, Any], float]:
    """Start the endpoint and wait for its health; returns (pid, health, seconds)."""
    t0 = time.monotonic()
    if port_open(port):
        raise LettaHarnessError(
            f"port {port} (embedding endpoint) is already taken by another program: pass --embed-port"
        )
    # Fail early and clearly if the module is missing. Only look for it: the harness runs it as a
    # program and imports nothing of the layers (the import-linter contract says so).
    try:
        found = importlib.util.find_spec(EMBED_MODULE) is not None
    except ImportError:
        found = False
    if not found:
        raise LettaHarnessError(
            f"{EMBED_MODULE} cannot be found: is ari-memory-ledger installed completely in {sys.prefix}?"
        )
    env = server_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env["ARI_MEMORY_EMBED_KEY"] = creds.embed_key
    cmd = [sys.executable, "-m", EMBED_MODULE, "--host", HOST, "--port", str(port)]
    if dropping():
        cmd += ["--user", str(service_ids()[0])]
    log = layout.logs / "embed.log"
    proc = spawn_detached(cmd, log=log, cwd=Path("/") if dropping() else layout.home, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LettaHarnessError(
                f"the embedding endpoint exited at start (exit {proc.returncode}). Log {log}:\n{log_tail(log)}"
            )
        health = embed_health(port)
        if health:
            return proc.pid, health, time.monotonic() - t0
        time.sleep(0.25)
    terminate(proc.pid, EMBED_MODULE, grace=5)
    raise LettaHarnessError(
        f"the embedding endpoint did not answer GET /health on port {port} within "
        f"{timeout:.0f} s. Log {log}:\n{log_tail(log)}"
    )
