"""1. Letta in its own venv, ``<home>/venv``, installed against the exact pins of letta's own lock.

Unpinned installs of 0.16.7 no longer import (newer dependency releases), and its pins (pydantic
2.11, mcp 1.12, …) are not this project's: the project only talks to it over HTTP. Programs run
with that venv's interpreter get :func:`letta_env`, which keeps credentials, provider endpoints
and proxies out. Run by root, the venv is built on an interpreter ``nobody`` can run and lies
where ``nobody`` can read it (:attr:`.Layout.service_root`), since the server runs as ``nobody``.
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
from .service import dropping, open_to_others, runs_as_service_user, server_env

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


def _candidates() -> list[str]:
    """Interpreters 3.11-3.13: ours, then each ``python3.1x`` in every PATH directory (not only the
    first: a pyenv shim under /root may shadow a system one that nobody can run)."""
    out = []
    if (3, 11) <= sys.version_info[:2] <= (3, 13):
        out.append(getattr(sys, "_base_executable", None) or sys.executable)
    dirs = [*os.environ.get("PATH", "").split(os.pathsep), "/usr/local/bin", "/usr/bin"]
    for name in ("python3.13", "python3.12", "python3.11"):
        for d in dict.fromkeys(filter(None, dirs)):
            found = shutil.which(name, path=d)
            if found:
                out.append(found)
    return list(dict.fromkeys(out))


def base_python() -> str:
    """An interpreter Letta 0.16.7 supports (3.11-3.13): ``$ARI_LETTA_PYTHON``, ours, or one on PATH;
    as root, the first that ``nobody`` can run."""
    explicit = os.environ.get("ARI_LETTA_PYTHON")
    candidates = [explicit] if explicit else _candidates()
    for python in candidates:
        if not dropping() or runs_as_service_user(python):
            return python
    if explicit:
        raise LettaHarnessError(
            f"ARI_LETTA_PYTHON={explicit} cannot be run by nobody, who runs Letta when root runs `letta up`: "
            f"point it at a Python 3.11-3.13 outside root-only directories, or run as a normal user"
        )
    if candidates:
        raise LettaHarnessError(
            f"run as root, Letta runs as nobody, who cannot run any Python 3.11-3.13 here "
            f"({', '.join(candidates)}): install one system-wide (apt-get install python3.11-venv), point "
            f"ARI_LETTA_PYTHON at one nobody can run, or run as a normal user"
        )
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


def _adopt_legacy_venv(layout: Layout) -> None:
    """Move a venv an older harness made in the home to where the service user can reach it."""
    old, new = layout.legacy_venv, layout.venv
    if old == new or new.exists() or not (old / _INSTALL_MARKER).exists():
        return
    try:
        os.rename(old, new)
    except OSError:  # another file system: install afresh, leave the old one to its owner
        note(f"the Letta venv moves to {new} (nobody must reach it); {old} is no longer used: delete it")


def _usable(layout: Layout) -> bool:
    return layout.python.exists() and (not dropping() or runs_as_service_user(layout.python))


def install(layout: Layout) -> float:
    """Create the venv and pip-install the pinned set; returns seconds spent (0 when skipped)."""
    _adopt_legacy_venv(layout)
    if installed(layout) and _usable(layout):
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
    if not _usable(layout):  # none yet, its interpreter is gone, or nobody cannot run it: (re)create it
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
    if dropping():
        open_to_others(layout.venv)  # whatever root's umask: nobody reads it, only root writes it
    (layout.venv / _INSTALL_MARKER).write_text(json.dumps(fingerprint, indent=2) + "\n")
    return time.monotonic() - t0


def letta_env(layout: Layout, pg_uri: str, **extra: str) -> dict[str, str]:
    """The environment of a program run with the Letta venv's interpreter (server, schema): the
    caller's without credentials, provider endpoints or ``LETTA_*``, plus ``extra`` on purpose."""
    env = {
        k: v
        for k, v in server_env(drop_prefixes=("LETTA_",)).items()
        if k not in _SCRUB_NAMES and not k.endswith(_SCRUB_SUFFIXES)
    }
    env.update(
        {
            "LETTA_PG_URI": pg_uri,
            "HOME": str(layout.run_dir),
            "LETTA_DIR": str(layout.run_dir / ".letta"),
            "PYTHONUNBUFFERED": "1",
            "PATH": f"{layout.venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            **extra,
        }
    )
    return no_proxy_env(env)
