"""The harness's public API: bring this home's Letta server up, down, or say how it is.

``up`` assembles the parts in order (install, Postgres, schema, embeddings, Letta), reusing what
already runs healthy; ``state.json`` records every pid it started, and ``down`` stops only those,
after checking each still is the process it started.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .credentials import Credentials, ensure, load, secret_file
from .embeddings import EMBED_DIM, EMBED_MODEL, EMBED_MODULE, embed_auth, embed_health, start_embed
from .errors import LettaHarnessError
from .install import LETTA_VERSION, install, installed
from .layout import Layout, locked, note, prepare_home, read_state, resolve_home, write_state
from .letta_process import letta_auth, letta_health, letta_marker, start_letta
from .postgres import owner_only, pg_uri, postmaster, socket_dir, start_postgres, stop_postgres
from .processes import HOST, is_ours, port_open, terminate
from .schema import create_schema
from .service import own_dir

DEFAULT_LETTA_PORT = 8283
DEFAULT_EMBED_PORT = 8284
DEFAULT_PG_PORT = 8285
# state.json's mark of a stack started owner-only (passwords, no TCP for Postgres, no root).
# A state without it is an older harness's: its servers are stopped and started again, never reused.
OWNER_ONLY = 1
# What up() does, in order; ``progress(done, len(UP_STEPS))`` is called before the first and after each.
UP_STEPS = ("install Letta", "start Postgres", "create Letta's tables", "start the embedding endpoint", "start Letta")


@dataclasses.dataclass(frozen=True)
class LettaServer:
    """A running Letta server and what a client needs to use it (the password: :attr:`api_key`)."""

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
    api_key_file: str

    @property
    def api_key(self) -> str:
        """The server's password, for ``LETTA_API_KEY`` (read from :attr:`api_key_file`, 0600)."""
        return Path(self.api_key_file).read_text().strip()

    @property
    def client_env(self) -> dict[str, str]:
        """What a client of this server exports: ARI's ``LETTA_BASE_URL`` and ``LETTA_API_KEY``,
        and this library's ``ARI_MEMORY_EMBED_URL``."""
        return {
            "LETTA_BASE_URL": self.base_url,
            "LETTA_API_KEY": self.api_key,
            "ARI_MEMORY_EMBED_URL": self.embedding_url,
        }

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


def is_installed(home: Path | str | None = None) -> bool:
    """True when the harness venv holds exactly the package set this harness installs."""
    return installed(Layout(resolve_home(home)))


def _fingerprint(creds: Credentials) -> str:
    """Which secrets a running server was started with (a short hash; the secrets stay in their files)."""
    joined = "\0".join((creds.letta_api_key, creds.postgres_password, creds.embed_key))
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def _letta_markers(layout: Layout, lt: dict[str, Any]) -> list[str]:
    """How this home's Letta process may be recognised: as recorded, now, or by an older harness."""
    return list(dict.fromkeys(filter(None, [lt.get("marker"), letta_marker(layout), str(layout.legacy_launcher)])))


def _letta_is_ours(layout: Layout, lt: dict[str, Any]) -> bool:
    return any(is_ours(lt.get("pid"), m) for m in _letta_markers(layout, lt))


def _server_from_state(layout: Layout, state: dict[str, Any]) -> LettaServer:
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
        api_key_file=str(secret_file(layout, "letta_api_key")),
    )


def _healthy(layout: Layout, state: dict[str, Any]) -> bool:
    """Up, ours, and owner-only with this home's secrets (checked on the servers, not only in state.json)."""
    creds = load(layout)
    if creds is None or state.get("owner_only") != OWNER_ONLY:
        return False
    try:
        lt, e = state["letta"], state["embed"]
        running = postmaster(layout)
        return (
            running is not None
            and running[1] == state["postgres"]["port"]
            and lt.get("keys") == _fingerprint(creds)
            and is_ours(lt["pid"], letta_marker(layout))
            and is_ours(e["pid"], EMBED_MODULE)
            and embed_health(e["port"]) is not None
            and letta_health(lt["port"]) is not None
            and embed_auth(e["port"], creds.embed_key)
            and letta_auth(lt["port"], creds.letta_api_key)
            and owner_only(layout, running[1], creds.postgres_password)
        )
    except (KeyError, TypeError, LettaHarnessError):
        return False


def _stop_all(layout: Layout, state: dict[str, Any]) -> dict[str, bool]:
    lt = state.get("letta") or {}
    stopped = {
        "letta": any(terminate(lt.get("pid"), m) for m in _letta_markers(layout, lt)),
        "embed": terminate((state.get("embed") or {}).get("pid"), EMBED_MODULE, grace=10),
        "postgres": stop_postgres(layout),
    }
    for part in ("letta", "embed", "postgres"):
        if part in state:
            state[part]["pid"] = None
    return stopped


def _preflight_ports(layout: Layout, state: dict[str, Any], *, letta_port: int, embed_port: int) -> None:
    """Before starting anything: every port we will have to bind must be free (Postgres binds none)."""
    taken = []
    if not is_ours((state.get("embed") or {}).get("pid"), EMBED_MODULE) and port_open(embed_port):
        taken.append(f"{embed_port} (embedding endpoint, --embed-port)")
    if not _letta_is_ours(layout, state.get("letta") or {}) and port_open(letta_port):
        taken.append(f"{letta_port} (Letta, --letta-port)")
    if taken:
        raise LettaHarnessError(
            f"port(s) {', '.join(taken)} already taken by another program on {HOST}: stop it, or pick other "
            f"ports (a Letta of another home? see `status --home DIR`)"
        )


def up(
    home: Path | str | None = None,
    *,
    letta_port: int = DEFAULT_LETTA_PORT,
    embed_port: int = DEFAULT_EMBED_PORT,
    pg_port: int = DEFAULT_PG_PORT,
    timeout: float = 300,
    progress: Callable[[int, int], None] | None = None,
) -> LettaServer:
    """Install (once), start what is not running, and return the healthy server.

    Idempotent: when this home's server is already up, healthy and owner-only it is returned as it
    is (with the ports it runs on, whatever ports are asked for); a stack an older harness started
    without passwords is stopped and started again. ``timeout`` bounds each wait for a process to
    become healthy (the one-time install has its own pace, about 2 minutes). ``progress(done,
    total)`` is told each finished step of :data:`UP_STEPS`.
    Raises :class:`LettaInstallError` when pip fails, :class:`LettaHarnessError` otherwise.
    """
    layout = Layout(resolve_home(home))

    def step(done: int) -> None:
        if progress is not None:
            progress(done, len(UP_STEPS))

    with locked(layout):
        prepare_home(layout)
        state = read_state(layout)
        if state and state.get("owner_only") != OWNER_ONLY and any(_stop_all(layout, state).values()):
            note("stopped the Letta stack an older ari-ledger started open to every local user; starting it owner-only")
        creds = ensure(layout)
        if _healthy(layout, state):
            return _server_from_state(layout, state)
        _preflight_ports(layout, state, letta_port=letta_port, embed_port=embed_port)
        state.update({"version": LETTA_VERSION, "home": str(layout.home), "owner_only": OWNER_ONLY})
        write_state(layout, state)
        timings: dict[str, float] = {}
        step(0)
        timings["install_s"] = install(layout)
        step(1)

        pg_pid, pg_port_used, timings["postgres_s"] = start_postgres(layout, pg_port, creds.postgres_password, timeout)
        state["postgres"] = {
            "pid": pg_pid,
            "port": pg_port_used,
            "uri": pg_uri(pg_port_used, socket_dir(layout)),
            "data_dir": str(layout.pg_data),
            "socket_dir": str(socket_dir(layout)),
        }
        write_state(layout, state)
        step(2)

        own_dir(layout.run_dir)  # the servers' working directory: the service user's, 0700
        timings["schema_s"] = create_schema(layout, pg_port_used, creds.postgres_password, timeout)
        step(3)

        e = state.get("embed") or {}
        ours = is_ours(e.get("pid"), EMBED_MODULE)
        health = embed_health(e["port"]) if ours and embed_auth(e["port"], creds.embed_key) else None
        if health is None:
            terminate(e.get("pid"), EMBED_MODULE, grace=5)
            e_pid, health, timings["embed_s"] = start_embed(layout, embed_port, creds, timeout)
            e = {"pid": e_pid, "port": embed_port}
        e.update(
            {
                "url": f"http://{HOST}:{e['port']}/v1",
                "model": health.get("model", EMBED_MODEL),
                "dim": int(health.get("dim", EMBED_DIM)),
            }
        )
        state["embed"] = e
        write_state(layout, state)
        step(4)

        lt = state.get("letta") or {}
        reuse = (
            is_ours(lt.get("pid"), letta_marker(layout))
            and lt.get("pg_port") == pg_port_used
            and lt.get("keys") == _fingerprint(creds)
            and letta_health(lt["port"]) is not None
            and letta_auth(lt["port"], creds.letta_api_key)
        )
        if not reuse:
            for marker in _letta_markers(layout, lt):
                terminate(lt.get("pid"), marker)
            l_pid, timings["letta_s"] = start_letta(layout, letta_port, pg_port_used, creds, timeout)
            lt = {"pid": l_pid, "port": letta_port, "pg_port": pg_port_used}
        lt.update({"url": f"http://{HOST}:{lt['port']}", "marker": letta_marker(layout), "keys": _fingerprint(creds)})
        state["letta"] = lt
        state["last_up"] = {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **{k: round(v, 2) for k, v in timings.items()}}
        write_state(layout, state)
        step(5)
        if not letta_auth(lt["port"], creds.letta_api_key):
            raise LettaHarnessError(
                f"the Letta server on port {lt['port']} does not enforce its password; see {layout.logs}"
            )
        return _server_from_state(layout, state)


def down(home: Path | str | None = None) -> dict[str, bool]:
    """Stop Letta, the embedding endpoint and Postgres of this home (idempotent).

    Returns which of them were running and got stopped.
    """
    layout = Layout(resolve_home(home))
    if not layout.home.exists():
        return {"letta": False, "embed": False, "postgres": False}
    with locked(layout):
        state = read_state(layout)
        stopped = _stop_all(layout, state)
        if state:
            write_state(layout, state)
        return stopped


def status(home: Path | str | None = None) -> dict[str, Any]:
    """What runs for this home: ``{"healthy", "owner_only", "installed", "home", "base_url",
    "api_key_file", "letta", "embed", "postgres"}``; healthy means up and owner-only."""
    layout = Layout(resolve_home(home))
    state = read_state(layout)
    lt, e, pg = state.get("letta") or {}, state.get("embed") or {}, state.get("postgres") or {}
    running_pg = postmaster(layout)
    letta_ours = _letta_is_ours(layout, lt)
    l_health = letta_health(lt["port"]) if letta_ours else None
    e_health = embed_health(e["port"]) if is_ours(e.get("pid"), EMBED_MODULE) else None
    creds = load(layout)
    owner_only = bool(
        creds is not None
        and state.get("owner_only") == OWNER_ONLY
        and l_health
        and e_health
        and letta_auth(lt["port"], creds.letta_api_key)
        and embed_auth(e["port"], creds.embed_key)
    )
    key_file = secret_file(layout, "letta_api_key")
    out: dict[str, Any] = {
        "home": str(layout.home),
        "installed": installed(layout),
        "owner_only": owner_only,
        "api_key_file": str(key_file) if key_file.exists() else None,
        "letta": {
            "running": l_health is not None or letta_ours,
            "healthy": l_health is not None,
            "pid": lt.get("pid") if letta_ours else None,
            "port": lt.get("port"),
            "url": lt.get("url"),
            "health": l_health,
            "log": str(layout.logs / "letta.log"),
        },
        "embed": {
            "running": is_ours(e.get("pid"), EMBED_MODULE),
            "healthy": e_health is not None,
            "pid": e.get("pid") if is_ours(e.get("pid"), EMBED_MODULE) else None,
            "port": e.get("port"),
            "url": e.get("url"),
            "model": e.get("model"),
            "dim": e.get("dim"),
            "log": str(layout.logs / "embed.log"),
        },
        "postgres": {
            "running": running_pg is not None,
            "pid": running_pg[0] if running_pg else None,
            "port": running_pg[1] if running_pg else pg.get("port"),
            "uri": pg.get("uri"),
            "data_dir": str(layout.pg_data),
            "socket_dir": pg.get("socket_dir"),
            "log": str(layout.logs / "postgres.log"),
        },
    }
    out["healthy"] = bool(l_health and e_health and running_pg and owner_only)
    out["base_url"] = lt.get("url") if out["healthy"] else None
    out["embedding_url"] = e.get("url") if out["healthy"] else None
    if "last_up" in state:
        out["last_up"] = state["last_up"]
    return out


def server(home: Path | str | None = None) -> LettaServer | None:
    """The running healthy server of this home, or None (never starts anything)."""
    layout = Layout(resolve_home(home))
    state = read_state(layout)
    return _server_from_state(layout, state) if _healthy(layout, state) else None
