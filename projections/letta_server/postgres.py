"""2. PostgreSQL 16 + pgvector from the ``pgserver`` wheel: Letta 0.16.7 runs on Postgres only.

Postgres refuses to run as root, so as root it runs as ``nobody`` (binaries copied where nobody
can reach them, data dir owned by nobody); it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from .errors import LettaHarnessError
from .layout import Layout, log_tail
from .processes import HOST, cmdline, pid_alive, port_open

PG_USER = "letta"
PG_DATABASE = "letta"
NOBODY = 65534
# Unix sockets are limited to 107 bytes of path; past that Postgres listens on TCP only.
_MAX_SOCKET_DIR = 90


def pgserver_bin(layout: Layout) -> Path:
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
    if not have or (not current and postmaster(layout) is None):  # never swap binaries under a live server
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


def _pg_run(
    bindir: Path,
    args: list[str],
    *,
    cwd: Path,
    as_pg_user: bool = True,
    timeout: float = 120,
    check: bool = True,
    stdout: Any = None,
) -> subprocess.CompletedProcess:
    cmd = [str(bindir / args[0]), *args[1:]]
    if as_pg_user:
        cmd = _as_pg_user(cmd)
    proc = subprocess.run(
        cmd,
        check=False,
        cwd=cwd,
        env=_pg_env(bindir),
        stdin=subprocess.DEVNULL,
        stdout=stdout if stdout is not None else subprocess.PIPE,
        stderr=subprocess.STDOUT if stdout is not None else subprocess.PIPE,
        timeout=timeout,
        text=True,
    )
    if check and proc.returncode != 0:
        raise LettaHarnessError(
            f"`{' '.join(args)}` failed (exit {proc.returncode}): "
            f"{(proc.stderr or '').strip()} {(proc.stdout or '').strip()}"
        )
    return proc


def postmaster(layout: Layout) -> tuple[int, int] | None:
    """(pid, port) of the Postgres running on our data dir, or None."""
    try:
        lines = (layout.pg_data / "postmaster.pid").read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    if not pid_alive(pid) or "postgres" not in cmdline(pid):
        return None
    return pid, port


def psql(
    bindir: Path, layout: Layout, port: int, sql: str, db: str = PG_DATABASE, check: bool = True
) -> subprocess.CompletedProcess:
    return _pg_run(
        bindir,
        [
            "psql",
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            HOST,
            "-p",
            str(port),
            "-U",
            PG_USER,
            "-d",
            db,
            "-tAc",
            sql,
        ],
        cwd=layout.pg_root,
        as_pg_user=False,
        timeout=60,
        check=check,
    )


def start_postgres(layout: Layout, pg_port: int, timeout: float) -> tuple[int, int, float]:
    """Init (once) and start Postgres; make database ``letta`` + ``vector``. Returns (pid, port, s)."""
    t0 = time.monotonic()
    bindir = pgserver_bin(layout)
    root, data = layout.pg_root, layout.pg_data
    _prepare_pg_root(root)
    uid = NOBODY if os.geteuid() == 0 else os.geteuid()
    running = postmaster(layout)
    if running is None:
        if not (data / "PG_VERSION").exists():
            if data.exists():
                shutil.rmtree(data)  # a half-made data dir from an interrupted initdb
            data.mkdir(mode=0o700)
            if os.geteuid() == 0:
                os.chown(data, NOBODY, NOBODY)
            _pg_run(
                bindir, ["initdb", "-D", str(data), "-U", PG_USER, "--auth=trust", "-E", "UTF8", "--locale=C"], cwd=root
            )
        elif data.stat().st_uid != uid:
            raise LettaHarnessError(
                f"{data} belongs to uid {data.stat().st_uid}, but Postgres runs as uid {uid}: "
                f"chown -R {uid} {data}, or delete it to start with an empty database"
            )
        with contextlib.suppress(FileNotFoundError):
            (data / "postmaster.pid").unlink()  # stale: its pid is gone (checked above)
        if port_open(pg_port):
            raise LettaHarnessError(f"port {pg_port} (Postgres) is already taken by another program: pass --pg-port")
        sockdir = str(data) if len(str(data)) <= _MAX_SOCKET_DIR else ""
        opts = f"-c listen_addresses={HOST} -p {pg_port} -c unix_socket_directories='{sockdir}'"
        log = layout.logs / "postgres.log"
        for attempt in range(4):
            with open(log, "ab") as fh:
                fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} pg_ctl start on port {pg_port}\n".encode())
                fh.flush()
                # No -l: the server inherits this already-open log file, which the pg user could not open.
                proc = _pg_run(
                    bindir,
                    ["pg_ctl", "start", "-w", "-t", str(int(max(timeout, 10))), "-D", str(data), "-o", opts],
                    cwd=root,
                    check=False,
                    stdout=fh,
                    timeout=timeout + 30,
                )
            if proc.returncode == 0:
                break
            # A postmaster killed a moment ago leaves a socket lock naming a pid that is not reaped
            # yet (or children still exiting): Postgres removes the stale lock once it is gone.
            if attempt < 3 and "already exists" in log_tail(log, 12):
                time.sleep(2.0)
                continue
            raise LettaHarnessError(
                f"Postgres did not start on {HOST}:{pg_port} (pg_ctl exit {proc.returncode}). Log {log}:\n"
                f"{log_tail(log)}"
            )
        running = postmaster(layout)
        if running is None:
            raise LettaHarnessError(
                f"Postgres started but wrote no usable postmaster.pid in {data}; log {log}:\n{log_tail(log)}"
            )
    pid, port = running
    exists = psql(
        bindir, layout, port, f"SELECT 1 FROM pg_database WHERE datname = '{PG_DATABASE}'", db="postgres"
    ).stdout.strip()
    if exists != "1":
        psql(bindir, layout, port, f"CREATE DATABASE {PG_DATABASE}", db="postgres")
    psql(bindir, layout, port, "CREATE EXTENSION IF NOT EXISTS vector")
    return pid, port, time.monotonic() - t0


def stop_postgres(layout: Layout) -> bool:
    if postmaster(layout) is None:
        return False
    try:
        bindir = pgserver_bin(layout)
        _pg_run(
            bindir, ["pg_ctl", "stop", "-m", "fast", "-w", "-D", str(layout.pg_data)], cwd=layout.pg_root, timeout=90
        )
    except (LettaHarnessError, subprocess.TimeoutExpired):
        running = postmaster(layout)
        if running:  # pg_ctl missing or stuck: the postmaster pid is ours (from our own data dir)
            with contextlib.suppress(ProcessLookupError):
                os.kill(running[0], signal.SIGQUIT)
    return True


def pg_uri(pg_port: int) -> str:
    """How Letta (and the schema program) reach the database ``letta`` on ``pg_port``."""
    return f"postgresql://{PG_USER}@{HOST}:{pg_port}/{PG_DATABASE}?sslmode=disable"
