"""The harness's public API: bring this home's Letta server up, down, or say how it is.

``up`` assembles the parts in order (install, Postgres, schema, embeddings, Letta), reusing what
already runs healthy; ``state.json`` records every pid it started, and ``down`` stops only those,
after checking each still is the process it started.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from .embeddings import EMBED_DIM, EMBED_MODEL, EMBED_MODULE, embed_health, start_embed
from .errors import LettaHarnessError
from .install import LETTA_VERSION, install, installed
from .layout import Layout, locked, read_state, resolve_home, write_state
from .letta_process import letta_health, letta_marker, start_letta
from .postgres import pg_uri, postmaster, start_postgres, stop_postgres
from .processes import HOST, is_ours, port_open, terminate
from .schema import create_schema

DEFAULT_LETTA_PORT = 8283
DEFAULT_EMBED_PORT = 8284
DEFAULT_PG_PORT = 8285


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


def is_installed(home: Path | str | None = None) -> bool:
    """True when ``<home>/venv`` holds exactly the package set this harness installs."""
    return installed(Layout(resolve_home(home)))


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
    )


def _healthy(layout: Layout, state: dict[str, Any]) -> bool:
    try:
        lt, e = state["letta"], state["embed"]
        running = postmaster(layout)
        return (
            running is not None
            and running[1] == state["postgres"]["port"]
            and is_ours(lt["pid"], letta_marker(layout))
            and is_ours(e["pid"], EMBED_MODULE)
            and embed_health(e["port"]) is not None
            and letta_health(lt["port"]) is not None
        )
    except (KeyError, TypeError):
        return False


def _preflight_ports(layout: Layout, state: dict[str, Any], *, letta_port: int, embed_port: int, pg_port: int) -> None:
    """Before starting anything: every port we will have to bind must be free."""
    taken = []
    if postmaster(layout) is None and port_open(pg_port):
        taken.append(f"{pg_port} (Postgres, --pg-port)")
    if not is_ours((state.get("embed") or {}).get("pid"), EMBED_MODULE) and port_open(embed_port):
        taken.append(f"{embed_port} (embedding endpoint, --embed-port)")
    if not is_ours((state.get("letta") or {}).get("pid"), letta_marker(layout)) and port_open(letta_port):
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
) -> LettaServer:
    """Install (once), start what is not running, and return the healthy server.

    Idempotent: when this home's server is already up and healthy it is returned as it is (with
    the ports it runs on, whatever ports are asked for). ``timeout`` bounds each wait for a
    process to become healthy (the one-time install has its own pace, about 2 minutes).
    Raises :class:`LettaInstallError` when pip fails, :class:`LettaHarnessError` otherwise.
    """
    layout = Layout(resolve_home(home))
    with locked(layout):
        state = read_state(layout)
        if _healthy(layout, state):
            return _server_from_state(layout, state)
        _preflight_ports(layout, state, letta_port=letta_port, embed_port=embed_port, pg_port=pg_port)
        for d in (layout.logs, layout.run_dir):
            d.mkdir(parents=True, exist_ok=True)
        timings: dict[str, float] = {}
        timings["install_s"] = install(layout)

        pg_pid, pg_port_used, timings["postgres_s"] = start_postgres(layout, pg_port, timeout)
        state["postgres"] = {
            "pid": pg_pid,
            "port": pg_port_used,
            "uri": pg_uri(pg_port_used),
            "data_dir": str(layout.pg_data),
        }
        state.update({"version": LETTA_VERSION, "home": str(layout.home)})
        write_state(layout, state)

        timings["schema_s"] = create_schema(layout, pg_port_used, timeout)

        e = state.get("embed") or {}
        health = embed_health(e["port"]) if is_ours(e.get("pid"), EMBED_MODULE) else None
        if health is None:
            terminate(e.get("pid"), EMBED_MODULE, grace=5)
            e_pid, health, timings["embed_s"] = start_embed(layout, embed_port, timeout)
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

        lt = state.get("letta") or {}
        ours = is_ours(lt.get("pid"), letta_marker(layout))
        same_pg = lt.get("pg_port") == pg_port_used
        if not (ours and same_pg and letta_health(lt["port"])):
            terminate(lt.get("pid"), letta_marker(layout))
            l_pid, timings["letta_s"] = start_letta(layout, letta_port, pg_port_used, timeout)
            lt = {"pid": l_pid, "port": letta_port, "pg_port": pg_port_used}
        lt["url"] = f"http://{HOST}:{lt['port']}"
        state["letta"] = lt
        state["last_up"] = {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **{k: round(v, 2) for k, v in timings.items()}}
        write_state(layout, state)
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
        stopped = {
            "letta": terminate((state.get("letta") or {}).get("pid"), letta_marker(layout)),
            "embed": terminate((state.get("embed") or {}).get("pid"), EMBED_MODULE, grace=10),
            "postgres": stop_postgres(layout),
        }
        for part in ("letta", "embed", "postgres"):
            if part in state:
                state[part]["pid"] = None
        if state:
            write_state(layout, state)
        return stopped


def status(home: Path | str | None = None) -> dict[str, Any]:
    """What runs for this home: ``{"healthy", "installed", "home", "base_url", "letta", "embed", "postgres"}``."""
    layout = Layout(resolve_home(home))
    state = read_state(layout)
    lt, e, pg = state.get("letta") or {}, state.get("embed") or {}, state.get("postgres") or {}
    running_pg = postmaster(layout)
    l_health = letta_health(lt["port"]) if is_ours(lt.get("pid"), letta_marker(layout)) else None
    e_health = embed_health(e["port"]) if is_ours(e.get("pid"), EMBED_MODULE) else None
    out: dict[str, Any] = {
        "home": str(layout.home),
        "installed": installed(layout),
        "letta": {
            "running": l_health is not None or is_ours(lt.get("pid"), letta_marker(layout)),
            "healthy": l_health is not None,
            "pid": lt.get("pid") if is_ours(lt.get("pid"), letta_marker(layout)) else None,
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
            "log": str(layout.logs / "postgres.log"),
        },
    }
    out["healthy"] = bool(l_health and e_health and running_pg)
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
