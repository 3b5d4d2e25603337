"""The processes the harness starts: each in its own session, logged, and stopped only after
checking that a recorded pid still is the process it started (pids get reused)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ledger.processes import pid_alive

HOST = "127.0.0.1"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_ours(pid: int | None, marker: str) -> bool:
    """The pid is alive and still the process we started (its command line has ``marker``)."""
    return bool(pid) and pid_alive(pid) and marker in cmdline(pid)  # type: ignore[arg-type]


def port_open(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


# Health checks go straight to 127.0.0.1, never through a proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_json(url: str, timeout: float = 3.0) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    with _DIRECT.open(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode())


def http_status(url: str, *, bearer: str | None = None, body: Any = None, timeout: float = 5.0) -> int | None:
    """The HTTP status of a GET (or a JSON POST when ``body`` is given), or None when nothing answers."""
    headers = {"Accept": "application/json"}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with _DIRECT.open(req, timeout=timeout) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        exc.read()
        return int(exc.code)
    except (OSError, ValueError):
        return None


def no_proxy_env(env: dict[str, str]) -> dict[str, str]:
    """Keep loopback traffic (Letta -> embeddings, Letta -> Postgres) off any configured proxy."""
    for key in ("NO_PROXY", "no_proxy"):
        parts = [p for p in env.get(key, "").split(",") if p.strip()]
        env[key] = ",".join(dict.fromkeys([*parts, HOST, "localhost"]))
    return env


_MAX_LOG_BYTES = 50 * 1024 * 1024


def _rotate(log: Path) -> None:
    """Keep one previous generation of a log once it passes 50 MB (Letta logs every request)."""
    with contextlib.suppress(OSError):
        if log.stat().st_size > _MAX_LOG_BYTES:
            os.replace(log, log.with_name(log.name + ".1"))


def spawn_detached(cmd: list[str], *, log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _rotate(log)
    # 0600: Letta prints its password at start; the server inherits this descriptor, opened by us.
    with open(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600), "ab") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
        fh.flush()
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            close_fds=True,
        )


def terminate(pid: int | None, marker: str, *, grace: float = 20.0) -> bool:
    """SIGTERM the process group we started (pid == pgid), then SIGKILL after ``grace`` s."""
    if not is_ours(pid, marker):
        return False
    assert pid is not None
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return False
    target_group = pgid == pid  # started with start_new_session: it leads its own group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM) if target_group else os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            return True
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL) if target_group else os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not pid_alive(pid):
            break
        time.sleep(0.1)
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
