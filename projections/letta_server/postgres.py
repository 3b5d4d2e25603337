"""2. PostgreSQL 16 + pgvector from the ``pgserver`` wheel: Letta 0.16.7 runs on Postgres only.

Reachable by its owner only: no TCP at all (``listen_addresses=''``), one Unix socket in a 0700
directory of the service user (the data directory, or a short one under /tmp when that path is too
long for a socket), and even there the password (scram-sha-256) from ``secrets/postgres_password``.
As root it runs as ``nobody`` (:mod:`.service`; Postgres refuses root), binaries copied where
nobody can reach them. The password is set in single-user mode before each start, so a data
directory an older harness made with ``trust`` is never served open.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ledger.processes import pid_alive

from .errors import LettaHarnessError
from .layout import Layout, log_tail, shared_dir
from .processes import cmdline
from .service import as_service_user, dropping, server_env, service_ids

PG_USER = "letta"
PG_DATABASE = "letta"
# Unix sockets are limited to 107 bytes of path: a longer data directory gets its socket in /tmp.
_MAX_SOCKET_DIR = 90
# Who may connect, and how: the role over the socket, with its password; nothing else, no TCP.
HBA = (
    "# Written by ari-memory-ledger's Letta harness: the owner only. Unix socket (in a 0700\n"
    "# directory) with the password; no TCP (listen_addresses is empty), no other role.\n"
    f"local   all   {PG_USER}   scram-sha-256\n"
)


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
    shared_dir(root)
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


def _pg_env(bindir: Path, password: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in server_env().items() if not k.startswith("PG")}
    env.update({"LC_ALL": "C", "LANG": "C", "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"})
    if dropping():
        env["HOME"] = "/nonexistent"
    if password is not None:
        env["PGPASSWORD"] = password  # psql's only, on purpose
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
    password: str | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess:
    cmd = [str(bindir / args[0]), *args[1:]]
    if as_pg_user:
        cmd = as_service_user(cmd)
    proc = subprocess.run(
        cmd,
        check=False,
        cwd=cwd,
        env=_pg_env(bindir, password),
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
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


def socket_dir(layout: Layout) -> Path:
    """The directory of the server's one socket: the data dir (0700), or a 0700 one under /tmp."""
    data = layout.pg_data
    if len(str(data)) <= _MAX_SOCKET_DIR:
        return data
    return Path("/tmp") / f"ari-ledger-pg-{hashlib.sha256(str(data).encode()).hexdigest()[:12]}"


def _prepare_socket_dir(layout: Layout) -> Path:
    d = socket_dir(layout)
    if d == layout.pg_data:
        return d
    uid, gid = service_ids()
    if not d.exists() and not d.is_symlink():
        d.mkdir(mode=0o700)
        if dropping():
            os.chown(d, uid, gid)
    st = d.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        raise LettaHarnessError(f"{d} is not a 0700 directory of uid {uid}; remove it and run `letta up` again")
    return d


def psql(
    bindir: Path, layout: Layout, port: int, sql: str, password: str, db: str = PG_DATABASE, check: bool = True
) -> subprocess.CompletedProcess:
    """Run ``sql`` as the role, over the socket with the password (as root: root may enter the 0700 dir)."""
    return _pg_run(
        bindir,
        [
            "psql",
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(socket_dir(layout)),
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
        password=password,
    )


def _write_as_pg_user(path: Path, text: str) -> None:
    """Write a file of the data dir as its owner: root writing into nobody's directory could be led by a link."""
    if not dropping():
        path.write_text(text)
        return
    proc = subprocess.run(
        as_service_user(["/bin/sh", "-c", 'umask 077 && cat > "$1"', "sh", str(path)]),
        input=text,
        text=True,
        capture_output=True,
        check=False,
        timeout=30,
        env={"PATH": "/usr/bin:/bin"},
    )
    if proc.returncode != 0:
        raise LettaHarnessError(f"writing {path} as the Postgres user failed: {proc.stderr.strip()}")


def owner_only(layout: Layout, port: int, password: str) -> bool:
    """The running server only its owner reaches: our pg_hba, no TCP, and our password works."""
    return _owner_only(pgserver_bin(layout), layout, port, password)


def _owner_only(bindir: Path, layout: Layout, port: int, password: str) -> bool:
    try:
        hba = (layout.pg_data / "pg_hba.conf").read_text()
    except OSError:
        return False
    if hba != HBA:
        return False
    out = psql(bindir, layout, port, "SHOW listen_addresses", password, db="postgres", check=False)
    return out.returncode == 0 and out.stdout.strip() == ""


def _set_password(bindir: Path, layout: Layout, password: str) -> None:
    """The role's password set in single-user mode (no server runs, so no moment without it),
    then pg_hba.conf replaced by :data:`HBA`.

    One SCRAM iteration, not 4096: key stretching only slows guessing a weak password, and this
    one is 256 random bits; but Letta opens a connection per database session (no pool), and
    4096 iterations cost each ~40 ms (a passage insert took 0.8 s instead of 0.4)."""
    proc = _pg_run(
        bindir,
        ["postgres", "--single", "-D", str(layout.pg_data), "-c", "listen_addresses=", "postgres"],
        cwd=layout.pg_root,
        stdin=f"SET scram_iterations = 1;\nALTER ROLE {PG_USER} WITH PASSWORD '{password}';\n",
        check=False,
        timeout=120,
    )
    said = f"{proc.stdout or ''}{proc.stderr or ''}"
    if proc.returncode != 0 or "ERROR" in said or "FATAL" in said:
        raise LettaHarnessError(
            f"setting the Postgres password failed (exit {proc.returncode}): {said.strip().splitlines()[-1:]}"
        )
    _write_as_pg_user(layout.pg_data / "pg_hba.conf", HBA)


def start_postgres(layout: Layout, pg_port: int, password: str, timeout: float) -> tuple[int, int, float]:
    """Init (once) and start Postgres owner-only; make database ``letta`` + ``vector``. Returns (pid, port, s).

    A running server that is not owner-only (an older harness's) is stopped and started again."""
    t0 = time.monotonic()
    bindir = pgserver_bin(layout)
    root, data = layout.pg_root, layout.pg_data
    shared_dir(root)
    uid, gid = service_ids()
    running = postmaster(layout)
    if running is not None and not _owner_only(bindir, layout, running[1], password):
        stop_postgres(layout)
        running = None
    if running is None:
        if not (data / "PG_VERSION").exists():
            if data.exists():
                shutil.rmtree(data)  # a half-made data dir from an interrupted initdb
            data.mkdir(mode=0o700)
            if dropping():
                os.chown(data, uid, gid)
            # trust only in the file initdb writes: no server runs until _set_password replaced it.
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
        sockdir = _prepare_socket_dir(layout)
        if "," in str(sockdir) or "'" in str(sockdir):
            raise LettaHarnessError(f"the socket directory {sockdir} has a comma or quote: pick another --home")
        _set_password(bindir, layout, password)
        opts = (
            f"-c listen_addresses='' -p {pg_port} -c unix_socket_directories='{sockdir}' "
            f"-c unix_socket_permissions=0700"
        )
        log = layout.logs / "postgres.log"
        for attempt in range(4):
            with open(log, "ab") as fh:
                os.chmod(log, 0o600)
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
                f"Postgres did not start on socket {sockdir} port {pg_port} (pg_ctl exit {proc.returncode}). "
                f"Log {log}:\n{log_tail(log)}"
            )
        running = postmaster(layout)
        if running is None:
            raise LettaHarnessError(
                f"Postgres started but wrote no usable postmaster.pid in {data}; log {log}:\n{log_tail(log)}"
            )
    pid, port = running
    exists = psql(
        bindir, layout, port, f"SELECT 1 FROM pg_database WHERE datname = '{PG_DATABASE}'", password, db="postgres"
    ).stdout.strip()
    if exists != "1":
        psql(bindir, layout, port, f"CREATE DATABASE {PG_DATABASE}", password, db="postgres")
    psql(bindir, layout, port, "CREATE EXTENSION IF NOT EXISTS vector", password)
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


def pg_uri(pg_port: int, sockdir: Path | str) -> str:
    """Where the database is, for people and ``psql`` (libpq form; the password is not in it)."""
    return f"postgresql:///{PG_DATABASE}?host={quote(str(sockdir), safe='/')}&port={pg_port}&user={PG_USER}"


def letta_pg_uri(pg_port: int, sockdir: Path | str, password: str) -> str:
    """``LETTA_PG_URI``: the socket and the password. Letta rebuilds the URI for asyncpg and drops
    an empty host, so the netloc names localhost and ``host=`` (which wins) the socket directory."""
    return (
        f"postgresql://{PG_USER}:{password}@localhost:{pg_port}/{PG_DATABASE}"
        f"?host={quote(str(sockdir), safe='/')}&sslmode=disable"
    )
