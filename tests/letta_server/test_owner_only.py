"""The Letta stack reaches its owner only (issue 27): another local user can use none of it.

A throwaway second user (made with ``useradd`` for this module, removed after it; so root only,
as CI runs) tries each door: Postgres over its socket and over TCP, Letta's API and
``/v1/tools/run`` without the password, the embedding endpoint without its key, the secret files
and the log Letta prints its password into. The owner still gets through every door, no server
runs as root, and the servers carry no credentials from the caller's environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import socket
import stat
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from projections import letta_server as letta_harness
from projections.letta_server import LettaServer
from projections.letta_server.credentials import NAMES, secret_file
from projections.letta_server.install import letta_env
from projections.letta_server.layout import Layout, read_state
from projections.letta_server.lifecycle import _healthy
from projections.letta_server.postgres import (
    HBA,
    PG_DATABASE,
    PG_USER,
    _pg_run,
    _write_as_pg_user,
    pgserver_bin,
    postmaster,
    psql,
    socket_dir,
    stop_postgres,
)
from projections.letta_server.processes import port_open
from projections.letta_server.service import NOBODY, is_secret, server_env

pytestmark = pytest.mark.letta

TOOL = '''def whoami() -> str:
    """Say who runs tools.

    Returns:
        str: the uid
    """
    import os
    return str(os.getuid())
'''

# What the stranger runs to knock on an HTTP door: prints the status code of each request.
KNOCK = """
import json, sys, urllib.error, urllib.request
out = []
for method, url, body, auth in json.loads(sys.argv[1]):
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = auth
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=30) as r:
            out.append(r.status)
    except urllib.error.HTTPError as e:
        out.append(e.code)
print(json.dumps(out))
"""


@dataclasses.dataclass(frozen=True)
class Stranger:
    name: str
    uid: int
    gid: int

    def run(self, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """``cmd`` as this user: its own uid and group, no other group, nothing of our environment."""
        return subprocess.run(
            cmd,
            user=self.uid,
            group=self.gid,
            extra_groups=[],
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", **(env or {})},
            cwd="/",
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="module")
def stranger() -> Iterator[Stranger]:
    """A second local user, made for this module and removed after it."""
    if os.geteuid() != 0:
        pytest.skip("making a second local user to probe the stack with needs root (CI runs as root)")
    name = f"ariprobe{uuid.uuid4().hex[:8]}"
    subprocess.run(
        [
            "useradd",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            "--user-group",
            name,
        ],
        check=True,
        capture_output=True,
    )
    try:
        entry = pwd.getpwnam(name)
        yield Stranger(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)
        subprocess.run(["groupdel", name], check=False, capture_output=True)  # when userdel left it


@pytest.fixture(scope="module")
def layout(letta_server: LettaServer) -> Layout:
    return Layout(Path(letta_server.home))


def knock(stranger: Stranger, layout: Layout, requests: list[tuple[str, str, object, str | None]]) -> list[int]:
    """The stranger's HTTP requests, with the Letta venv's interpreter (one every user can run)."""
    run = stranger.run([str(layout.python), "-I", "-c", KNOCK, json.dumps(requests)])
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_a_stranger_cannot_reach_postgres(letta_server: LettaServer, layout: Layout, stranger: Stranger) -> None:
    psql_bin = str(pgserver_bin(layout) / "psql")
    port = str(letta_server.pg_port)
    over_socket = stranger.run(
        [psql_bin, "-X", "-h", str(socket_dir(layout)), "-p", port, "-U", PG_USER, "-d", PG_DATABASE, "-c", "SELECT 1"],
        env={"PGCONNECT_TIMEOUT": "5"},
    )
    assert over_socket.returncode != 0 and "Permission denied" in over_socket.stderr, over_socket
    over_tcp = stranger.run(
        [psql_bin, "-X", "-h", "127.0.0.1", "-p", port, "-U", PG_USER, "-d", PG_DATABASE, "-c", "SELECT 1"],
        env={"PGCONNECT_TIMEOUT": "5"},
    )
    assert over_tcp.returncode != 0 and "refused" in over_tcp.stderr, over_tcp
    # Nothing listens on TCP at all, and even the owner over the socket needs the password.
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex(("127.0.0.1", letta_server.pg_port)) != 0
    password = secret_file(layout, "postgres_password").read_text().strip()
    bindir = pgserver_bin(layout)
    assert psql(bindir, layout, letta_server.pg_port, "SHOW listen_addresses", password).stdout.strip() == ""
    wrong = psql(bindir, layout, letta_server.pg_port, "SELECT 1", "not-the-password", check=False)
    assert wrong.returncode != 0 and "password authentication failed" in wrong.stdout + wrong.stderr


def test_a_stranger_cannot_use_letta_without_its_password(
    letta_server: LettaServer, layout: Layout, stranger: Stranger
) -> None:
    agents = f"{letta_server.base_url}/v1/agents/?limit=1"
    run_tool = f"{letta_server.base_url}/v1/tools/run"
    tool = {"source_code": TOOL, "args": {}}
    codes = knock(
        stranger,
        layout,
        [
            ("GET", agents, None, None),
            ("POST", run_tool, tool, None),
            ("GET", agents, None, "Bearer guessed"),
            ("POST", run_tool, tool, "Bearer guessed"),
            ("GET", f"{letta_server.base_url}/v1/health/", None, None),
        ],
    )
    assert codes == [401, 401, 401, 401, 200]


def test_the_owner_gets_through_and_its_tools_do_not_run_as_root(letta_server: LettaServer) -> None:
    from letta_client import AuthenticationError, Letta

    owner = Letta(base_url=letta_server.base_url, api_key=letta_server.api_key)
    owner.agents.list(limit=1)  # raises AuthenticationError if refused
    with pytest.raises(AuthenticationError):
        Letta(base_url=letta_server.base_url, max_retries=0).agents.list(limit=1)
    req = urllib.request.Request(
        f"{letta_server.base_url}/v1/tools/run",
        data=json.dumps({"source_code": TOOL, "args": {}}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {letta_server.api_key}"},
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=120) as resp:
        ran = json.loads(resp.read())
    assert ran["status"] == "success"
    assert int(ran["tool_return"]) == (NOBODY if os.geteuid() == 0 else os.geteuid()) != 0


def test_a_stranger_cannot_use_the_embedding_endpoint(
    letta_server: LettaServer, layout: Layout, stranger: Stranger
) -> None:
    url = letta_server.embedding_url
    body = {"input": "who may embed", "model": letta_server.embedding_model}
    base = url.removesuffix("/v1")
    codes = knock(
        stranger,
        layout,
        [
            ("POST", f"{url}/embeddings", body, None),
            ("POST", f"{url}/embeddings", body, "Bearer guessed"),
            ("GET", f"{url}/models", None, None),
            ("GET", f"{base}/health", None, None),
        ],
    )
    assert codes == [401, 401, 401, 200]
    key = secret_file(layout, "embed_key").read_text().strip()
    req = urllib.request.Request(
        f"{url}/embeddings",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=30) as resp:
        assert len(json.loads(resp.read())["data"][0]["embedding"]) == letta_server.embedding_dim


def test_a_stranger_cannot_read_the_secrets_or_the_logs(layout: Layout, stranger: Stranger) -> None:
    assert stat.S_IMODE(layout.secrets.stat().st_mode) == 0o700
    assert stat.S_IMODE(layout.logs.stat().st_mode) == 0o700
    files = [secret_file(layout, name) for name in NAMES] + [layout.logs / "letta.log"]
    for path in files:
        st = path.stat()
        assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o600, path
        read = stranger.run(["cat", str(path)])
        assert read.returncode != 0 and "Permission denied" in read.stderr, path
    assert "Using secure mode with password" in (layout.logs / "letta.log").read_text(errors="replace")


# The secrets the harness hands its servers on purpose (Letta's password and database URI, the
# embedding key for Letta's launcher and for the endpoint); any other credential-like variable is not.
ALLOWED = {"LETTA_SERVER_PASSWORD", "LETTA_PG_URI", "ARI_LETTA_EMBED_KEY", "ARI_MEMORY_EMBED_KEY"}


def _uids(pid: int) -> list[int]:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("Uid:"))
    return [int(u) for u in line.split()[1:]]


def _environ(pid: int) -> list[tuple[str, str]]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return [(k, v) for k, _, v in (x.partition("=") for x in raw.split("\0") if "=" in x)]


def test_no_server_runs_as_root_nor_can_change_what_it_runs(letta_server: LettaServer, layout: Layout) -> None:
    """Each server runs as the service user, holds no credential but those the harness gave it,
    and cannot change the programs it runs."""
    service_uid = NOBODY if os.geteuid() == 0 else os.geteuid()
    # the stack as it runs now: earlier tests of the session may have restarted a server since
    # the fixture recorded its pids
    running = letta_harness.server(letta_server.home)
    assert running is not None, "the Letta stack is not up"
    for pid in (running.letta_pid, running.embed_pid, running.pg_pid):
        assert _uids(pid) == [service_uid] * 4, pid
        secretish = {k for k, v in _environ(pid) if is_secret(k, v)}
        assert secretish <= ALLOWED, (pid, secretish - ALLOWED)
    if os.geteuid() == 0:  # what nobody runs is root's and only root's to change
        for path in (layout.venv, layout.venv / "bin", layout.python.resolve(), layout.launcher):
            st = path.stat()
            assert st.st_uid == 0 and not st.st_mode & 0o022, path
        assert layout.run_dir.stat().st_uid == NOBODY and stat.S_IMODE(layout.run_dir.stat().st_mode) == 0o700


CALLER_SECRETS = {
    "OPENAI_API_KEY": "sk-caller",
    "HF_TOKEN": "hf_caller",
    "AWS_SECRET_ACCESS_KEY": "aws-caller",
    "GITHUB_TOKEN": "ghp_caller",
    "MY_DB_PASSWORD": "hunter2",
    "SSH_AUTH_SOCK": "/tmp/agent.sock",
    "HTTPS_PROXY": "http://user:pw@proxy.example:3128",
    "LETTA_SERVER_PASS": "caller-chosen",
}


def test_servers_get_no_credentials_from_the_caller(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in CALLER_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "C.UTF-8")
    base = server_env()
    env = letta_env(Layout(tmp_path), "postgresql://uri", LETTA_SERVER_PASSWORD="the-harness-sets-it")
    for made in (base, env):
        assert not set(CALLER_SECRETS) & set(made), made.keys()
        assert not {v for v in made.values()} & set(CALLER_SECRETS.values())
        assert made["LANG"] == "C.UTF-8"
    assert env["LETTA_SERVER_PASSWORD"] == "the-harness-sets-it"


def test_a_stack_without_the_owner_only_mark_is_not_trusted(letta_server: LettaServer, layout: Layout) -> None:
    """What an older harness left running (no mark in state.json, no secrets) is never handed out."""
    state = read_state(layout)
    assert state["owner_only"] == 1 and _healthy(layout, state)
    older = {k: v for k, v in state.items() if k != "owner_only"}
    assert not _healthy(layout, older)
    st = letta_harness.status()
    assert st["healthy"] and st["owner_only"] and st["api_key_file"] == letta_server.api_key_file


def test_up_closes_a_postgres_it_finds_open(letta_server: LettaServer, layout: Layout) -> None:
    """A Postgres serving trust over TCP (as an older harness ran it, or after a hand edit) is not
    handed out: ``up`` sets the password, writes its pg_hba and starts it again without TCP."""
    port = letta_server.pg_port
    stop_postgres(layout)
    try:
        _write_as_pg_user(layout.pg_data / "pg_hba.conf", "local all all trust\nhost all all 127.0.0.1/32 trust\n")
        opts = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories='{socket_dir(layout)}'"
        _pg_run(
            pgserver_bin(layout),
            ["pg_ctl", "start", "-w", "-l", "/dev/null", "-D", str(layout.pg_data), "-o", opts],
            cwd=layout.pg_root,
        )
        opened = postmaster(layout)
        assert opened is not None and port_open(port)  # open to every local user, as before issue 27
        assert letta_harness.server() is None
    finally:
        srv = letta_harness.up()
    assert srv.pg_pid != opened[0] and not port_open(port)
    assert (layout.pg_data / "pg_hba.conf").read_text() == HBA
    from letta_client import Letta

    Letta(base_url=srv.base_url, api_key=srv.api_key).agents.list(limit=1)  # Letta reaches it again


def test_the_client_environment_carries_aris_names(letta_server: LettaServer) -> None:
    """ARI passes a Letta password as LETTA_API_KEY (ari-skill-memory's config.py); so does the harness."""
    env = letta_server.client_env
    assert env == {
        "LETTA_BASE_URL": letta_server.base_url,
        "LETTA_API_KEY": letta_server.api_key,
        "ARI_MEMORY_EMBED_URL": letta_server.embedding_url,
    }
    shown = subprocess.run(
        [sys.executable, "-m", "projections.letta_server", "env", "--json"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0 and json.loads(shown.stdout) == env, shown.stderr
