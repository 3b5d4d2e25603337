"""1. Letta in its own venv, ``<home>/venv``, installed against the exact pins of letta's own lock.

Unpinned installs of 0.16.7 no longer import (newer dependency releases), and its pins (pydantic
2.11, mcp 1.12, …) are not this project's: the project only talks to it over HTTP. Programs run
with that venv's interpreter get :func:`letta_env`, which keeps provider keys and proxies out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .errors import LettaHarnessError, LettaInstallError
from .layout import Layout, log_tail, note
from .processes import no_proxy_env

LETTA_VERSION = "0.16.7"
PGSERVER_VERSION = "0.1.4"
CONSTRAINTS_FILE = Path(__file__).with_name(f"letta-{LETTA_VERSION}-lock-constraints.txt")
REQUIREMENTS: tuple[str, ...] = (
    f"letta[server]=={LETTA_VERSION}",
    "asyncpg",
    "pgvector",
    "pg8000",
    f"pgserver=={PGSERVER_VERSION}",
)

_INSTALL_MARKER = ".ari-ledger-install.json"
_NETWORK_ERROR_MARKERS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeoutError",
    "Connection refused",
    "ProxyError",
    "Read timed out",
    "No route to host",
)

# Environment variables that must not reach the Letta server: provider keys/endpoints (it must
# never call an LLM or register a provider from the user's environment), and the project's venv.
_SCRUB_SUFFIXES = ("_API_KEY", "_BASE_URL", "_API_BASE")
_SCRUB_NAMES = {
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "PYTHONSTARTUP",
    "PGPASSWORD",
    "PGHOST",
    "PGPORT",
    "PGUSER",
    "PGDATABASE",
}


def install_fingerprint() -> dict[str, Any]:
    try:
        constraints = hashlib.sha256(CONSTRAINTS_FILE.read_bytes()).hexdigest()
    except OSError as exc:
        raise LettaHarnessError(
            f"the pin file {CONSTRAINTS_FILE} is missing: reinstall ari-memory-ledger ({exc})"
        ) from exc
    return {"requirements": list(REQUIREMENTS), "constraints_sha256": constraints}


def base_python() -> str:
    """An interpreter Letta 0.16.7 supports (3.11-3.13): ``$ARI_LETTA_PYTHON``, ours, or one on PATH."""
    explicit = os.environ.get("ARI_LETTA_PYTHON")
    if explicit:
        return explicit
    if (3, 11) <= sys.version_info[:2] <= (3, 13):
        return getattr(sys, "_base_executable", None) or sys.executable
    for name in ("python3.13", "python3.12", "python3.11"):
        found = shutil.which(name)
        if found:
            return found
    raise LettaHarnessError(
        f"Letta {LETTA_VERSION} needs Python 3.11-3.13 for its own venv, this is "
        f"{sys.version_info.major}.{sys.version_info.minor} and none is on PATH: install one, or point "
        f"ARI_LETTA_PYTHON at it"
    )


def installed(layout: Layout) -> bool:
    try:
        marker = json.loads((layout.venv / _INSTALL_MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker == install_fingerprint() and layout.python.exists()


def install(layout: Layout) -> float:
    """Create the venv and pip-install the pinned set; returns seconds spent (0 when skipped)."""
    if installed(layout):
        return 0.0
    fingerprint = install_fingerprint()
    layout.logs.mkdir(parents=True, exist_ok=True)
    log = layout.logs / "install.log"
    note(f"installing Letta {LETTA_VERSION} into {layout.venv}, about 2 minutes (log: {log})")
    t0 = time.monotonic()
    with contextlib.suppress(FileNotFoundError):
        (layout.venv / _INSTALL_MARKER).unlink()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_PROGRESS_BAR"] = "off"
    steps = []
    if not layout.python.exists():  # none yet, or its interpreter is gone: (re)create it
        steps.append([base_python(), "-m", "venv", "--clear", str(layout.venv)])
    steps.append([str(layout.python), "-m", "pip", "install", "-U", "pip"])
    steps.append([str(layout.python), "-m", "pip", "install", "-c", str(CONSTRAINTS_FILE), *REQUIREMENTS])
    with open(log, "ab") as fh:
        for cmd in steps:
            fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} $ {' '.join(cmd)}\n".encode())
            fh.flush()
            rc = subprocess.run(
                cmd,
                check=False,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=layout.home,
            ).returncode
            if rc != 0:
                text = log.read_text(errors="replace")
                # Unreachable index: connection errors when pip retries, or (with retries off or
                # an index that lacks it) no version of letta at all.
                network = any(m in text for m in _NETWORK_ERROR_MARKERS) or (
                    "(from versions: none)" in text and "requirement letta" in text
                )
                why = "the package index could not be reached (offline?)" if network else "see the log"
                raise LettaInstallError(
                    f"installing Letta {LETTA_VERSION} failed at `{' '.join(cmd[2:5])} …` (exit {rc}): "
                    f"{why}. Log: {log}\nLast lines:\n{log_tail(log)}\n"
                    f"Fix the cause, then run `ari-ledger letta up` again "
                    f"(or delete {layout.venv} to start the install over).",
                    network=network,
                    log=log,
                )
    (layout.venv / _INSTALL_MARKER).write_text(json.dumps(fingerprint, indent=2) + "\n")
    return time.monotonic() - t0


def letta_env(layout: Layout, pg_uri: str) -> dict[str, str]:
    """The environment of a program run with the Letta venv's interpreter (server, schema)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _SCRUB_NAMES and not k.endswith(_SCRUB_SUFFIXES) and not k.startswith("LETTA_")
    }
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "LETTA_PG_URI": pg_uri,
            "HOME": str(layout.run_dir),
            "LETTA_DIR": str(layout.run_dir / ".letta"),
            "PYTHONUNBUFFERED": "1",
            "PATH": f"{layout.venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        }
    )
    return no_proxy_env(env)
