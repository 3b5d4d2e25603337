"""Bring up a real Letta 0.16.7 server on this machine, offline, for tests, CI and users.

``up()`` assembles four things under one home directory (``--home``, else ``$ARI_LETTA_HOME``,
else ``~/.cache/ari-ledger/letta``):

1. a separate virtual environment ``<home>/venv`` with ``letta[server]==0.16.7`` installed against
   the 343 exact pins of letta's own lock file (``letta-0.16.7-lock-constraints.txt`` beside this
   module) -- unpinned installs of 0.16.7 no longer import;
2. PostgreSQL 16 + pgvector from the ``pgserver`` wheel (Postgres refuses to run as root, so as
   root it runs as ``nobody``), database ``letta`` with extension ``vector``;
3. letta's tables, made from its ORM (the wheel ships no migrations and the server makes none),
   plus the ``message_seq_id`` sequence its migrations would have made;
4. the project's own OpenAI-compatible embedding endpoint (``projections.adapters.embed_server``), so
   Letta embeds passages and queries offline;

and then starts the Letta server through a small launcher that works around a file-descriptor
bug of 0.16.7 (a new ``AsyncOpenAI`` client per embedding request, never closed: the garbage
collector's deferred close can unregister an fd a new asyncpg connection now owns, which then
hangs for 60 s) by reusing one client per configuration.

``down()`` stops all three processes; ``status()`` reports what runs. Everything the harness
started is recorded in ``<home>/state.json``; ``down()`` only ever stops pids recorded there,
after checking that the pid still is the process it started.

CLI: ``python -m projections.letta_server.harness up|down|status [--home DIR] [--json]``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledger.errors import LedgerError

__all__ = [
    "LETTA_VERSION",
    "EMBED_MODEL",
    "EMBED_DIM",
    "LettaHarnessError",
    "LettaInstallError",
    "LettaServer",
    "resolve_home",
    "up",
    "down",
    "status",
    "server",
    "is_installed",
    "pg_uri",
    "run",
    "add_arguments",
    "main",
]

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
EMBED_MODEL = "wordllama/l2_supercat_256"
EMBED_DIM = 256
DEFAULT_LETTA_PORT = 8283
DEFAULT_EMBED_PORT = 8284
DEFAULT_PG_PORT = 8285
PG_USER = "letta"
PG_DATABASE = "letta"
NOBODY = 65534
HOST = "127.0.0.1"

_INSTALL_MARKER = ".ari-ledger-install.json"
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
# Unix sockets are limited to 107 bytes of path; past that Postgres listens on TCP only.
_MAX_SOCKET_DIR = 90
# Environment variables that must not reach the Letta server: provider keys/endpoints (it must
# never call an LLM or register a provider from the user's environment), and the project's venv.
_SCRUB_SUFFIXES = ("_API_KEY", "_BASE_URL", "_API_BASE")
_SCRUB_NAMES = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PGPASSWORD", "PGHOST",
                "PGPORT", "PGUSER", "PGDATABASE"}
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


class LettaHarnessError(LedgerError):
    """The Letta server (or one of its parts) could not be installed, started, checked or stopped."""


class LettaInstallError(LettaHarnessError):
    """pip could not install Letta into the harness venv. ``network`` tells whether it looked offline."""

    def __init__(self, message: str, *, network: bool = False, log: Path | None = None) -> None:
        self.network = network
        self.log = log
        super().__init__(message)


@dataclasses.dataclass(frozen=True)
class LettaServer:
    """A running Letta server and what a client needs to use it."""

    home: str
    base_url: str
    embedding_url: str
    embedding_model: str
    embedding_dim: int
    letta_pid: int
    embed_pid: int
    pg_pid: int
    letta_port: int
    embed_port: int
    pg_port: int
    pg_uri: str

    @property
    def embedding_config(self) -> dict[str, Any]:
        """The inline ``embedding_config`` to pass to ``agents.create`` for this server."""
        return {
            "embedding_endpoint_type": "openai",
            "embedding_endpoint": self.embedding_url,
            "embedding_model": self.embedding_model,
            "embedding_dim": self.embedding_dim,
        }

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------- paths and state


def resolve_home(home: Path | str | None = None) -> Path:
    """``home``, else ``$ARI_LETTA_HOME``, else ``~/.cache/ari-ledger/letta`` (absolute)."""
    if home is None or str(home) == "":
        env = os.environ.get("ARI_LETTA_HOME")
        home = Path(env) if env else Path.home() / ".cache" / "ari-ledger" / "letta"
    return Path(home).expanduser().absolute()


@dataclasses.dataclass(frozen=True)
class _Layout:
    home: Path

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"

    @property
    def run_dir(self) -> Path:
        """Working directory and HOME of the Letta server (it writes openapi_letta.json there)."""
        return self.home / "run"

    @property
    def launcher(self) -> Path:
        return self.home / "letta_launcher.py"

    @property
    def schema_script(self) -> Path:
        return self.home / "create_schema.py"

    @property
    def pg_root(self) -> Path:
        """Where Postgres data (and, if needed, its binaries) live; readable by the pg user."""
        if os.geteuid() != 0 or _nobody_can_reach(self.home):
            return self.home / "pg"
        digest = hashlib.sha256(str(self.home).encode()).hexdigest()[:12]
        return Path("/var/tmp") / f"ari-ledger-letta-pg-{digest}"

    @property
    def pg_data(self) -> Path:
        return self.pg_root / "data"


def _nobody_can_reach(path: Path) -> bool:
    """True when every directory from / down to ``path``'s nearest existing ancestor is world-x."""
    p = path
    while not p.exists():
        p = p.parent
    for d in [p, *p.parents]:
        try:
            if not (d.stat().st_mode & 0o001):
                return False
        except OSError:
            return False
    return True


def _read_state(layout: _Layout) -> dict[str, Any]:
    try:
        return json.loads(layout.state_file.read_text())
    except (OSError, ValueError):
        return {}


def _write_state(layout: _Layout, state: dict[str, Any]) -> None:
    tmp = layout.state_file.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, layout.state_file)


@contextlib.contextmanager
def _locked(layout: _Layout) -> Iterator[None]:
    """One ``up``/``down`` at a time per home (pytest workers, a user's shell, CI)."""
    layout.home.mkdir(parents=True, exist_ok=True)
    with open(layout.home / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of the latest run in ``path`` (runs start with a ``====`` line)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    latest = text.rsplit("\n==== ", 1)
    if len(latest) == 2:
        text = "==== " + latest[1]
    tail = text.splitlines()[-lines:]
    return "\n".join("    " + line for line in tail) or "    (log is empty)"


def _note(message: str) -> None:
    print(f"[ari-ledger letta] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- processes


def _pid_alive(pid: int | None) -> bool:
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (our own exited child, not yet reaped) is not alive.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except (OSError, IndexError):
        pass
    return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _is_ours(pid: int | None, marker: str) -> bool:
    """The pid is alive and still the process we started (its command line has ``marker``)."""
    return bool(pid) and _pid_alive(pid) and marker in _cmdline(pid)  # type: ignore[arg-type]


def _port_open(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


# Health checks go straight to 127.0.0.1, never through a proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http_json(url: str, timeout: float = 3.0) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    with _DIRECT.open(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode())


def _no_proxy_env(env: dict[str, str]) -> dict[str, str]:
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


def _spawn_detached(cmd: list[str], *, log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    _rotate(log)
    with open(log, "ab") as fh:
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


def _terminate(pid: int | None, marker: str, *, grace: float = 20.0) -> bool:
    """SIGTERM the process group we started (pid == pgid), then SIGKILL after ``grace`` s."""
    if not _is_ours(pid, marker):
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
        if not _pid_alive(pid):
            return True
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL) if target_group else os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not _pid_alive(pid):
            break
        time.sleep(0.1)
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


# ----------------------------------------------------------------------------- 1. install


def _install_fingerprint() -> dict[str, Any]:
    try:
        constraints = hashlib.sha256(CONSTRAINTS_FILE.read_bytes()).hexdigest()
    except OSError as exc:
        raise LettaHarnessError(
            f"the pin file {CONSTRAINTS_FILE} is missing: reinstall ari-memory-ledger ({exc})"
        ) from exc
    return {"requirements": list(REQUIREMENTS), "constraints_sha256": constraints}


def _base_python() -> str:
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
        f"ARI_LETTA_PYTHON at it")


def is_installed(home: Path | str | None = None) -> bool:
    """True when ``<home>/venv`` holds exactly the package set this module installs."""
    layout = _Layout(resolve_home(home))
    return _installed(layout)


def _installed(layout: _Layout) -> bool:
    try:
        marker = json.loads((layout.venv / _INSTALL_MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker == _install_fingerprint() and layout.python.exists()


def _install(layout: _Layout) -> float:
    """Create the venv and pip-install the pinned set; returns seconds spent (0 when skipped)."""
    if _installed(layout):
        return 0.0
    fingerprint = _install_fingerprint()
    layout.logs.mkdir(parents=True, exist_ok=True)
    log = layout.logs / "install.log"
    _note(f"installing Letta {LETTA_VERSION} into {layout.venv}, about 2 minutes (log: {log})")
    t0 = time.monotonic()
    with contextlib.suppress(FileNotFoundError):
        (layout.venv / _INSTALL_MARKER).unlink()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_PROGRESS_BAR"] = "off"
    steps = []
    if not layout.python.exists():  # none yet, or its interpreter is gone: (re)create it
        steps.append([_base_python(), "-m", "venv", "--clear", str(layout.venv)])
    steps.append([str(layout.python), "-m", "pip", "install", "-U", "pip"])
    steps.append([str(layout.python), "-m", "pip", "install", "-c", str(CONSTRAINTS_FILE), *REQUIREMENTS])
    with open(log, "ab") as fh:
        for cmd in steps:
            fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} $ {' '.join(cmd)}\n".encode())
            fh.flush()
            rc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                env=env, cwd=layout.home).returncode
            if rc != 0:
                text = log.read_text(errors="replace")
                # Unreachable index: connection errors when pip retries, or (with retries off or
                # an index that lacks it) no version of letta at all.
                network = any(m in text for m in _NETWORK_ERROR_MARKERS) or (
                    "(from versions: none)" in text and "requirement letta" in text)
                why = ("the package index could not be reached (offline?)" if network
                       else "see the log")
                raise LettaInstallError(
                    f"installing Letta {LETTA_VERSION} failed at `{' '.join(cmd[2:5])} …` (exit {rc}): "
                    f"{why}. Log: {log}\nLast lines:\n{_log_tail(log)}\n"
                    f"Fix the cause, then run `python -m projections.letta_server.harness up` again "
                    f"(or delete {layout.venv} to start the install over).",
                    network=network,
                    log=log,
                )
    (layout.venv / _INSTALL_MARKER).write_text(json.dumps(fingerprint, indent=2) + "\n")
    return time.monotonic() - t0


# ----------------------------------------------------------------------------- 2. postgres


def _pgserver_bin(layout: _Layout) -> Path:
    """The directory with pgserver's ``initdb``/``pg_ctl``/``psql``, reachable by the pg user."""
    found = sorted(layout.venv.glob("lib/python3*/site-packages/pgserver/pginstall"))
    if not found:
        raise LettaHarnessError(
            f"pgserver's Postgres binaries are not in {layout.venv}: delete {layout.venv} and run up again"
        )
    pginstall = found[0]
    if os.geteuid() != 0:
        return pginstall / "bin"
    # As root, Postgres runs as nobody, who must reach and exec the binaries: the venv may lie
    # where nobody cannot go (e.g. under /root) or carry a restrictive umask's modes. Keep a
    # world-readable copy (35 MB) next to the data. The binaries find their libraries through
    # RPATH $ORIGIN/../../../pgserver.libs: copy both, keeping that shape.
    root = layout.pg_root
    _prepare_pg_root(root)
    dist = root / "dist"
    stamp = root / "dist.source"
    source = f"{pginstall} {(pginstall / 'bin' / 'postgres').stat().st_mtime_ns}"
    have = (dist / "pgserver" / "pginstall" / "bin" / "postgres").exists()
    current = stamp.exists() and stamp.read_text() == source
    if not have or (not current and _postmaster(layout) is None):  # never swap binaries under a live server
        if dist.exists():
            shutil.rmtree(dist)
        shutil.copytree(pginstall, dist / "pgserver" / "pginstall", symlinks=True)
        libs = pginstall.parent.parent / "pgserver.libs"
        if libs.is_dir():
            shutil.copytree(libs, dist / "pgserver.libs", symlinks=True)
        for d, _dirs, files in os.walk(dist):
            os.chmod(d, 0o755)
            for f in files:
                fp = os.path.join(d, f)
                if not os.path.islink(fp):
                    mode = os.stat(fp).st_mode
                    os.chmod(fp, mode | 0o444 | (0o111 if mode & 0o100 else 0))
        stamp.write_text(source)
    return dist / "pgserver" / "pginstall" / "bin"


def _prepare_pg_root(root: Path) -> None:
    if root.is_symlink():
        raise LettaHarnessError(f"{root} is a symlink; refusing to use it for Postgres data")
    root.mkdir(parents=True, exist_ok=True)
    st = root.stat()
    if st.st_uid != os.geteuid():
        raise LettaHarnessError(f"{root} is owned by uid {st.st_uid}, not by us; remove it or pick another --home")
    os.chmod(root, 0o755)


def _as_pg_user(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if not setpriv:
            raise LettaHarnessError(
                "Postgres refuses to run as root and `setpriv` (util-linux) is missing: "
                "apt-get install util-linux, or run as a normal user"
            )
        return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]
    return cmd


def _pg_env(bindir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update({"LC_ALL": "C", "LANG": "C", "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"})
    if os.geteuid() == 0:
        env["HOME"] = "/nonexistent"
    return env


def _pg_run(bindir: Path, args: list[str], *, cwd: Path, as_pg_user: bool = True,
            timeout: float = 120, check: bool = True, stdout: Any = None) -> subprocess.CompletedProcess:
    cmd = [str(bindir / args[0]), *args[1:]]
    if as_pg_user:
        cmd = _as_pg_user(cmd)
    proc = subprocess.run(cmd, cwd=cwd, env=_pg_env(bindir), stdin=subprocess.DEVNULL,
                          stdout=stdout if stdout is not None else subprocess.PIPE,
                          stderr=subprocess.STDOUT if stdout is not None else subprocess.PIPE,
                          timeout=timeout, text=True)
    if check and proc.returncode != 0:
        raise LettaHarnessError(
            f"`{' '.join(args)}` failed (exit {proc.returncode}): "
            f"{(proc.stderr or '').strip()} {(proc.stdout or '').strip()}")
    return proc


def _postmaster(layout: _Layout) -> tuple[int, int] | None:
    """(pid, port) of the Postgres running on our data dir, or None."""
    try:
        lines = (layout.pg_data / "postmaster.pid").read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    if not _pid_alive(pid) or "postgres" not in _cmdline(pid):
        return None
    return pid, port


def _psql(bindir: Path, layout: _Layout, port: int, sql: str, db: str = PG_DATABASE,
          check: bool = True) -> subprocess.CompletedProcess:
    return _pg_run(bindir, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", HOST, "-p", str(port),
                            "-U", PG_USER, "-d", db, "-tAc", sql],
                   cwd=layout.pg_root, as_pg_user=False, timeout=60, check=check)


def _start_postgres(layout: _Layout, pg_port: int, timeout: float) -> tuple[int, int, float]:
    """Init (once) and start Postgres; make database ``letta`` + ``vector``. Returns (pid, port, s)."""
    t0 = time.monotonic()
    bindir = _pgserver_bin(layout)
    root, data = layout.pg_root, layout.pg_data
    _prepare_pg_root(root)
    uid = NOBODY if os.geteuid() == 0 else os.geteuid()
    running = _postmaster(layout)
    if running is None:
        if not (data / "PG_VERSION").exists():
            if data.exists():
                shutil.rmtree(data)  # a half-made data dir from an interrupted initdb
            data.mkdir(mode=0o700)
            if os.geteuid() == 0:
                os.chown(data, NOBODY, NOBODY)
            _pg_run(bindir, ["initdb", "-D", str(data), "-U", PG_USER, "--auth=trust", "-E", "UTF8",
                             "--locale=C"], cwd=root)
        elif data.stat().st_uid != uid:
            raise LettaHarnessError(f"{data} belongs to uid {data.stat().st_uid}, but Postgres runs as uid {uid}: "
                                    f"chown -R {uid} {data}, or delete it to start with an empty database")
        with contextlib.suppress(FileNotFoundError):
            (data / "postmaster.pid").unlink()  # stale: its pid is gone (checked above)
        if _port_open(pg_port):
            raise LettaHarnessError(
                f"port {pg_port} (Postgres) is already taken by another program: pass --pg-port")
        sockdir = str(data) if len(str(data)) <= _MAX_SOCKET_DIR else ""
        opts = f"-c listen_addresses={HOST} -p {pg_port} -c unix_socket_directories='{sockdir}'"
        log = layout.logs / "postgres.log"
        for attempt in range(4):
            with open(log, "ab") as fh:
                fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} pg_ctl start on port {pg_port}\n".encode())
                fh.flush()
                # No -l: the server inherits this already-open log file, which the pg user could not open.
                proc = _pg_run(bindir, ["pg_ctl", "start", "-w", "-t", str(int(max(timeout, 10))), "-D", str(data),
                                        "-o", opts], cwd=root, check=False, stdout=fh, timeout=timeout + 30)
            if proc.returncode == 0:
                break
            # A postmaster killed a moment ago leaves a socket lock naming a pid that is not reaped
            # yet (or children still exiting): Postgres removes the stale lock once it is gone.
            if attempt < 3 and "already exists" in _log_tail(log, 12):
                time.sleep(2.0)
                continue
            raise LettaHarnessError(
                f"Postgres did not start on {HOST}:{pg_port} (pg_ctl exit {proc.returncode}). Log {log}:\n"
                f"{_log_tail(log)}")
        running = _postmaster(layout)
        if running is None:
            raise LettaHarnessError(f"Postgres started but wrote no usable postmaster.pid in {data}; log {log}:\n"
                                    f"{_log_tail(log)}")
    pid, port = running
    exists = _psql(bindir, layout, port, f"SELECT 1 FROM pg_database WHERE datname = '{PG_DATABASE}'",
                   db="postgres").stdout.strip()
    if exists != "1":
        _psql(bindir, layout, port, f"CREATE DATABASE {PG_DATABASE}", db="postgres")
    _psql(bindir, layout, port, "CREATE EXTENSION IF NOT EXISTS vector")
    return pid, port, time.monotonic() - t0


def _stop_postgres(layout: _Layout) -> bool:
    if _postmaster(layout) is None:
        return False
    try:
        bindir = _pgserver_bin(layout)
        _pg_run(bindir, ["pg_ctl", "stop", "-m", "fast", "-w", "-D", str(layout.pg_data)], cwd=layout.pg_root,
                timeout=90)
    except (LettaHarnessError, subprocess.TimeoutExpired):
        running = _postmaster(layout)
        if running:  # pg_ctl missing or stuck: the postmaster pid is ours (from our own data dir)
            with contextlib.suppress(ProcessLookupError):
                os.kill(running[0], signal.SIGQUIT)
    return True


def pg_uri(pg_port: int) -> str:
    return f"postgresql://{PG_USER}@{HOST}:{pg_port}/{PG_DATABASE}?sslmode=disable"


# ----------------------------------------------------------------------------- 3. schema

# A real file beside this module (linted, shipped as package data), copied to the home and run there.
_SCHEMA_SCRIPT = Path(__file__).with_name("create_schema.py").read_text()


def _schema_ready(layout: _Layout, port: int) -> bool:
    bindir = _pgserver_bin(layout)
    out = _psql(bindir, layout, port,
                "SELECT column_default FROM information_schema.columns "
                "WHERE table_name = 'messages' AND column_name = 'sequence_id'", check=False)
    return out.returncode == 0 and "message_seq_id" in out.stdout


def _create_schema(layout: _Layout, port: int, timeout: float) -> float:
    """Create the tables unless done (the DDL runs in one transaction, so the check is exact)."""
    if _schema_ready(layout, port):
        return 0.0
    t0 = time.monotonic()
    layout.schema_script.write_text(_SCHEMA_SCRIPT)
    log = layout.logs / "schema.log"
    with open(log, "ab") as fh:
        fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} create schema on port {port}\n".encode())
        fh.flush()
        try:
            rc = subprocess.run([str(layout.python), str(layout.schema_script)], cwd=layout.run_dir,
                                env=_letta_env(layout, port), stdin=subprocess.DEVNULL, stdout=fh,
                                stderr=subprocess.STDOUT, timeout=max(timeout, 120)).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    if rc != 0 or not _schema_ready(layout, port):
        raise LettaHarnessError(f"creating Letta's tables failed (exit {rc}). Log {log}:\n{_log_tail(log)}")
    return time.monotonic() - t0


# ----------------------------------------------------------------------------- 4. embeddings


def _embed_health(port: int) -> dict[str, Any] | None:
    try:
        h = _http_json(f"http://{HOST}:{port}/health", timeout=2)
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return h if isinstance(h, dict) and h.get("ok") is True else None


def _start_embed(layout: _Layout, port: int, timeout: float) -> tuple[int, dict[str, Any], float]:
    t0 = time.monotonic()
    if _port_open(port):
        raise LettaHarnessError(
            f"port {port} (embedding endpoint) is already taken by another program: pass --embed-port")
    try:
        import projections.adapters.embed_server  # noqa: F401  (fail early and clearly if it is missing)
    except ImportError as exc:
        raise LettaHarnessError(f"projections.adapters.embed_server cannot be imported ({exc}): is ari-memory-ledger "
                                f"installed completely in {sys.prefix}?") from exc
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    log = layout.logs / "embed.log"
    proc = _spawn_detached([sys.executable, "-m", "projections.adapters.embed_server", "--host", HOST, "--port", str(port)],
                           log=log, cwd=layout.home, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LettaHarnessError(f"the embedding endpoint exited at start (exit {proc.returncode}). "
                                    f"Log {log}:\n{_log_tail(log)}")
        health = _embed_health(port)
        if health:
            return proc.pid, health, time.monotonic() - t0
        time.sleep(0.25)
    _terminate(proc.pid, "projections.adapters.embed_server", grace=5)
    raise LettaHarnessError(f"the embedding endpoint did not answer GET /health on port {port} within "
                            f"{timeout:.0f} s. Log {log}:\n{_log_tail(log)}")


# ----------------------------------------------------------------------------- 5. letta

# A real file beside this module (linted, shipped as package data), copied to the home and run there.
_LAUNCHER = Path(__file__).with_name("launcher.py").read_text()


def _letta_env(layout: _Layout, pg_port: int) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _SCRUB_NAMES and not k.endswith(_SCRUB_SUFFIXES) and not k.startswith("LETTA_")
    }
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    env.update({
        "LETTA_PG_URI": pg_uri(pg_port),
        "HOME": str(layout.run_dir),
        "LETTA_DIR": str(layout.run_dir / ".letta"),
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{layout.venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    })
    return _no_proxy_env(env)


def _letta_health(port: int) -> dict[str, Any] | None:
    try:
        h = _http_json(f"http://{HOST}:{port}/v1/health/", timeout=3)
    except (OSError, ValueError, urllib.error.URLError):
        return None
    if isinstance(h, dict) and h.get("status") == "ok" and h.get("version") == LETTA_VERSION:
        return h
    return None


def _start_letta(layout: _Layout, port: int, pg_port: int, timeout: float) -> tuple[int, float]:
    t0 = time.monotonic()
    if _port_open(port):
        raise LettaHarnessError(f"port {port} (Letta) is already taken by another program: pass --letta-port")
    layout.launcher.write_text(_LAUNCHER)
    log = layout.logs / "letta.log"
    proc = _spawn_detached([str(layout.python), str(layout.launcher), "--host", HOST, "--port", str(port)],
                           log=log, cwd=layout.run_dir, env=_letta_env(layout, pg_port))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LettaHarnessError(f"the Letta server exited during start-up (exit {proc.returncode}). "
                                    f"Log {log}, last lines:\n{_log_tail(log)}")
        if _letta_health(port):
            return proc.pid, time.monotonic() - t0
        time.sleep(0.5)
    _terminate(proc.pid, str(layout.launcher), grace=10)
    raise LettaHarnessError(
        f"the Letta server did not answer GET /v1/health/ with version {LETTA_VERSION} on port {port} within "
        f"{timeout:.0f} s (16-27 s is usual). Log {log}, last lines:\n{_log_tail(log)}")


# ----------------------------------------------------------------------------- public API


def _server_from_state(layout: _Layout, state: dict[str, Any]) -> LettaServer:
    e, lt, pg = state["embed"], state["letta"], state["postgres"]
    return LettaServer(
        home=str(layout.home),
        base_url=lt["url"],
        embedding_url=e["url"],
        embedding_model=e["model"],
        embedding_dim=int(e["dim"]),
        letta_pid=int(lt["pid"]),
        embed_pid=int(e["pid"]),
        pg_pid=int(pg["pid"]),
        letta_port=int(lt["port"]),
        embed_port=int(e["port"]),
        pg_port=int(pg["port"]),
        pg_uri=pg["uri"],
    )


def _healthy(layout: _Layout, state: dict[str, Any]) -> bool:
    try:
        lt, e = state["letta"], state["embed"]
        running = _postmaster(layout)
        return (
            running is not None
            and running[1] == state["postgres"]["port"]
            and _is_ours(lt["pid"], str(layout.launcher))
            and _is_ours(e["pid"], "projections.adapters.embed_server")
            and _embed_health(e["port"]) is not None
            and _letta_health(lt["port"]) is not None
        )
    except (KeyError, TypeError):
        return False


def _preflight_ports(layout: _Layout, state: dict[str, Any], *, letta_port: int, embed_port: int,
                     pg_port: int) -> None:
    """Before starting anything: every port we will have to bind must be free."""
    taken = []
    if _postmaster(layout) is None and _port_open(pg_port):
        taken.append(f"{pg_port} (Postgres, --pg-port)")
    if not _is_ours((state.get("embed") or {}).get("pid"), "projections.adapters.embed_server") and _port_open(embed_port):
        taken.append(f"{embed_port} (embedding endpoint, --embed-port)")
    if not _is_ours((state.get("letta") or {}).get("pid"), str(layout.launcher)) and _port_open(letta_port):
        taken.append(f"{letta_port} (Letta, --letta-port)")
    if taken:
        raise LettaHarnessError(
            f"port(s) {', '.join(taken)} already taken by another program on {HOST}: stop it, or pick other "
            f"ports (a Letta of another home? see `status --home DIR`)")


def up(
    home: Path | str | None = None,
    *,
    letta_port: int = DEFAULT_LETTA_PORT,
    embed_port: int = DEFAULT_EMBED_PORT,
    pg_port: int = DEFAULT_PG_PORT,
    timeout: float = 300,
) -> LettaServer:
    """Install (once), start what is not running, and return the healthy server.

    Idempotent: when this home's server is already up and healthy it is returned as it is (with
    the ports it runs on, whatever ports are asked for). ``timeout`` bounds each wait for a
    process to become healthy (the one-time install has its own pace, about 2 minutes).
    Raises :class:`LettaInstallError` when pip fails, :class:`LettaHarnessError` otherwise.
    """
    layout = _Layout(resolve_home(home))
    with _locked(layout):
        state = _read_state(layout)
        if _healthy(layout, state):
            return _server_from_state(layout, state)
        _preflight_ports(layout, state, letta_port=letta_port, embed_port=embed_port, pg_port=pg_port)
        for d in (layout.logs, layout.run_dir):
            d.mkdir(parents=True, exist_ok=True)
        timings: dict[str, float] = {}
        timings["install_s"] = _install(layout)

        pg_pid, pg_port_used, timings["postgres_s"] = _start_postgres(layout, pg_port, timeout)
        state["postgres"] = {"pid": pg_pid, "port": pg_port_used, "uri": pg_uri(pg_port_used),
                             "data_dir": str(layout.pg_data)}
        state.update({"version": LETTA_VERSION, "home": str(layout.home)})
        _write_state(layout, state)

        timings["schema_s"] = _create_schema(layout, pg_port_used, timeout)

        e = state.get("embed") or {}
        health = _embed_health(e["port"]) if _is_ours(e.get("pid"), "projections.adapters.embed_server") else None
        if health is None:
            _terminate(e.get("pid"), "projections.adapters.embed_server", grace=5)
            e_pid, health, timings["embed_s"] = _start_embed(layout, embed_port, timeout)
            e = {"pid": e_pid, "port": embed_port}
        e.update({"url": f"http://{HOST}:{e['port']}/v1", "model": health.get("model", EMBED_MODEL),
                  "dim": int(health.get("dim", EMBED_DIM))})
        state["embed"] = e
        _write_state(layout, state)

        lt = state.get("letta") or {}
        ours = _is_ours(lt.get("pid"), str(layout.launcher))
        same_pg = lt.get("pg_port") == pg_port_used
        if not (ours and same_pg and _letta_health(lt["port"])):
            _terminate(lt.get("pid"), str(layout.launcher))
            l_pid, timings["letta_s"] = _start_letta(layout, letta_port, pg_port_used, timeout)
            lt = {"pid": l_pid, "port": letta_port, "pg_port": pg_port_used}
        lt["url"] = f"http://{HOST}:{lt['port']}"
        state["letta"] = lt
        state["last_up"] = {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                            **{k: round(v, 2) for k, v in timings.items()}}
        _write_state(layout, state)
        return _server_from_state(layout, state)


def down(home: Path | str | None = None) -> dict[str, bool]:
    """Stop Letta, the embedding endpoint and Postgres of this home (idempotent).

    Returns which of them were running and got stopped.
    """
    layout = _Layout(resolve_home(home))
    if not layout.home.exists():
        return {"letta": False, "embed": False, "postgres": False}
    with _locked(layout):
        state = _read_state(layout)
        stopped = {
            "letta": _terminate((state.get("letta") or {}).get("pid"), str(layout.launcher)),
            "embed": _terminate((state.get("embed") or {}).get("pid"), "projections.adapters.embed_server", grace=10),
            "postgres": _stop_postgres(layout),
        }
        for part in ("letta", "embed", "postgres"):
            if part in state:
                state[part]["pid"] = None
        if state:
            _write_state(layout, state)
        return stopped


def status(home: Path | str | None = None) -> dict[str, Any]:
    """What runs for this home: ``{"healthy", "installed", "home", "base_url", "letta", "embed", "postgres"}``."""
    layout = _Layout(resolve_home(home))
    state = _read_state(layout)
    lt, e, pg = state.get("letta") or {}, state.get("embed") or {}, state.get("postgres") or {}
    running_pg = _postmaster(layout)
    l_health = _letta_health(lt["port"]) if _is_ours(lt.get("pid"), str(layout.launcher)) else None
    e_health = _embed_health(e["port"]) if _is_ours(e.get("pid"), "projections.adapters.embed_server") else None
    out: dict[str, Any] = {
        "home": str(layout.home),
        "installed": _installed(layout),
        "letta": {"running": l_health is not None or _is_ours(lt.get("pid"), str(layout.launcher)),
                  "healthy": l_health is not None,
                  "pid": lt.get("pid") if _is_ours(lt.get("pid"), str(layout.launcher)) else None,
                  "port": lt.get("port"),
                  "url": lt.get("url"), "health": l_health, "log": str(layout.logs / "letta.log")},
        "embed": {"running": _is_ours(e.get("pid"), "projections.adapters.embed_server"), "healthy": e_health is not None,
                  "pid": e.get("pid") if _is_ours(e.get("pid"), "projections.adapters.embed_server") else None,
                  "port": e.get("port"), "url": e.get("url"), "model": e.get("model"),
                  "dim": e.get("dim"), "log": str(layout.logs / "embed.log")},
        "postgres": {"running": running_pg is not None, "pid": running_pg[0] if running_pg else None,
                     "port": running_pg[1] if running_pg else pg.get("port"), "uri": pg.get("uri"),
                     "data_dir": str(layout.pg_data), "log": str(layout.logs / "postgres.log")},
    }
    out["healthy"] = bool(l_health and e_health and running_pg)
    out["base_url"] = lt.get("url") if out["healthy"] else None
    out["embedding_url"] = e.get("url") if out["healthy"] else None
    if "last_up" in state:
        out["last_up"] = state["last_up"]
    return out


def server(home: Path | str | None = None) -> LettaServer | None:
    """The running healthy server of this home, or None (never starts anything)."""
    layout = _Layout(resolve_home(home))
    state = _read_state(layout)
    return _server_from_state(layout, state) if _healthy(layout, state) else None


# ----------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``up|down|status`` and their options to ``parser`` (reused by ``ari-ledger letta``)."""
    parser.add_argument("action", choices=("up", "down", "status"),
                        help="up: install once, start and wait for health; down: stop; status: report")
    parser.add_argument("--home", type=Path, default=None,
                        help="harness directory (default: $ARI_LETTA_HOME or ~/.cache/ari-ledger/letta)")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of text")
    parser.add_argument("--letta-port", type=int, default=DEFAULT_LETTA_PORT, help="(up) Letta port [%(default)s]")
    parser.add_argument("--embed-port", type=int, default=DEFAULT_EMBED_PORT,
                        help="(up) embedding endpoint port [%(default)s]")
    parser.add_argument("--pg-port", type=int, default=DEFAULT_PG_PORT, help="(up) Postgres port [%(default)s]")
    parser.add_argument("--timeout", type=float, default=300,
                        help="(up) seconds to wait for each process to become healthy [%(default)s]")


def run(args: argparse.Namespace) -> int:
    """Carry out parsed arguments (see :func:`add_arguments`); returns the exit code."""
    try:
        if args.action == "up":
            srv = up(args.home, letta_port=args.letta_port, embed_port=args.embed_port, pg_port=args.pg_port,
                     timeout=args.timeout)
            if args.json:
                print(json.dumps(srv.to_dict(), indent=2))
            else:
                print(f"Letta {LETTA_VERSION} is up at {srv.base_url} (pid {srv.letta_pid})")
                print(f"embeddings: {srv.embedding_url} ({srv.embedding_model}, dim {srv.embedding_dim}, "
                      f"pid {srv.embed_pid})")
                print(f"postgres:   {srv.pg_uri} (pid {srv.pg_pid})")
                print(f"home:       {srv.home}")
            return 0
        if args.action == "down":
            stopped = down(args.home)
            if args.json:
                print(json.dumps(stopped))
            else:
                names = [k for k, v in stopped.items() if v]
                print("stopped: " + ", ".join(names) if names else "nothing was running")
            return 0
        st = status(args.home)
        if args.json:
            print(json.dumps(st, indent=2))
        else:
            print(f"home:       {st['home']} (Letta {'installed' if st['installed'] else 'not installed'})")
            lt, e, pg = st["letta"], st["embed"], st["postgres"]
            print(f"letta:      {'healthy' if lt['healthy'] else 'running, unhealthy' if lt['running'] else 'down'}"
                  + (f" at {lt['url']} (pid {lt['pid']})" if lt["running"] else ""))
            print(f"embeddings: {'healthy' if e['healthy'] else 'running, unhealthy' if e['running'] else 'down'}"
                  + (f" at {e['url']} (pid {e['pid']})" if e["running"] else ""))
            print(f"postgres:   {'running' if pg['running'] else 'down'}"
                  + (f" on port {pg['port']} (pid {pg['pid']})" if pg["running"] else ""))
        return 0 if st["healthy"] else 1
    except LettaHarnessError as exc:
        if args.json:
            print(json.dumps({"ok": False, "error": str(exc)}))
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m projections.letta_server.harness",
                                     description="Run a real Letta 0.16.7 server offline for ari-memory-ledger.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
